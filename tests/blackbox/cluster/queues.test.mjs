// Queue settings across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs this
// folder). The single-node cases are in ../queues.test.mjs.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { it, api } from '../lib/daemon.mjs';
import { expectStatus, lease, mapLimit, sleep, submit } from '../lib/jobs.mjs';
import { getQueue, patchQueue, runOnPair, startPair } from '../lib/queues.mjs';

describe('queues in cluster mode: two nodes on one PostgreSQL database', () => {
    it('type concurrency 3 holds across the nodes with workers on both (running count sampled throughout)', async () => {
        const [a, b] = await startPair();
        try {
            const JOBS = 36;
            expectStatus(await patchQueue(api(a, 'ka'), 'cl.job', { concurrency: 3 }), 200);
            // Node B learns of the setting from the store, not from A.
            assert.equal((await getQueue(api(b, 'kc'), 'cl.job')).concurrency, 3);
            const ca = api(a, 'kc');
            await mapLimit([...Array(JOBS).keys()], 8, (i) => submit(ca, { type: 'cl.job', payload: { i } }));
            let maxRunning = 0;
            const { maxHeld: held, samples } = await runOnPair([a, b], JOBS, () => 'all', async (node) => {
                maxRunning = Math.max(maxRunning, (await getQueue(api(node, 'kc'), 'cl.job')).counts.running);
            });
            const maxHeld = held.all;
            assert.ok(samples > 10, `only ${samples} samples`);
            assert.ok(maxRunning <= 3, `the running count reached ${maxRunning}`);
            assert.ok(maxHeld <= 3, `the workers held ${maxHeld} leases at once`);
            assert.ok(maxRunning >= 2 || maxHeld >= 2, 'the workers never ran two jobs at once: the test proves nothing');
            const q = await getQueue(api(b, 'kc'), 'cl.job');
            assert.deepEqual(q.counts, { queued: 0, running: 0, scheduled: 0, waiting: 0 });
        } finally {
            await a.stop();
            await b.stop();
        }
    });

    it('a resume on one node wakes a lease parked on the other', async () => {
        const [a, b] = await startPair();
        try {
            expectStatus(await patchQueue(api(a, 'ka'), 'cl.job', { paused: true }), 200);
            const id = (await submit(api(a, 'kc'), { type: 'cl.job', payload: {} })).json.id;
            const parked = lease(api(b, 'kw'), 'cl.job', { wait: 5 });
            await sleep(500);
            expectStatus(await patchQueue(api(a, 'ka'), 'cl.job', { paused: false }), 200);
            const res = expectStatus(await parked, 200);
            assert.equal(res.json.leases[0].job.id, id);
            assert.ok(res.ms < 4500, `the lease parked on B took ${res.ms} ms: the resume on A did not wake it`);
        } finally {
            await a.stop();
            await b.stop();
        }
    });
});
