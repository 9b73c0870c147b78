// Per-group limits across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs this
// folder). The single-node cases are in ../groups_limits.test.mjs.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { it, api } from '../lib/daemon.mjs';
import { expectStatus, mapLimit, submit } from '../lib/jobs.mjs';
import { patchQueue, runOnPair, startPair } from '../lib/queues.mjs';

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
            let maxRunning = 0;
            const { maxHeld, samples } = await runOnPair([a, b], JOBS, (job) => job.group, async (node) => {
                const list = expectStatus(await api(node, 'kc').get('/v1/jobs?status=running&type=cl.job&limit=100'), 200).json;
                const jobs = list.jobs ?? list.items ?? [];
                for (const g of GROUPS) maxRunning = Math.max(maxRunning, jobs.filter((j) => j.group === g).length);
            });
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
