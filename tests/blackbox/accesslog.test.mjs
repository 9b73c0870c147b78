// The access log (log.accessLog), the log format (log.format) and request ids (X-Request-Id): see
// docs/configuration.md, "log", and docs/operations.md, "Logs".

import assert from 'node:assert/strict';
import { after, before, describe } from 'node:test';
import { api, it, rawRequest, standardConfig, startDaemon } from './lib/daemon.mjs';
import { assertProblem, expectStatus, submit, waitUntil } from './lib/jobs.mjs';

const ID = /^[A-Za-z0-9._-]{1,64}$/;
const accessLines = (d) => d.stderr.split('\n').filter((l) => /\baccess\b/.test(l) && /(method=|"method")/.test(l));

async function stop(d) {
    const { code } = await d.stop();
    assert.equal(code, 0, d.stderr.slice(-4000));
}

describe('access log off (the default)', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => stop(d));

    it('writes no access line', async () => {
        const c = api(d, 'ka');
        await submit(c);
        expectStatus(await c.get('/v1/jobs?limit=1'), 200);
        expectStatus(await c.get('/nowhere'), 404);
        assert.deepEqual(accessLines(d), [], d.stderr);
    });
});

describe('access log on, text', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: `${standardConfig()}log: { accessLog: true, format: text }\n` });
    });
    after(() => stop(d));

    it('writes one line per request with its fields, and never a signature or a key', async () => {
        const c = api(d, 'ka');
        const id = (await submit(c, undefined, { headers: { 'x-request-id': 'mine-1' } })).json.id;
        const signed = expectStatus(await c.post(`/v1/jobs/${id}:sign`, {}), 200).json.url;
        const sig = new URL(signed).searchParams.get('sig');
        assert.ok(sig && sig.length > 10);
        const u = new URL(signed);
        expectStatus(await api(d).get(`${u.pathname}${u.search}`), 200); // through the signed URL, no key
        expectStatus(await c.get('/v1/jobs/job_nothere'), 404);
        const lines = await waitUntil(
            async () => accessLines(d),
            (ls) => ls.length >= 4,
            { what: 'four access lines' },
        );
        assert.equal(lines.length, 4, lines.join('\n'));
        const [sub, sign, get, missing] = lines;
        assert.match(sub, /^\d{4}-\d\d-\d\dT\S+Z info access method=POST path=\/v1\/jobs status=202 bytes=\d+ durationUs=\d+ tenant=a requestId=mine-1$/);
        assert.match(sign, new RegExp(`method=POST path=/v1/jobs/${id}:sign status=200 .* tenant=a requestId=[A-Za-z0-9._-]+$`));
        assert.match(get, new RegExp(`method=GET path=/v1/jobs/${id} status=200 bytes=\\d+ durationUs=\\d+ tenant=a requestId=`));
        assert.match(missing, /method=GET path=\/v1\/jobs\/job_nothere status=404 /);
        for (const secret of [sig, 'Bearer', ' ka ', 'ka\n', 'exp=']) assert.ok(!d.stderr.includes(secret), `${JSON.stringify(secret)} in the log:\n${d.stderr}`);
    });

    it("answers a refused signed URL with a problem whose instance has the signature's value redacted", async () => {
        const c = api(d, 'ka');
        const id = (await submit(c)).json.id;
        const u = new URL(expectStatus(await c.post(`/v1/jobs/${id}:sign`, {}), 200).json.url);
        const sig = u.searchParams.get('sig');
        const exp = Number(u.searchParams.get('exp'));
        // A later exp than signed is refused; so is the name spelled with an escape, which reads as sig too.
        for (const name of ['sig', '%73ig']) {
            const res = await api(d).get(`${u.pathname}?exp=${exp + 60}&${name}=${sig}&x=1`);
            const p = assertProblem(res, 401, 'unauthorized', { instance: `${u.pathname}?exp=${exp + 60}&${name}=redacted&x=1` });
            assert.equal(p.instance, `${u.pathname}?exp=${exp + 60}&${name}=redacted&x=1`, res.text);
            assert.ok(!res.text.includes(sig), res.text);
        }
    });
});

describe('access log on, json', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: `${standardConfig()}log: { accessLog: true, format: json }\n` });
    });
    after(() => stop(d));

    it('writes every line as one JSON object', async () => {
        const c = api(d, 'ka');
        await submit(c);
        expectStatus(await c.get('/v1/jobs?limit=1&token=hunter2'), 200);
        await waitUntil(async () => accessLines(d), (ls) => ls.length >= 2, { what: 'two access lines' });
        const lines = d.stderr.split('\n').filter((l) => l !== '');
        assert.ok(lines.length >= 3, d.stderr); // the startup lines too
        const objs = lines.map((l) => JSON.parse(l));
        for (const o of objs) {
            assert.equal(typeof o.time, 'string');
            assert.match(o.level, /^(info|warn|error)$/);
            assert.equal(typeof o.msg, 'string');
        }
        const acc = objs.filter((o) => o.msg === 'access');
        assert.equal(acc.length, 2);
        assert.deepEqual(Object.keys(acc[1]).sort(), ['bytes', 'durationUs', 'level', 'method', 'msg', 'path', 'requestId', 'status', 'tenant', 'time']);
        assert.equal(acc[1].method, 'GET');
        assert.equal(acc[1].path, '/v1/jobs');
        assert.equal(acc[1].status, 200);
        assert.equal(acc[1].tenant, 'a');
        assert.match(acc[1].requestId, ID);
        assert.ok(!d.stderr.includes('hunter2'), 'a query value reached the log');
    });
});

describe('X-Request-Id', () => {
    let d, c;
    before(async () => {
        d = await startDaemon();
        c = api(d, 'ka');
    });
    after(() => stop(d));

    it('is made when absent, echoed on every answer, and unguessable', async () => {
        const a = expectStatus(await c.get('/v1/jobs?limit=1'), 200);
        const b = expectStatus(await c.get('/v1/jobs?limit=1'), 200);
        const h = await api(d).get('/healthz');
        for (const r of [a, b, h]) assert.match(r.headers.get('x-request-id') ?? '', ID);
        assert.notEqual(a.headers.get('x-request-id'), b.headers.get('x-request-id'));
        assert.ok(a.headers.get('x-request-id').length >= 16);
    });

    it('is taken from a sane request header', async () => {
        const id = 'abc.DEF_123-xyz';
        const r = expectStatus(await c.get('/v1/jobs?limit=1', { headers: { 'x-request-id': id } }), 200);
        assert.equal(r.headers.get('x-request-id'), id);
        const long = 'a'.repeat(64);
        assert.equal((await c.get('/v1/jobs?limit=1', { headers: { 'x-request-id': long } })).headers.get('x-request-id'), long);
    });

    it('is replaced when hostile: too long, control characters, not ASCII, sent twice', async () => {
        for (const bad of ['a'.repeat(65), 'a'.repeat(1000), 'a b', 'a"b', '<script>', 'a/b', 'x;y']) {
            const r = await c.get('/v1/jobs?limit=1', { headers: { 'x-request-id': bad } });
            const got = r.headers.get('x-request-id');
            assert.match(got, ID, bad);
            assert.notEqual(got, bad);
        }
        // Bytes fetch refuses to send: CR/LF smuggling and UTF-8, over a raw socket.
        for (const bad of ['abc\r\nx-evil: 1', 'caf\u00e9', 'a\u0000b']) {
            const raw = await rawRequest(d, Buffer.from(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: ${bad}\r\nConnection: close\r\n\r\n`, 'utf8'));
            assert.ok(raw.status === 200 || raw.status === 400, `status ${raw.status}`);
            const got = raw.headers['x-request-id'];
            assert.match(String(got), ID, JSON.stringify(bad));
            assert.ok(!String(got).includes('caf'), JSON.stringify(got));
            assert.equal(raw.headers['x-evil'], undefined);
        }
        const twice = await rawRequest(d, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: one\r\nX-Request-Id: two\r\nConnection: close\r\n\r\n');
        assert.match(String(twice.headers['x-request-id']), ID);
        assert.ok(!['one', 'two'].includes(twice.headers['x-request-id']));
    });

    it('is in every problem document as requestId, instance unchanged', async () => {
        const r = await c.get('/v1/jobs/job_nothere', { headers: { 'x-request-id': 'trace-42' } });
        assert.equal(r.status, 404);
        assert.equal(r.json.requestId, 'trace-42');
        assert.equal(r.json.instance, '/v1/jobs/job_nothere');
        assert.equal(r.headers.get('x-request-id'), 'trace-42');
        const u = await api(d, 'wrong').get('/v1/jobs');
        assert.equal(u.status, 401);
        assert.equal(u.json.requestId, u.headers.get('x-request-id'));
        const nf = await c.get('/nowhere');
        assert.equal(nf.status, 404);
        assert.match(nf.json.requestId, ID);
        assert.equal(nf.json.requestId, nf.headers.get('x-request-id'));
    });
});
