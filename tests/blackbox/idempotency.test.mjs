// Idempotency-Key on submit: replay, fingerprint, concurrency, tenant scope, syntax.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, hget, leaseOne, listAll } from './lib/jobs.mjs';

function post(c, raw, key, path = '/v1/jobs') {
    const headers = key === undefined ? {} : { 'idempotency-key': key };
    return c.req('POST', path, { raw, headers });
}

describe('idempotency', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('same key, same body (other key order and whitespace): the original job replayed', async () => {
        const { c } = tenant(d);
        const first = expectStatus(await post(c, '{"type":"report.export","payload":{"a":1,"b":[1,2],"c":{"y":2,"x":1}}}', 'k-1'), 202);
        assert.notEqual(hget(first, 'idempotent-replayed'), 'true', 'the first answer is not a replay');
        const again = expectStatus(
            await post(c, '{ "payload" : { "c": {"x":1, "y":2}, "b" : [1, 2], "a":1 },\n  "type" : "report.export" }', 'k-1'),
            202,
        );
        assert.equal(again.json.id, first.json.id);
        assert.equal(hget(again, 'idempotent-replayed'), 'true');
        assert.equal(hget(again, 'location'), hget(first, 'location'));
        assert.equal(hget(again, 'operation-location'), hget(first, 'operation-location'));
        assert.deepEqual(again.json.payload, first.json.payload);
        assert.equal((await listAll(c)).length, 1);
    });

    it('a replay shows the current state of the job', async () => {
        const { c, w } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: { n: 1 } });
        const first = expectStatus(await post(c, raw, 'k-state'), 202);
        await leaseOne(w, 'report.export', { expectId: first.json.id });
        const again = expectStatus(await post(c, raw, 'k-state'), 202);
        assert.equal(again.json.id, first.json.id);
        assert.equal(again.json.status, 'running');
        assert.equal(hget(again, 'idempotent-replayed'), 'true');
    });

    it('same key, different body -> 422 idempotency-key-reused, no second job', async () => {
        const { c } = tenant(d);
        expectStatus(await post(c, JSON.stringify({ type: 'report.export', payload: { a: 1 } }), 'k-2'), 202);
        assertProblem(await post(c, JSON.stringify({ type: 'report.export', payload: { a: 2 } }), 'k-2'), 422, 'idempotency-key-reused');
        assertProblem(await post(c, JSON.stringify({ type: 'image.resize', payload: { a: 1 } }), 'k-2'), 422, 'idempotency-key-reused');
        assert.equal((await listAll(c)).length, 1);
    });

    it('the fingerprint includes the path', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: {} });
        expectStatus(await post(c, raw, 'k-path'), 202);
        assertProblem(await post(c, raw, 'k-path', '/v1/reports'), 422, 'idempotency-key-reused');
        assert.equal((await listAll(c)).length, 1);
    });

    it('20 concurrent identical requests with one key create exactly one job', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: { burst: true } });
        const answers = await Promise.all(Array.from({ length: 20 }, () => post(c, raw, 'k-burst')));
        const ok = answers.filter((r) => r.status === 202);
        const busy = answers.filter((r) => r.status === 409);
        assert.equal(ok.length + busy.length, 20, answers.map((r) => `${r.status} ${r.text.slice(0, 120)}`).join('\n'));
        assert.ok(ok.length >= 1, 'no request succeeded');
        assert.equal(new Set(ok.map((r) => r.json.id)).size, 1, 'different job ids for one key');
        for (const r of busy) assertProblem(r, 409, 'idempotency-key-in-flight');
        const jobs = await listAll(c);
        assert.equal(jobs.length, 1, `jobs: ${jobs.map((j) => j.id)}`);
        assert.equal(jobs[0].id, ok[0].json.id);
        const after = expectStatus(await post(c, raw, 'k-burst'), 202);
        assert.equal(after.json.id, ok[0].json.id);
        assert.equal(hget(after, 'idempotent-replayed'), 'true');
    });

    it('keys are scoped per tenant', async () => {
        const a = tenant(d).c;
        const b = tenant(d).c;
        const raw = JSON.stringify({ type: 'report.export', payload: { same: 1 } });
        const ra = expectStatus(await post(a, raw, 'shared-key'), 202);
        const rb = expectStatus(await post(b, raw, 'shared-key'), 202);
        assert.notEqual(rb.json.id, ra.json.id);
        assert.notEqual(hget(rb, 'idempotent-replayed'), 'true');
        assert.deepEqual((await listAll(a)).map((j) => j.id), [ra.json.id]);
        assert.deepEqual((await listAll(b)).map((j) => j.id), [rb.json.id]);
    });

    it('a route requiring a key -> 400 idempotency-key-missing without one, nothing stored', async () => {
        const { c } = tenant(d);
        assertProblem(await post(c, '{"month":"2025-03"}', undefined, '/v1/reports'), 400, 'idempotency-key-missing');
        assert.deepEqual(await listAll(c), []);
        expectStatus(await post(c, '{"month":"2025-03"}', 'k-route', '/v1/reports'), 202);
        assert.equal((await listAll(c)).length, 1);
    });

    it('key syntax: 255 chars ok; 256 chars, empty or non-ASCII -> 400 idempotency-key-invalid', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: {} });
        for (const key of ['k'.repeat(256), '""', 'caf\u00e9']) {
            assertProblem(await post(c, raw, key), 400, 'idempotency-key-invalid');
        }
        assert.deepEqual(await listAll(c), [], 'an invalid key stored a job');
        expectStatus(await post(c, raw, 'k'.repeat(255)), 202);
    });

    it('two keys, as two fields or joined by a comma -> 400 idempotency-key-invalid, nothing stored', async () => {
        const { c, keys } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: { two: true } });
        assertProblem(await post(c, raw, 'k-a, k-b'), 400, 'idempotency-key-invalid');
        const res = await rawRequest(
            d,
            `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keys.c}\r\nContent-Type: application/json\r\n` +
                `Idempotency-Key: k-a\r\nIdempotency-Key: k-b\r\nContent-Length: ${raw.length}\r\nConnection: close\r\n\r\n${raw}`,
        );
        assert.equal(res.status, 400, res.raw);
        assert.equal(res.json?.code, 'idempotency-key-invalid', res.raw);
        assert.match(res.json.detail, /one Idempotency-Key/);
        assert.deepEqual(await listAll(c), [], 'a request with two keys stored a job');
    });

    it('a quoted key may hold an escaped quote or backslash and a comma; a bad escape -> 400', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: { esc: true } });
        const first = expectStatus(await post(c, raw, '"a\\"b\\\\c,d"'), 202);
        const again = expectStatus(await post(c, raw, '"a\\"b\\\\c,d"'), 202);
        assert.equal(again.json.id, first.json.id);
        assert.equal(hget(again, 'idempotent-replayed'), 'true');
        assertProblem(await post(c, raw, '"a"b"'), 400, 'idempotency-key-invalid');
        assertProblem(await post(c, raw, '"a\\x"'), 400, 'idempotency-key-invalid');
        assert.equal((await listAll(c)).length, 1);
    });

    it('a quoted "abc" and a bare abc are the same key', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: { q: true } });
        const quoted = expectStatus(await post(c, raw, '"abc"'), 202);
        const bare = expectStatus(await post(c, raw, 'abc'), 202);
        assert.equal(bare.json.id, quoted.json.id);
        assert.equal(hget(bare, 'idempotent-replayed'), 'true');
        assert.equal((await listAll(c)).length, 1);
    });
});
