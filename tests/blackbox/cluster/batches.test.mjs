// Batches in cluster mode (CONTRACT §13): two nodes on one PostgreSQL database. A batch created on node A is read
// on node B with the counts A's completions wrote, and a stream of it open on node B gets done when its last job
// ends on node A (B hears of the change through the change feed). Run by `make blackbox-pg` only.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { api, it } from '../lib/daemon.mjs';
import { complete, expectStatus, hget, leaseOne, waitUntil } from '../lib/jobs.mjs';
import { startPair } from '../lib/queues.mjs';
import { openSse } from '../lib/sse.mjs';

describe('batches on two nodes', () => {
    let nodes = [];
    before(async () => {
        nodes = await startPair();
    });
    after(() => Promise.all(nodes.map((n) => n.stop())));

    it('a stream on node B ends with done when the last job ends on node A', async () => {
        const [a, b] = nodes;
        const ca = api(a, 'kc');
        const wa = api(a, 'kw');
        const batch = expectStatus(await ca.post('/v1/batches', { jobs: [{ type: 'cl.job' }, { type: 'cl.job' }] }), 202).json;
        const s = await openSse(`${b.url}/v1/batches/${batch.id}/events`, { headers: { authorization: 'Bearer kc' } });
        await s.waitEvents(1);
        for (let i = 0; i < 2; i++) {
            const l = await leaseOne(wa, 'cl.job');
            await complete(wa, l.job.id, l.leaseId);
        }
        await s.waitEnd(15_000);
        const done = s.events[s.events.length - 1];
        assert.deepEqual([done.event, done.id], ['done', '3']);
        assert.equal(JSON.parse(done.data).status, 'succeeded');
        const onB = expectStatus(await api(b, 'kc').get(`/v1/batches/${batch.id}`), 200).json;
        assert.equal(onB.counts.succeeded, 2);
    });

    it('a batch read answers as fresh as its jobs: at once on the node that changed a job, on the other as the job', async () => {
        const [a, b] = nodes;
        const ca = api(a, 'kc');
        const cb = api(b, 'kc');
        const wa = api(a, 'kw');
        const batch = expectStatus(await ca.post('/v1/batches', { jobs: [{ type: 'cl.job' }, { type: 'cl.job' }] }), 202).json;
        // Each node reads the running batch, and answers the same read again 304: its answer is kept.
        for (const c of [ca, cb]) {
            const r = expectStatus(await c.get(`/v1/batches/${batch.id}`), 200);
            assert.equal(r.json.counts.queued, 2);
            const again = await c.get(`/v1/batches/${batch.id}`, { headers: { 'if-none-match': hget(r, 'etag') } });
            assert.equal(again.status, 304);
        }
        const l = await leaseOne(wa, 'cl.job');
        await complete(wa, l.job.id, l.leaseId);
        // Node A committed it: its next read shows it, as a read of the job does.
        assert.equal(expectStatus(await ca.get(`/v1/jobs/${l.job.id}`), 200).json.status, 'succeeded');
        assert.equal(expectStatus(await ca.get(`/v1/batches/${batch.id}`), 200).json.counts.succeeded, 1);
        // Node B: once it shows the job succeeded, it shows the batch's count too.
        await waitUntil(() => cb.get(`/v1/jobs/${l.job.id}`), (r) => r.json?.status === 'succeeded', {
            timeoutMs: 15_000, what: 'node B to see the job succeeded',
        });
        assert.equal(expectStatus(await cb.get(`/v1/batches/${batch.id}`), 200).json.counts.succeeded, 1);
    });
});
