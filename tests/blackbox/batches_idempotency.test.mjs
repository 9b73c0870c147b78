// Idempotency-Key on POST /v1/batches (CONTRACT §13, docs/protocol.md "Idempotency-Key"): a retry with the same key
// and body answers the original batch's 202 with Idempotent-Replayed and creates no job; another body (or a key
// used for a job) is 422 idempotency-key-reused; a malformed key is 400; the key is stored in the batch's commit,
// so a replay after kill -9 names the same batch. On SQLite and, under `make blackbox-pg`, PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, hget, listAll } from './lib/jobs.mjs';

const post = (c, body, key) => c.req('POST', '/v1/batches', { raw: JSON.stringify(body), headers: key === undefined ? {} : { 'idempotency-key': key } });
const body = (n) => ({ jobs: Array.from({ length: n }, (_, i) => ({ type: 'report.export', payload: { i } })) });

describe('batches: Idempotency-Key', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('same key, same body: the original batch replayed, no second batch', async () => {
        const { c } = tenant(d);
        const first = expectStatus(await post(c, body(3), 'b-1'), 202);
        assert.notEqual(hget(first, 'idempotent-replayed'), 'true');
        const again = expectStatus(await post(c, body(3), '"b-1"'), 202);
        assert.equal(again.json.id, first.json.id);
        assert.equal(hget(again, 'idempotent-replayed'), 'true');
        assert.equal(hget(again, 'location'), hget(first, 'location'));
        assert.equal(again.json.total, 3);
        assert.equal((await listAll(c)).length, 3, 'three jobs, not six');
    });

    it('same key, another body: 422 idempotency-key-reused, nothing created', async () => {
        const { c } = tenant(d);
        expectStatus(await post(c, body(2), 'b-2'), 202);
        const res = await post(c, body(3), 'b-2');
        assertProblem(res, 422, 'idempotency-key-reused');
        assert.equal((await listAll(c)).length, 2);
    });

    it('a key used for a job is reused for a batch: 422 (the fingerprint covers the path)', async () => {
        const { c } = tenant(d);
        expectStatus(await c.req('POST', '/v1/jobs', { raw: JSON.stringify({ type: 'report.export', payload: {} }), headers: { 'idempotency-key': 'b-3' } }), 202);
        assertProblem(await post(c, body(1), 'b-3'), 422, 'idempotency-key-reused');
        assert.equal((await listAll(c)).length, 1);
    });

    it('two requests at once with one key: one batch; the other is its replay or 409 idempotency-key-in-flight', async () => {
        const { c } = tenant(d);
        const answers = await Promise.all([1, 2, 3].map(() => post(c, body(2), 'b-race')));
        const ok = answers.filter((a) => a.status === 202);
        for (const a of answers) if (a.status !== 202) assertProblem(a, 409, 'idempotency-key-in-flight');
        assert.ok(ok.length >= 1);
        assert.equal(new Set(ok.map((a) => a.json.id)).size, 1, 'one batch');
        assert.equal((await listAll(c)).length, 2, 'its two jobs, no more');
    });

    it('a malformed key is 400 and creates nothing', async () => {
        const { c } = tenant(d);
        assertProblem(await post(c, body(1), 'a,b'), 400, 'idempotency-key-invalid');
        assertProblem(await post(c, body(1), 'x'.repeat(256)), 400, 'idempotency-key-invalid');
        assert.equal((await listAll(c)).length, 0);
    });

    it('after kill -9, the same key and body replays the same batch', async () => {
        const { c } = tenant(d);
        const first = expectStatus(await post(c, body(4), 'b-kill'), 202);
        await d.kill9();
        await d.restart();
        const again = expectStatus(await post(c, body(4), 'b-kill'), 202);
        assert.equal(again.json.id, first.json.id);
        assert.equal(hget(again, 'idempotent-replayed'), 'true');
        assert.equal((await listAll(c)).length, 4);
    });
});
