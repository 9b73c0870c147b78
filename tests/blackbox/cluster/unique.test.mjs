// Unique jobs across two nodes on one PostgreSQL database (cluster mode; only `make blackbox-pg` runs this
// folder). The single-node cases are in ../unique.test.mjs.

import { describe, after as afterAll } from 'node:test';
import assert from 'node:assert/strict';
import { api, freshStore, it, startDaemon, tenant } from '../lib/daemon.mjs';
import { expectStatus, lease, listAll, show, submit } from '../lib/jobs.mjs';

describe('unique jobs across two nodes on one PostgreSQL database', () => {
    const nodes = [];
    afterAll(async () => {
        for (const n of nodes) await n.stop();
    });
    const config = `keys:
  - { key: "kc", tenant: c, role: client }
  - { key: "kw", tenant: c, role: worker }
types:
  u.job: {}
limits: { maxWaitSeconds: 5 }
`;

    it('twelve concurrent submits of one key, six on each node, make one job; a debounce on one node reaches a lease parked on the other', async () => {
        const store = freshStore();
        for (let i = 0; i < 2; i++) nodes.push(await startDaemon({ config, store }));
        const [ca, cb] = nodes.map((n) => api(n, 'kc'));
        const answers = await Promise.all(
            Array.from({ length: 12 }, (_, i) => submit(i % 2 ? cb : ca, { type: 'u.job', payload: { i }, uniqueKey: 'k', debounceSeconds: 600 })),
        );
        const ids = new Set(answers.map((a) => a.json.id));
        assert.equal(ids.size, 1, `several jobs: ${[...ids]}`);
        assert.equal(answers.filter((a) => a.json.deduplicated === true).length, 11);
        assert.equal((await listAll(ca)).length, 1);
        // A lease parked on A; B brings the job forward to 1 s from now: A's runAt timer follows the change.
        const parked = lease(api(nodes[0], 'kw'), 'u.job', { wait: 5 });
        await new Promise((r) => setTimeout(r, 200));
        const moved = await submit(cb, { type: 'u.job', payload: { last: true }, uniqueKey: 'k', debounceSeconds: 1 });
        assert.equal(moved.json.id, [...ids][0]);
        const got = expectStatus(await parked, 200);
        assert.equal(got.json.leases[0].job.id, moved.json.id, show(got));
        assert.deepEqual(got.json.leases[0].job.payload, { last: true });
    });
});
