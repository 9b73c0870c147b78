// Errors are RFC 9457 problems everywhere; hostile input gets a 4xx problem and the daemon keeps
// serving; health endpoints.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, api, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, hget, lease, listAll, runToSuccess, submit } from './lib/jobs.mjs';

const UNKNOWN_ID = 'job_AAAAAAAAAAAAAAAAAAAAAA';

/** A hand-written HTTP/1.1 request (the daemon must survive what fetch refuses to send). */
function rawHttp(method, path, key, extraHeaders = '', body = '') {
    const len = body.length ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : '';
    return `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n${extraHeaders}${len}Connection: close\r\n\r\n${body}`;
}

function allowed(res) {
    return (hget(res, 'allow') ?? '').split(',').map((s) => s.trim().toUpperCase()).filter(Boolean);
}

describe('problems', () => {
    let d;
    let probe; // a tenant used only to check the daemon still accepts work
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
        probe = tenant(d);
    });
    after(() => d?.stop());

    async function assertStillServing() {
        const h = await api(d).get('/healthz');
        assert.equal(h.status, 200, `daemon stopped serving: ${h.status} ${h.text}`);
        await submit(probe.c);
    }

    it('every kind of error is a complete problem+json whose status matches HTTP', async () => {
        const { c, w } = tenant(d);
        const done = await runToSuccess(c, w);
        const cases = [
            [await c.get('/no/such/thing'), 404, 'not-found'],
            [await c.get('/v1/nope'), 404, 'not-found'],
            [await c.get(`/v1/jobs/${UNKNOWN_ID}`), 404, 'not-found'],
            [await c.get(`/v1/jobs/${done.id}/nope`), 404, 'not-found'],
            [await c.req('POST', '/v1/jobs', { raw: '{"type":' }), 400, 'malformed-json'],
            [await c.get('/v1/jobs?limit=0'), 400, 'invalid-request'],
            [await c.req('POST', '/v1/jobs', { raw: '{}', headers: { 'content-type': 'text/csv' } }), 415, 'unsupported-media-type'],
            [await c.post('/v1/jobs', { type: 'report.export', payload: { pad: 'z'.repeat(5000) } }), 413, 'payload-too-large'],
            [await c.post('/v1/jobs', { type: 'report.export', priority: 7 }), 422, 'validation-failed'],
            [await c.post('/v1/jobs', { type: 'nope.nope' }), 422, 'unknown-type'],
            [await api(d).get('/v1/jobs'), 401, 'unauthorized'],
            [await api(d, 'wrong').get('/v1/jobs'), 401, 'unauthorized'],
            [await lease(c, 'report.export', { wait: 0 }), 403, 'forbidden'],
            [await c.del(`/v1/jobs/${done.id}`), 409, 'illegal-transition'],
            [await w.post(`/v1/jobs/${done.id}:heartbeat`, { leaseId: 'lse_old' }), 409, 'stale-lease'],
            [await c.req('PUT', `/v1/jobs/${done.id}`, { body: {} }), 405, 'method-not-allowed'],
        ];
        for (const [res, status, code] of cases) {
            assertProblem(res, status, code);
            assert.ok(!/<html|<!doctype|\bat .+:\d+:\d+\)/i.test(res.text), `HTML or stack trace: ${res.text}`);
        }
    });

    it('405 carries Allow with the methods the resource supports', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const put = await c.req('PUT', `/v1/jobs/${id}`, { body: {} });
        assertProblem(put, 405, 'method-not-allowed');
        assert.deepEqual(allowed(put).sort(), ['DELETE', 'GET', 'HEAD'], `Allow: ${hget(put, 'allow')}`);
        assert.ok(!allowed(put).includes('PUT'), `Allow: ${hget(put, 'allow')}`);

        for (const method of ['PATCH', 'DELETE', 'PUT']) {
            const res = await c.req(method, '/v1/jobs', { body: {} });
            assertProblem(res, 405, 'method-not-allowed');
            assert.ok(allowed(res).includes('GET') && allowed(res).includes('POST'), `${method} Allow: ${hget(res, 'allow')}`);
        }
        assert.equal((await listAll(c)).length, 1, 'a 405 changed something');
        assert.equal((await c.get(`/v1/jobs/${id}`)).json.status, 'queued');
    });

    it('errors stay problem+json even when the client asks for HTML', async () => {
        const { c } = tenant(d);
        const res = await c.get(`/v1/jobs/${UNKNOWN_ID}`, { headers: { accept: 'text/html' } });
        assert.ok([404, 406].includes(res.status), `${res.status} ${res.text}`);
        assertProblem(res, res.status, res.status === 404 ? 'not-found' : 'not-acceptable');
    });

    it('a 10 KB Idempotency-Key -> 400 problem; the daemon keeps serving', async () => {
        const { c } = tenant(d);
        const res = await c.req('POST', '/v1/jobs', { body: { type: 'report.export' }, headers: { 'idempotency-key': 'k'.repeat(10_240) } });
        assertProblem(res, 400, 'idempotency-key-invalid');
        assert.deepEqual(await listAll(c), []);
        await assertStillServing();
    });

    it('a 10 KB header value is served or refused with a 431 problem, never dropped', async () => {
        const { c } = tenant(d);
        const res = await c.get('/v1/jobs', { headers: { 'x-junk': 'j'.repeat(10_240) } });
        if (res.status !== 200) assertProblem(res, 431, 'headers-too-large');
        await assertStillServing();
    });

    it('256 KB of headers -> 431 headers-too-large problem; the daemon keeps serving', async () => {
        const { keys } = tenant(d);
        let extra = '';
        for (let i = 0; i < 32; i++) extra += `X-Junk-${i}: ${'h'.repeat(8192)}\r\n`;
        const res = await rawRequest(d, rawHttp('GET', '/v1/jobs', keys.c, extra));
        assertProblem(res, 431, 'headers-too-large', { instance: undefined });
        await assertStillServing();
    });

    for (const [name, ch] of [['SOH', '\x01'], ['NUL', '\x00'], ['DEL', '\x7f'], ['ESC', '\x1b']]) {
        it(`a ${name} control character in Idempotency-Key -> 400 problem, nothing stored`, async () => {
            const { c, keys } = tenant(d);
            const body = JSON.stringify({ type: 'report.export', payload: {} });
            const extra = `Content-Type: application/json\r\nIdempotency-Key: ab${ch}cd\r\n`;
            const res = await rawRequest(d, rawHttp('POST', '/v1/jobs', keys.c, extra, body));
            // h2o's HTTP/1 parser refuses control characters in header values before any handler runs and
            // answers with its own fixed "400 Bad Request" text (libh2o 2.2 offers no hook for it). The
            // status and "nothing stored, still serving" are what the daemon controls here.
            assert.equal(res.status, 400, res.raw.slice(0, 300));
            assert.deepEqual(await listAll(c), []);
            await assertStillServing();
        });
    }

    it('garbage on the wire -> 400 problem; the daemon keeps serving', async () => {
        const { c, keys } = tenant(d);
        for (const wire of [
            'GARBAGE\r\n\r\n',
            'GET /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n',
            rawHttp('POST', '/v1/jobs', keys.c, 'Content-Type: application/json\r\nContent-Length: -5\r\n'),
            'GET /v1/jobs HTTP/1.1\r\nHost: x\r\nBad Header Name: 1\r\nConnection: close\r\n\r\n',
        ]) {
            const res = await rawRequest(d, wire);
            // Malformed HTTP never reaches a handler. h2o answers 400 itself: its fixed text when the head
            // does not parse (docs/problems.md), else through the problem filter as invalid-request (never
            // malformed-json: no JSON was read).
            assert.equal(res.status, 400, `${JSON.stringify(wire.slice(0, 80))} -> ${res.raw.slice(0, 300)}`);
            if (/^text\/plain/.test(res.headers['content-type'])) assert.equal(res.body, 'Bad Request');
            else assertProblem(res, 400, 'invalid-request');
        }
        // A chunked body whose framing is broken: h2o refuses it before the submit handler runs.
        const res = await rawRequest(
            d,
            rawHttp('POST', '/v1/jobs', keys.c, 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n') + 'zz\r\n{}\r\n0\r\n\r\n',
        );
        assertProblem(res, 400, 'invalid-request', { instance: '/v1/jobs' });
        assert.deepEqual(await listAll(c), []);
        await assertStillServing();
    });

    it('a chunked body over maxBodyBytes is refused like any other, nothing stored', async () => {
        const { c, keys } = tenant(d);
        const body = JSON.stringify({ type: 'report.export', payload: { pad: 'c'.repeat(8000) } });
        let chunks = '';
        for (let i = 0; i < body.length; i += 1000) {
            const part = body.slice(i, i + 1000);
            chunks += `${part.length.toString(16)}\r\n${part}\r\n`;
        }
        chunks += '0\r\n\r\n';
        const wire = rawHttp('POST', '/v1/jobs', keys.c, 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n') + chunks;
        const res = await rawRequest(d, wire);
        assert.ok([411, 413].includes(res.status), `chunked oversize body -> ${res.raw.slice(0, 300)}`);
        assertProblem(res, res.status, null, { instance: '/v1/jobs' });
        assert.deepEqual(await listAll(c), []);
        await assertStillServing();
    });

    it('a body far over maxBodyBytes (refused by h2o before the handler) names the limit, like one just over', async () => {
        const { c } = tenant(d);
        for (const pad of [5000, 200_000]) {
            const res = await c.post('/v1/jobs', { type: 'report.export', payload: { pad: 'p'.repeat(pad) } });
            assertProblem(res, 413, 'payload-too-large');
            assert.match(res.json.detail, /limit (is|of) 4096\b/, res.text);
        }
        assert.deepEqual(await listAll(c), []);
    });

    it('a U+0000 inside a name, URL or lease id -> 422, not a truncated value; payloads keep theirs', async () => {
        const { c, w } = tenant(d);
        const refused = async (res, pointer) => {
            assertProblem(res, 422, 'validation-failed');
            assert.deepEqual(res.json.errors.map((e) => e.pointer), [pointer], res.text);
        };
        await refused(await c.post('/v1/jobs', { type: 'report.export\0x' }), '/type');
        await refused(await c.post('/v1/jobs', { type: 'report.export', priority: 'high\0x' }), '/priority');
        await refused(await c.post('/v1/jobs', { type: 'report.export', runAt: '2026-01-01T00:00:00Z\0x' }), '/runAt');
        await refused(await c.post('/v1/jobs', { type: 'report.export', callbackUrl: 'https://example.com/\0x' }), '/callbackUrl');
        await refused(await c.post('/v1/webhooks', { url: 'https://example.com/hook', events: ['job.succeeded\0x'] }), '/events/0');
        assert.deepEqual(await listAll(c), []);

        // The payload is kept as JSON, so its U+0000 survives.
        const job = (await submit(c, { type: 'report.export', payload: { s: 'a\0b' } })).json;
        assert.equal(job.payload.s, 'a\0b');
        // A worker naming "report.export\0x" must not be handed report.export jobs.
        const bad = await w.post('/v1/leases', { types: ['report.export\0x'], wait: 0 });
        assertProblem(bad, 422, 'validation-failed');
        const { leases } = expectStatus(await lease(w, ['report.export'], { wait: 0 }), 200).json;
        assert.equal(leases[0].job.id, job.id);
        const leaseId = leases[0].leaseId;
        await refused(await w.post(`/v1/jobs/${job.id}:heartbeat`, { leaseId: `${leaseId}\0x` }), '/leaseId');
        await refused(await w.post(`/v1/jobs/${job.id}:heartbeat`, { leaseId, message: 'a\0b' }), '/message');
        await refused(await w.post(`/v1/jobs/${job.id}:complete`, { leaseId, status: 'succeeded\0x' }), '/status');
        expectStatus(await w.post(`/v1/jobs/${job.id}:complete`, { leaseId }), 200);
        await assertStillServing();
    });

    it('percent-encoded junk in a job path -> 400 or 404 problem', async () => {
        const { c } = tenant(d);
        for (const p of ['/v1/jobs/%00', '/v1/jobs/%ff%fe', '/v1/jobs/..%2f..%2fetc%2fpasswd', `/v1/jobs/${'x'.repeat(4000)}`]) {
            const res = await c.get(p);
            assert.ok([400, 404, 414].includes(res.status), `${p} -> ${res.status} ${res.text.slice(0, 200)}`);
            assertProblem(res, res.status, null);
        }
        await assertStillServing();
    });
});

describe('health', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('/healthz and /readyz answer 200 without credentials', async () => {
        const h = expectStatus(await api(d).get('/healthz'), 200);
        assert.deepEqual(h.json, { status: 'ok', auth: 'bearer' });
        const r = expectStatus(await api(d).get('/readyz'), 200);
        assert.deepEqual(r.json, { status: 'ready' });
    });
});
