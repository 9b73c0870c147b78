// Tracing (docs/tracing.md, CONTRACT §14): a submit's W3C traceparent and tracestate are kept with the job and
// handed on: in the lease, to `acceptd worker`'s command (TRACEPARENT, TRACESTATE) and on its calls, and on the
// webhook deliveries; invalid values are ignored. With tracing.otlpEndpoint, spans go to a local OTLP receiver
// that decodes them with OpenTelemetry's own protobuf definitions (@opentelemetry/otlp-transformer's generated
// root, protobufjs) and finds one connected trace per job. sampleRatio 0 exports nothing but still propagates;
// a dead collector loses spans, never a submit.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { it, startDaemon, standardConfig, tenant, api } from './lib/daemon.mjs';
import { spawnWorker } from './lib/worker.mjs';
import { startReceiver } from './lib/webhooks.mjs';
import { complete, expectStatus, fail, getJob, lease, leaseOne, listAll, mapLimit, show, sleep, submit, waitUntil } from './lib/jobs.mjs';

const require = createRequire(import.meta.url);
const otlp = require('@opentelemetry/otlp-transformer/build/src/generated/root.js').opentelemetry.proto;
const ExportRequest = otlp.collector.trace.v1.ExportTraceServiceRequest;

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1;
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const TP = `00-${TRACE}-${CLIENT_SPAN}-01`;
const HEX16 = /^[0-9a-f]{16}$/;
const WEBHOOKS = `webhooks:
  allowNetworks: ["127.0.0.0/8", "::1/128"]
  retrySchedule: ["0", "300ms", "300ms"]
  timeoutSeconds: 5
retryBackoff: 100ms
`;

/** Split a version 00 traceparent into {trace, parent, flags}; fails on anything else. */
function parseTp(tp) {
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(tp ?? '');
    assert.ok(m, `not a version 00 traceparent: ${tp}`);
    return { trace: m[1], parent: m[2], flags: m[3] };
}

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-tracing-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

/** A forwarding proxy on loopback that records each request's method, path and headers: what `acceptd worker` sent. */
async function startProxy(target) {
    const seen = [];
    const server = http.createServer((req, res) => {
        seen.push({ method: req.method, path: req.url, headers: req.headers });
        const u = new URL(target);
        const fwd = http.request({ host: u.hostname, port: u.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
            res.writeHead(up.statusCode, up.headers);
            up.pipe(res);
        });
        fwd.on('error', () => res.destroy());
        req.pipe(fwd);
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { seen, url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => { server.close(r); server.closeAllConnections(); }) };
}

/** The job id and event type of a delivery (the event names its job by URL). */
function eventOf(q) {
    const e = JSON.parse(q.body);
    return { type: e.type, job: String(e.data?.job ?? '').split('/').pop() };
}

/** Register an endpoint of t for every event at rx; returns its secret. */
async function addEndpoint(t, rx) {
    return expectStatus(await t.c.post('/v1/webhooks', { url: `${rx.url}/hook` }), 201).json;
}

describe('trace context: kept with the job and handed on', () => {
    let d, rx;
    before(async () => {
        d = await startDaemon({ config: `${standardConfig()}${WEBHOOKS}` });
        rx = await startReceiver();
    });
    after(async () => {
        await rx?.close();
        await d?.stop();
    });

    it('survives submit -> lease -> acceptd worker env and calls -> webhook', async () => {
        const t = tenant(d);
        await addEndpoint(t, rx);
        const dir = fs.mkdtempSync(path.join(tmpRoot, 'w-'));
        fs.writeFileSync(path.join(dir, 'job.sh'), `#!/bin/sh\ncat >/dev/null\nprintf '%s\\n%s\\n' "$TRACEPARENT" "$TRACESTATE" > "$OUT/$ACCEPTD_JOB_ID"\necho '{"ok":true}'\n`, { mode: 0o755 });
        const proxy = await startProxy(d.url);
        const id = (await submit(t.c, { type: 'report.export', payload: {} }, { headers: { traceparent: TP, tracestate: 'congo=t61rcWkgMzE, rojo=00f067aa0ba902b7' } })).json.id;
        const w = spawnWorker(['worker', '--url', proxy.url, '--type', 'report.export', '--lease-wait', '1', '--', path.join(dir, 'job.sh')],
            { ...process.env, ACCEPTD_KEY: t.keys.w, OUT: dir, TRACEPARENT: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` });
        try {
            await waitUntil(() => getJob(t.c, id), (j) => j?.status === 'succeeded', { timeoutMs: 20_000 * SLOW, what: 'the job to succeed' });
        } finally {
            await w.stopClean();
            await proxy.close();
        }
        const [envTp, envTs] = fs.readFileSync(path.join(dir, id), 'utf8').split('\n');
        const attempt = parseTp(envTp);
        assert.equal(attempt.trace, TRACE, 'the command runs in the submit\'s trace (not the worker\'s own TRACEPARENT)');
        assert.match(attempt.parent, HEX16);
        assert.notEqual(attempt.parent, CLIENT_SPAN, 'the parent is acceptd\'s span of the attempt');
        assert.equal(envTs, `acceptd=${attempt.parent},congo=t61rcWkgMzE,rojo=00f067aa0ba902b7`);
        // Every call the worker made for the job carried the attempt's traceparent; the lease request did not.
        const jobCalls = proxy.seen.filter((q) => q.path.startsWith(`/v1/jobs/${id}`));
        assert.ok(jobCalls.length >= 1, JSON.stringify(proxy.seen.map((q) => q.path)));
        for (const q of jobCalls) assert.equal(q.headers.traceparent, envTp, `${q.method} ${q.path}`);
        for (const q of proxy.seen.filter((x) => x.path === '/v1/leases')) assert.equal(q.headers.traceparent, undefined);
        // Each delivery attempt is a span of its own in the trace, acceptd's entry at the tracestate's left.
        const reqs = await rx.waitFor((rs) => rs.filter((q) => eventOf(q).job === id && eventOf(q).type === 'job.succeeded').length === 1,
            { what: 'the job.succeeded delivery' });
        const mine = reqs.filter((q) => eventOf(q).job === id);
        const parents = new Set();
        for (const q of mine) {
            const h = parseTp(q.headers.traceparent);
            assert.equal(h.trace, TRACE);
            assert.equal(h.flags, '01');
            parents.add(h.parent);
            assert.equal(q.headers.tracestate, `acceptd=${h.parent},congo=t61rcWkgMzE,rojo=00f067aa0ba902b7`);
        }
        assert.equal(parents.size, mine.length, 'a span per delivery');
        assert.ok(!parents.has(attempt.parent) && !parents.has(CLIENT_SPAN));
    });

    it('a lease carries the trace with a span per attempt; lean leases too; the tracestate entry is replaced', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: 'email.send', payload: {} }, { headers: { traceparent: TP, tracestate: `acceptd=0123456789abcdef,x=1` } })).json.id;
        const l1 = await leaseOne(t.w, 'email.send', { expectId: id });
        const a1 = parseTp(l1.traceparent);
        assert.equal(a1.trace, TRACE);
        assert.equal(a1.flags, '01');
        assert.equal(l1.tracestate, `acceptd=${a1.parent},x=1`, 'the older acceptd entry is replaced');
        await fail(t.w, id, l1.leaseId);
        await sleep(150);
        const res = expectStatus(await t.w.req('POST', '/v1/leases', { body: { types: ['email.send'], wait: 2 }, headers: { prefer: 'return=minimal' } }), 200);
        const l2 = res.json.leases[0];
        assert.equal(l2.id, id, show(res));
        const a2 = parseTp(l2.traceparent);
        assert.equal(a2.trace, TRACE);
        assert.notEqual(a2.parent, a1.parent, 'each attempt is a span of its own');
        assert.equal(l2.tracestate, `acceptd=${a2.parent},x=1`);
        // Without a traceparent (and no export), a job has no trace context and a lease none either.
        const plain = (await submit(t.c, { type: 'image.resize', payload: {} })).json.id;
        const l3 = await leaseOne(t.w, 'image.resize', { expectId: plain });
        assert.equal(l3.traceparent, undefined);
        assert.equal(l3.tracestate, undefined);
        // The job shows its trace id (the dashboard's), the plain one none.
        assert.equal((await getJob(t.c, id)).traceId, TRACE);
        assert.equal('traceId' in (await getJob(t.c, plain)), false);
        assert.equal('traceViewer' in expectStatus(await api(d).get('/healthz'), 200).json, false);
    });

    it('ignores an invalid traceparent, and its tracestate with it', async () => {
        const t = tenant(d);
        const invalid = [
            ['uppercase hex', `00-${TRACE.toUpperCase()}-${CLIENT_SPAN}-01`],
            ['all-zero trace id', `00-${'0'.repeat(32)}-${CLIENT_SPAN}-01`],
            ['all-zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`],
            ['version ff', `ff-${TRACE}-${CLIENT_SPAN}-01`],
            ['version 00 with more after the flags', `${TP}-extra`],
            ['a short trace id', `00-${TRACE.slice(1)}-${CLIENT_SPAN}-01`],
            ['a long parent id', `00-${TRACE}-${CLIENT_SPAN}0-01`],
            ['wrong separators', `00_${TRACE}_${CLIENT_SPAN}_01`],
            ['a non-hex version', `0x-${TRACE}-${CLIENT_SPAN}-01`],
            ['non-hex flags', `00-${TRACE}-${CLIENT_SPAN}-0g`],
            ['a later version whose next field runs on', `01-${TRACE}-${CLIENT_SPAN}-01x`],
            ['empty', ''],
            ['two values', `${TP}, ${TP}`],
        ];
        for (const [what, value] of invalid) {
            const id = (await submit(t.c, { type: 'report.export', payload: {} }, { headers: { traceparent: value, tracestate: 'congo=1' } })).json.id;
            const l = await leaseOne(t.w, 'report.export', { expectId: id });
            assert.equal(l.traceparent, undefined, `${what}: ${value}`);
            assert.equal(l.tracestate, undefined, what);
            await complete(t.w, id, l.leaseId);
        }
        // A later version is read as 00 would be and handed on as 00; only the sampled flag is kept.
        const id = (await submit(t.c, { type: 'report.export', payload: {} }, { headers: { traceparent: `cc-${TRACE}-${CLIENT_SPAN}-03-what-comes-next` } })).json.id;
        const l = await leaseOne(t.w, 'report.export', { expectId: id });
        const a = parseTp(l.traceparent);
        assert.equal(a.trace, TRACE);
        assert.equal(a.flags, '01');
        assert.equal(l.tracestate, `acceptd=${a.parent}`);
    });

    it('keeps at most 32 valid tracestate members, dropping invalid ones', async () => {
        const t = tenant(d);
        const members = [];
        for (let i = 0; i < 40; i++) members.push(`k${i}=v${i}`);
        members.splice(3, 0, 'Bad=upper', 'novalue=', 'sp ace=1', 'x@=1', 'tenant@sys=ok', 'k5=duplicate');
        const id = (await submit(t.c, { type: 'report.export', payload: {} }, { headers: { traceparent: TP, tracestate: members.join(' , ') } })).json.id;
        const l = await leaseOne(t.w, 'report.export', { expectId: id });
        const got = l.tracestate.split(',');
        const span = parseTp(l.traceparent).parent;
        assert.equal(got.length, 32, l.tracestate);
        assert.equal(got[0], `acceptd=${span}`);
        assert.deepEqual(got.slice(1, 5), ['k0=v0', 'k1=v1', 'k2=v2', 'tenant@sys=ok']);
        assert.ok(got.includes('k5=duplicate') && !got.includes('k5=v5'), 'a repeated key keeps its first member');
        assert.ok(got.every((m) => /^[a-z0-9@_*/-]+=[^,=]+$/.test(m)), l.tracestate);
    });

    it('gives every job of a batch the request\'s trace, each with a submit span of its own', async () => {
        const t = tenant(d);
        const res = expectStatus(await t.c.req('POST', '/v1/jobs:batch', { body: { jobs: [{ type: 'video.transcode', payload: { sourceUrl: 'x' } }, { type: 'video.transcode', payload: { sourceUrl: 'y' } }] }, headers: { traceparent: TP } }), 207);
        const ids = res.json.results.map((r) => r.id);
        const leased = expectStatus(await lease(t.w, 'video.transcode', { max: 2 }), 200).json.leases;
        assert.deepEqual(leased.map((l) => l.job.id).sort(), [...ids].sort());
        const spans = leased.map((l) => parseTp(l.traceparent));
        assert.ok(spans.every((s) => s.trace === TRACE));
        assert.notEqual(spans[0].parent, spans[1].parent);
    });
});

describe('trace context of the jobs acceptd makes itself (no export)', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('a :retry\'s job continues the trace of the job it retries, with its tracestate', async () => {
        const t = tenant(d);
        const old = (await submit(t.c, { type: 'email.send', payload: {} }, { headers: { traceparent: TP, tracestate: 'congo=1' } })).json.id;
        expectStatus(await t.c.del(`/v1/jobs/${old}`), 200);
        const id = expectStatus(await t.c.post(`/v1/jobs/${old}:retry`), 202).json.id;
        assert.notEqual(id, old);
        const l = await leaseOne(t.w, 'email.send', { expectId: id });
        const a = parseTp(l.traceparent);
        assert.equal(a.trace, TRACE, 'the retried job\'s trace');
        assert.equal(a.flags, '01');
        assert.equal(l.tracestate, `acceptd=${a.parent},congo=1`);
        assert.equal((await getJob(t.c, id)).traceId, TRACE);
    });
});

// ---- export ----

/** An OTLP/HTTP receiver on loopback: each POST /v1/traces body decoded with OpenTelemetry's protos. */
async function startCollector() {
    const c = { requests: [], spans: [], errors: [] };
    const server = http.createServer((req, res) => {
        const chunks = [];
        req.on('data', (x) => chunks.push(x));
        req.on('end', () => {
            const body = Buffer.concat(chunks).toString('utf8');
            c.requests.push({ path: req.url, headers: req.headers, body });
            try {
                c.spans.push(...decodeOtlpJson(body));
            } catch (e) {
                c.errors.push(e);
            }
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end('{}');
        });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    c.url = `http://127.0.0.1:${server.address().port}/v1/traces`;
    c.close = () => new Promise((r) => { server.close(r); server.closeAllConnections(); });
    return c;
}

const ID_FIELDS = ['traceId', 'spanId', 'parentSpanId'];

/** Decode an OTLP/JSON export with the ExportTraceServiceRequest of opentelemetry-proto: ids are hex in OTLP's JSON
 * (bytes are base64 in protobuf's), everything else as protobuf's JSON mapping. The message is encoded to protobuf
 * bytes and decoded again, and must come back equal to what was sent: a field the proto does not have, or of
 * another type, fails. Returns the spans, each with its resource and scope. */
function decodeOtlpJson(text) {
    const sent = JSON.parse(text);
    const asProto = structuredClone(sent);
    for (const rs of asProto.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
                for (const f of ID_FIELDS) if (s[f] !== undefined) s[f] = Buffer.from(s[f], 'hex').toString('base64');
    const wire = ExportRequest.encode(ExportRequest.fromObject(asProto)).finish();
    const back = ExportRequest.toObject(ExportRequest.decode(wire), { longs: String, enums: Number, bytes: String });
    for (const rs of back.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
                for (const f of ID_FIELDS) if (s[f] !== undefined) s[f] = Buffer.from(s[f], 'base64').toString('hex');
    assert.deepEqual(back, sent, 'the export is not exactly an OTLP ExportTraceServiceRequest');
    const out = [];
    for (const rs of back.resourceSpans)
        for (const ss of rs.scopeSpans)
            for (const s of ss.spans) {
                const attrs = {};
                for (const a of s.attributes ?? []) attrs[a.key] = a.value.stringValue ?? a.value.intValue;
                out.push({ ...s, attrs, resource: rs.resource, scope: ss.scope });
            }
    return out;
}

const metric = (text, name) => Number((new RegExp(`^${name} (\\d+)`, 'm').exec(text) ?? [])[1] ?? NaN);

describe('trace export over OTLP/HTTP', () => {
    let col, d, rx;
    before(async () => {
        col = await startCollector();
        rx = await startReceiver();
        d = await startDaemon({ config: `${standardConfig()}${WEBHOOKS}tracing:\n  otlpEndpoint: ${col.url}\n  headers: { x-api-key: "s3cret" }\n  sampleRatio: 1\n  viewerUrl: "http://127.0.0.1:16686/trace/{traceId}"\n` });
    });
    after(async () => {
        await d?.stop();
        await rx?.close();
        await col?.close();
    });

    it('exports one connected trace per job: submit, enqueue, attempts and deliveries', async () => {
        const t = tenant(d);
        await addEndpoint(t, rx);
        // Job A: a failed attempt, then one that succeeds; its succeeded event delivered.
        const a = (await submit(t.c, { type: 'email.send', payload: {} }, { headers: { traceparent: TP } })).json.id;
        const a1 = await leaseOne(t.w, 'email.send', { expectId: a });
        await fail(t.w, a, a1.leaseId);
        await sleep(150);
        const a2 = await leaseOne(t.w, 'email.send', { expectId: a });
        await complete(t.w, a, a2.leaseId);
        // Job B: acceptd starts its trace (no traceparent); its lease expires.
        const b = (await submit(t.c, { type: 'image.resize', payload: {} })).json.id;
        const b1 = await leaseOne(t.w, 'image.resize', { expectId: b, leaseSeconds: 1 });
        await waitUntil(() => getJob(t.c, b), (j) => j?.status === 'queued', { timeoutMs: 10_000 * SLOW, what: 'the lease to expire' });
        const hooks = await rx.waitFor((rs) => rs.some((q) => eventOf(q).type === 'job.succeeded' && eventOf(q).job === a), { what: 'A\'s succeeded delivery' });
        const hookSpans = new Set(hooks.filter((q) => eventOf(q).job === a).map((q) => parseTp(q.headers.traceparent).parent));

        const spansOf = (id) => col.spans.filter((s) => s.attrs['messaging.message.id'] === id);
        await waitUntil(async () => null, () => spansOf(a).filter((s) => s.kind === 5).length === 2 && spansOf(a).filter((s) => s.kind === 3).length === hookSpans.size &&
            spansOf(b).some((s) => s.kind === 5),
            { timeoutMs: 10_000 * SLOW, what: `the spans of both jobs (have ${col.spans.length} from ${col.requests.length} exports; ${col.errors.join(" / ").slice(0, 2000)})` });
        assert.deepEqual(col.errors, []);
        assert.ok(col.requests.every((q) => q.path === '/v1/traces' && q.headers['content-type'] === 'application/json' && q.headers['x-api-key'] === 's3cret'));
        assert.ok(col.spans.every((s) => s.resource.attributes.some((x) => x.key === 'service.name' && x.value.stringValue === 'acceptd')));

        const sa = spansOf(a);
        assert.ok(sa.every((s) => s.traceId === TRACE), 'one trace: the submitter\'s');
        const byKind = (ss, k) => ss.filter((s) => s.kind === k);
        const [server] = byKind(sa, 2);
        assert.equal(byKind(sa, 2).length, 1);
        assert.equal(server.parentSpanId, CLIENT_SPAN, 'the submit span is a child of the submitter\'s');
        assert.equal(server.name, 'POST /v1/jobs');
        const [producer] = byKind(sa, 4);
        assert.equal(byKind(sa, 4).length, 1);
        assert.equal(producer.parentSpanId, server.spanId);
        assert.equal(producer.name, 'send email.send');
        const consumers = byKind(sa, 5).sort((x, y) => Number(x.attrs['acceptd.attempt']) - Number(y.attrs['acceptd.attempt']));
        assert.equal(consumers.length, 2);
        assert.deepEqual(consumers.map((s) => s.spanId), [parseTp(a1.traceparent).parent, parseTp(a2.traceparent).parent],
            'an attempt\'s span is the parent the lease handed the worker');
        assert.deepEqual(consumers.map((s) => s.attrs['acceptd.attempt']), ['1', '2']);
        assert.deepEqual(consumers.map((s) => s.status?.code ?? 0), [2, 0], 'the failed attempt has an error status');
        assert.equal(consumers[0].status.message, 'retrying');
        for (const s of [server, producer, ...consumers]) {
            assert.equal(s.attrs['messaging.system'], 'acceptd');
            assert.equal(s.attrs['messaging.destination.name'], 'email.send');
            assert.equal(s.attrs['acceptd.tenant'], t.name);
        }
        for (const s of consumers) {
            assert.equal(s.parentSpanId, server.spanId);
            assert.ok(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano));
        }
        const clients = byKind(sa, 3);
        assert.deepEqual(new Set(clients.map((s) => s.spanId)), hookSpans, 'a span per delivery attempt, as sent');
        for (const s of clients) {
            assert.equal(s.parentSpanId, server.spanId);
            assert.equal(s.attrs['http.response.status_code'], '200');
            assert.equal(s.status?.code ?? 0, 0);
        }

        const sb = spansOf(b);
        const traceB = sb[0].traceId;
        assert.match(traceB, /^[0-9a-f]{32}$/);
        assert.notEqual(traceB, TRACE);
        assert.ok(sb.every((s) => s.traceId === traceB));
        const [rootB] = byKind(sb, 2);
        assert.equal(rootB.parentSpanId, undefined, 'acceptd started this trace');
        const [expired] = byKind(sb, 5);
        assert.equal(expired.spanId, parseTp(b1.traceparent).parent);
        assert.equal(expired.status.code, 2);
        assert.equal(expired.status.message, 'expired');

        // The dashboard links a job's trace id to the viewer: /healthz names it, the job has its id.
        assert.equal(expectStatus(await api(d).get('/healthz'), 200).json.traceViewer, 'http://127.0.0.1:16686/trace/{traceId}');
        assert.equal((await getJob(t.c, b)).traceId, traceB);

        const m = expectStatus(await api(d, 'adm').get('/metrics'), 200).text;
        assert.ok(metric(m, 'acceptd_trace_spans_exported_total') >= col.spans.length, m);
        assert.equal(metric(m, 'acceptd_trace_spans_dropped_total'), 0);
    });
});

describe('trace export: the jobs of a batch, a :retry and a schedule\'s fire', () => {
    let col, d;
    before(async () => {
        col = await startCollector();
        d = await startDaemon({ config: `${standardConfig()}tracing:\n  otlpEndpoint: ${col.url}\n  sampleRatio: 1\n` });
    });
    after(async () => {
        await d?.stop();
        await col?.close();
    });
    const spansOf = (id) => col.spans.filter((s) => s.attrs['messaging.message.id'] === id);
    const byKind = (ss, k) => ss.filter((s) => s.kind === k);
    /** Wait until job id has a CONSUMER span exported (its attempt ended), then return its spans. */
    async function exported(id) {
        await waitUntil(async () => null, () => byKind(spansOf(id), 5).length >= 1 && byKind(spansOf(id), 4).length >= 1,
            { timeoutMs: 10_000 * SLOW, what: `the spans of ${id} (have ${col.spans.length}; ${col.errors.join(' / ').slice(0, 2000)})` });
        assert.deepEqual(col.errors, []);
        return spansOf(id);
    }

    it('POST /v1/batches: each job a submit span, child of the submitter\'s, and an enqueue beneath it', async () => {
        const t = tenant(d);
        const res = expectStatus(await t.c.req('POST', '/v1/batches', { body: { jobs: [{ type: 'video.transcode', payload: { sourceUrl: 'x' } }, { type: 'video.transcode', payload: { sourceUrl: 'y' } }] }, headers: { traceparent: TP } }), 202);
        const leased = expectStatus(await lease(t.w, 'video.transcode', { max: 2 }), 200).json.leases;
        assert.equal(leased.length, 2, JSON.stringify(res.json));
        const servers = new Set();
        for (const l of leased) {
            await complete(t.w, l.job.id, l.leaseId);
            const ss = await exported(l.job.id);
            assert.ok(ss.every((s) => s.traceId === TRACE));
            const server = byKind(ss, 2);
            assert.equal(server.length, 1);
            assert.equal(server[0].name, 'POST /v1/batches');
            assert.equal(server[0].parentSpanId, CLIENT_SPAN);
            assert.equal(byKind(ss, 4)[0].parentSpanId, server[0].spanId);
            assert.equal(byKind(ss, 5)[0].parentSpanId, server[0].spanId);
            assert.equal(byKind(ss, 5)[0].spanId, parseTp(l.traceparent).parent);
            servers.add(server[0].spanId);
        }
        assert.equal(servers.size, 2, 'a submit span per job');
    });

    it('a :retry\'s job: an enqueue span in the retried job\'s trace, a child of its submit span', async () => {
        const t = tenant(d);
        const old = (await submit(t.c, { type: 'email.send', payload: {} }, { headers: { traceparent: TP } })).json.id;
        const l0 = await leaseOne(t.w, 'email.send', { expectId: old });
        await fail(t.w, old, l0.leaseId, { retryable: false });
        await waitUntil(() => getJob(t.c, old), (j) => j?.status === 'failed', { what: 'the job to fail' });
        const id = expectStatus(await t.c.post(`/v1/jobs/${old}:retry`), 202).json.id;
        const l = await leaseOne(t.w, 'email.send', { expectId: id });
        await complete(t.w, id, l.leaseId);
        const oldServer = byKind(await exported(old), 2)[0];
        const ss = await exported(id);
        assert.ok(ss.every((s) => s.traceId === TRACE), 'one trace with the retried job');
        assert.equal(byKind(ss, 2).length, 0, 'no request of the submitter\'s made this job');
        const producer = byKind(ss, 4);
        assert.equal(producer.length, 1);
        assert.equal(producer[0].name, 'send email.send');
        assert.equal(producer[0].parentSpanId, oldServer.spanId);
        const [consumer] = byKind(ss, 5);
        assert.equal(consumer.parentSpanId, producer[0].spanId);
        assert.equal(consumer.spanId, parseTp(l.traceparent).parent);
        assert.equal(consumer.attrs['messaging.destination.name'], 'email.send');
        assert.equal(consumer.attrs['acceptd.tenant'], t.name);
    });

    it('a schedule\'s fire: a new trace per fire, rooted at the job\'s enqueue span', async () => {
        const t = tenant(d);
        expectStatus(await t.c.post('/v1/schedules', { id: 'traced', every: '1s', overlap: 'allow', job: { type: 'image.resize', payload: {} } }), 201);
        const traces = new Set();
        for (let i = 0; i < 2; i++) {
            const l = await leaseOne(t.w, 'image.resize', { wait: 10 });
            assert.equal(l.job.schedule.id, 'traced');
            const tp = parseTp(l.traceparent);
            assert.equal(tp.flags, '01');
            await complete(t.w, l.job.id, l.leaseId);
            const ss = await exported(l.job.id);
            assert.ok(ss.every((s) => s.traceId === tp.trace));
            assert.equal(byKind(ss, 2).length, 0);
            const [producer] = byKind(ss, 4);
            assert.equal(byKind(ss, 4).length, 1);
            assert.equal(producer.parentSpanId, undefined, 'the fire starts the trace');
            assert.equal(producer.name, 'send image.resize');
            assert.equal(producer.attrs['messaging.message.id'], l.job.id);
            assert.equal(producer.attrs['acceptd.tenant'], t.name);
            assert.equal(byKind(ss, 5)[0].parentSpanId, producer.spanId);
            assert.equal(byKind(ss, 5)[0].spanId, tp.parent);
            traces.add(tp.trace);
        }
        assert.equal(traces.size, 2, 'a trace per fire');
        expectStatus(await t.c.del('/v1/schedules/traced'), 204);
    });
});

describe('trace export: sampleRatio 0', () => {
    let col, d;
    before(async () => {
        col = await startCollector();
        d = await startDaemon({ config: `${standardConfig()}tracing:\n  otlpEndpoint: ${col.url}\n  sampleRatio: 0\n` });
    });
    after(async () => {
        await d?.stop();
        await col?.close();
    });

    it('exports nothing but still propagates the trace', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: 'report.export', payload: {} }, { headers: { traceparent: TP, tracestate: 'congo=1' } })).json.id;
        const l = await leaseOne(t.w, 'report.export', { expectId: id });
        const a = parseTp(l.traceparent);
        assert.equal(a.trace, TRACE);
        assert.equal(a.flags, '00', 'not sampled here, and so said downstream');
        assert.equal(l.tracestate, `acceptd=${a.parent},congo=1`);
        await complete(t.w, id, l.leaseId);
        await sleep(2000); // four flush intervals
        assert.equal(col.requests.length, 0);
        const m = expectStatus(await api(d, 'adm').get('/metrics'), 200).text;
        assert.equal(metric(m, 'acceptd_trace_spans_exported_total'), 0);
        assert.equal(metric(m, 'acceptd_trace_spans_dropped_total'), 0);
    });
});

describe('trace export: a dead collector', () => {
    let d;
    before(async () => {
        // A loopback port nobody listens on: bound, then closed.
        const s = http.createServer();
        await new Promise((r) => s.listen(0, '127.0.0.1', r));
        const port = s.address().port;
        await new Promise((r) => s.close(r));
        d = await startDaemon({ config: `${standardConfig()}tracing:\n  otlpEndpoint: http://127.0.0.1:${port}/v1/traces\n` });
    });
    after(async () => {
        await d?.stop();
    });

    it('answers 1,000 submits and loses none of them; the spans are dropped and counted', async () => {
        const t = tenant(d);
        const n = 1000;
        const ids = await mapLimit([...Array(n).keys()], 32, async (i) =>
            (await submit(t.c, { type: 'report.export', payload: { i } }, { headers: { traceparent: `00-${TRACE}-${CLIENT_SPAN}-01` } })).json.id);
        assert.equal(new Set(ids).size, n);
        const listed = await listAll(t.c, '?type=report.export');
        assert.equal(listed.length, n);
        const adm = api(d, 'adm');
        const m = await waitUntil(async () => expectStatus(await adm.get('/metrics'), 200), (r) => metric(r.text, 'acceptd_trace_spans_dropped_total') >= 2 * n,
            { timeoutMs: 20_000 * SLOW, what: 'the spans of the submits to be dropped' });
        assert.equal(metric(m.text, 'acceptd_trace_spans_exported_total'), 0);
        assert.ok(metric(m.text, 'acceptd_trace_exports_failed_total') >= 1);
    });
});
