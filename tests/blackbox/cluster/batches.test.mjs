// Batches in cluster mode (CONTRACT §13): two nodes on one PostgreSQL database. A batch created on node A is read
// on node B with the counts A's completions wrote, and a stream of it open on node B gets done when its last job
// ends on node A (B hears of the change through the change feed). Run by `make blackbox-pg` only.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { api, it } from '../lib/daemon.mjs';
import { complete, expectStatus, leaseOne } from '../lib/jobs.mjs';
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
});
