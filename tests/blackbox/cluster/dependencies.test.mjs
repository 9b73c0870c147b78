// Dependencies in cluster mode (CONTRACT §13): two nodes on one PostgreSQL database. A worker parked on node B
// gets the job whose last dependency a worker completed on node A: the commit on A releases it, and B hears of it
// through the change feed, with nothing polling. Run by `make blackbox-pg` only.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { api, it } from '../lib/daemon.mjs';
import { complete, expectStatus, getJob, lease, leaseOne, show, submit } from '../lib/jobs.mjs';
import { startPair } from '../lib/queues.mjs';

describe('dependencies on two nodes', () => {
    let nodes = [];
    before(async () => {
        nodes = await startPair();
    });
    after(() => Promise.all(nodes.map((n) => n.stop())));

    it('a lease parked on node B is handed the job released by a completion on node A', async () => {
        const [a, b] = nodes;
        const ca = api(a, 'kc');
        const wa = api(a, 'kw');
        const wb = api(b, 'kw');
        const dep = (await submit(ca, { type: 'cl.job', payload: { step: 1 } })).json;
        const job = (await submit(ca, { type: 'cl.job', payload: { step: 2 }, dependsOn: [dep.id] })).json;
        const l = await leaseOne(wa, 'cl.job', { expectId: dep.id });
        assert.equal((await getJob(api(b, 'kc'), job.id)).waitingFor, 'dependencies');
        expectStatus(await lease(wb, 'cl.job', { wait: 0 }), 204);
        const parked = lease(wb, 'cl.job', { wait: 5 });
        await new Promise((r) => setTimeout(r, 300));
        await complete(wa, dep.id, l.leaseId);
        const res = expectStatus(await parked, 200);
        assert.equal(res.json.leases[0].job.id, job.id, show(res));
        assert.deepEqual(res.json.leases[0].job.dependsOn, [dep.id]);
    });
});
