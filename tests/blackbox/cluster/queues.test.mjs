// Queue settings across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs this
// folder). The single-node cases are in ../queues.test.mjs.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { it, api } from '../lib/daemon.mjs';
import { complete, expectStatus, lease, mapLimit, sleep, submit } from '../lib/jobs.mjs';
import { getQueue, patchQueue, startPair } from '../lib/queues.mjs';

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
            let held = 0;
            let maxHeld = 0;
            let done = 0;
            const workers = [];
            for (const node of [a, b]) {
                const w = api(node, 'kw');
                for (let k = 0; k < 3; k++) {
                    workers.push((async () => {
                        while (done < JOBS) {
                            const res = await lease(w, 'cl.job', { max: 2, wait: 2 });
                            if (res.status === 204) continue;
                            const got = expectStatus(res, 200).json.leases;
                            held += got.length;
                            maxHeld = Math.max(maxHeld, held);
                            await sleep(60);
                            for (const l of got) {
                                held--;
                                await complete(w, l.job.id, l.leaseId);
                                done++;
                            }
                        }
                    })());
                }
            }
            let maxRunning = 0;
            let samples = 0;
            const sampler = (async () => {
                for (let i = 0; done < JOBS; i++) {
                    const q = await getQueue(api(i % 2 ? b : a, 'kc'), 'cl.job');
                    maxRunning = Math.max(maxRunning, q.counts.running);
                    samples++;
                    await sleep(10);
                }
            })();
            await Promise.race([
                Promise.all([...workers, sampler]),
                sleep(60_000).then(() => assert.fail(`only ${done} of ${JOBS} jobs done within 60 s`)),
            ]);
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
