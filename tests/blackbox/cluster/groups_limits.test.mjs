// Per-group limits across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs this
// folder). The single-node cases are in ../groups_limits.test.mjs.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { it, api } from '../lib/daemon.mjs';
import { complete, expectStatus, lease, mapLimit, sleep, submit } from '../lib/jobs.mjs';
import { patchQueue, startPair } from '../lib/queues.mjs';

describe('per-group limits in cluster mode: two nodes on one PostgreSQL database', () => {
    it('groupConcurrency 2 holds across the nodes with workers on both (running counts sampled throughout)', async () => {
        const [a, b] = await startPair();
        try {
            const GROUPS = ['x', 'y'];
            const PER = 14;
            const JOBS = GROUPS.length * PER;
            expectStatus(await patchQueue(api(a, 'ka'), 'cl.job', { groupConcurrency: 2 }), 200);
            const ca = api(a, 'kc');
            await mapLimit([...Array(JOBS).keys()], 8, (i) => submit(ca, { type: 'cl.job', payload: { i }, group: GROUPS[i % 2] }));
            const held = { x: 0, y: 0 };
            const maxHeld = { x: 0, y: 0 };
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
                            for (const l of got) {
                                held[l.job.group]++;
                                maxHeld[l.job.group] = Math.max(maxHeld[l.job.group], held[l.job.group]);
                            }
                            await sleep(60);
                            for (const l of got) {
                                held[l.job.group]--;
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
                    const c = api(i % 2 ? b : a, 'kc');
                    const list = expectStatus(await c.get('/v1/jobs?status=running&type=cl.job&limit=100'), 200).json;
                    const jobs = list.jobs ?? list.items ?? [];
                    for (const g of GROUPS) maxRunning = Math.max(maxRunning, jobs.filter((j) => j.group === g).length);
                    samples++;
                    await sleep(10);
                }
            })();
            await Promise.race([
                Promise.all([...workers, sampler]),
                sleep(60_000).then(() => assert.fail(`only ${done} of ${JOBS} jobs done within 60 s`)),
            ]);
            assert.ok(samples > 10, `only ${samples} samples`);
            assert.ok(maxRunning <= 2, `a group's running count reached ${maxRunning}`);
            assert.ok(maxHeld.x <= 2 && maxHeld.y <= 2, `the workers held ${JSON.stringify(maxHeld)} leases of a group at once`);
            assert.ok(maxHeld.x + maxHeld.y >= 3, 'the workers never ran more than two jobs at once: the test proves nothing');
        } finally {
            await a.stop();
            await b.stop();
        }
    });
});
