// Groups and fairness across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs
// this folder). The single-node cases are in ../groups.test.mjs.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, freshStore, startDaemon, standardConfig, tenant } from '../lib/daemon.mjs';
import { expectStatus, leaseOne } from '../lib/jobs.mjs';

const LIMITS = '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }';

/** Submit n jobs of group (undefined: none) in one batch; their ids in order. */
async function submitMany(c, group, n, type = 'report.export') {
    const jobs = Array.from({ length: n }, (_, i) => ({ type, payload: { i }, ...(group !== undefined && { group }) }));
    const res = expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
    for (const item of res.json.results) assert.equal(item.status, 202, JSON.stringify(item));
    return res.json.results.map((item) => item.id);
}

// On PostgreSQL every node counts the same turns: the store gives each job its turn under the cluster's write lock.
describe('groups across two nodes on one PostgreSQL database', () => {
    const nodes = [];
    after(async () => {
        for (const n of nodes) await n.stop();
    });

    it('A\'s backlog submitted on one node, B\'s job on the other: B\'s job is among the first two leased; leases on both nodes alternate', async () => {
        const store = freshStore();
        const config = standardConfig({ limits: LIMITS });
        for (let i = 0; i < 2; i++) nodes.push(await startDaemon({ config, store }));
        const [one, two] = nodes.map((n) => tenant(n));
        // The same tenant on both nodes: tenant() counts per daemon, so both hand out its first tenant.
        assert.equal(one.name, two.name);
        await submitMany(one.c, 'A', 100);
        const [b] = await submitMany(two.c, 'B', 1);
        const first = await leaseOne(two.w, 'report.export', { wait: 0 });
        const second = await leaseOne(one.w, 'report.export', { wait: 0 });
        assert.ok([first.job.id, second.job.id].includes(b), `leased ${first.job.group}, ${second.job.group} first`);
        await submitMany(two.c, 'B', 20);
        const groups = [];
        for (let i = 0; i < 8; i++) groups.push((await leaseOne([one.w, two.w][i % 2], 'report.export', { wait: 0 })).job.group);
        assert.deepEqual(groups, ['A', 'B', 'A', 'B', 'A', 'B', 'A', 'B']);
    });
});
