// A batch follows retention like its jobs (CONTRACT §13, docs/protocol.md): it expires with the last of its jobs
// to expire, answers 410 Gone for the tombstone period, and then its row is deleted by the sweep (404, and a
// dependsOn naming it is refused as unknown). On SQLite and, under `make blackbox-pg`, PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, leaseOne, sleep, waitUntil } from './lib/jobs.mjs';

const config = standardConfig({
    types: `
  video.transcode: { required: [sourceUrl] }
  short.lived: { retention: { succeeded: 2s, failed: 2s, cancelled: 2s, partialSuccess: 2s } }
  report.export: {}`,
    tombstone: '2s',
    sweepInterval: '200ms',
});

const create = async (c, jobs) => expectStatus(await c.post('/v1/batches', { jobs }), 202).json;

async function sleepUntil(t) {
    const ms = t - Date.now();
    if (ms > 0) await sleep(ms);
}

async function runAll(w, type, n) {
    for (let i = 0; i < n; i++) {
        const l = await leaseOne(w, type);
        await complete(w, l.job.id, l.leaseId, { result: { i } });
    }
}

describe('batch retention', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config });
    });
    after(() => d?.stop());

    it('an ended batch answers 410 from its last job\'s expiry for the tombstone period, then 404, its row deleted', async () => {
        const { c, w } = tenant(d);
        const b = await create(c, [1, 2].map((n) => ({ type: 'short.lived', payload: { n } })));
        await runAll(w, 'short.lived', 2);
        const ended = expectStatus(await c.get(`/v1/batches/${b.id}`), 200).json;
        assert.equal(ended.status, 'succeeded');
        const jobs = expectStatus(await c.get(`/v1/batches/${b.id}/jobs`), 200).json.items;
        const expires = Math.max(...jobs.map((j) => Date.parse(j.expiresAt)));

        await sleepUntil(expires + 300);
        assertProblem(await c.get(`/v1/batches/${b.id}`), 410, 'gone');
        assertProblem(await c.get(`/v1/batches/${b.id}/jobs`), 410, 'gone');
        assertProblem(await c.get(`/v1/batches/${b.id}/events`, { headers: { accept: 'text/event-stream' } }), 410, 'gone');
        assertProblem(await c.get(`/v1/operations/${b.id}`), 404, 'not-found'); // gone as an operation, as a job's

        const res = await waitUntil(() => c.get(`/v1/batches/${b.id}`), (r) => r.status !== 410, {
            timeoutMs: expires + 15_000 - Date.now(), intervalMs: 200, what: 'the batch tombstone to end',
        });
        assertProblem(res, 404, 'not-found');
        // The row itself is gone (not only answered 404): a job may no longer depend on it.
        const dep = await waitUntil(() => c.post('/v1/jobs', { type: 'report.export', payload: {}, dependsOn: [b.id] }),
            (r) => r.status !== 202, { timeoutMs: 15_000, intervalMs: 300, what: 'the sweep to delete the batch row' });
        assertProblem(dep, 422, null);
    });

    it('a batch stays while any of its jobs is kept: the longest retention of its jobs wins', async () => {
        const { c, w } = tenant(d);
        const b = await create(c, [{ type: 'short.lived', payload: {} }, { type: 'report.export', payload: {} }]);
        await runAll(w, 'short.lived', 1);
        await runAll(w, 'report.export', 1);
        const jobs = expectStatus(await c.get(`/v1/batches/${b.id}/jobs`), 200).json.items;
        const short = jobs.find((j) => j.type === 'short.lived');
        await sleepUntil(Date.parse(short.expiresAt) + 2_000 + 1_000); // past the short job's tombstone and a sweep
        const now = expectStatus(await c.get(`/v1/batches/${b.id}`), 200).json;
        assert.equal(now.status, 'succeeded');
    });
});
