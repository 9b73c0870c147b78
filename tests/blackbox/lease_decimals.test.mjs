// Seconds with decimals (millisecond precision) in worker request bodies: a lease's wait and leaseSeconds, a
// heartbeat's leaseSeconds. Integers keep working; no timing is asserted (timing belongs in bench/).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, show } from './lib/jobs.mjs';

describe('decimal seconds', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('a lease with wait 0.5 is accepted and answers 204 when nothing comes', async () => {
        const { w } = tenant(d);
        const res = await w.post('/v1/leases', { types: ['report.export'], wait: 0.5 });
        assert.equal(res.status, 204, show(res));
    });

    it('leaseSeconds 1.5 on a lease and 2.25 on a heartbeat set the lease to the millisecond', async () => {
        const { c, w } = tenant(d);
        expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: {} }), 202);
        const res = expectStatus(await w.post('/v1/leases', { types: ['report.export'], wait: 1.25, leaseSeconds: 1.5 }), 200);
        const [l] = res.json.leases;
        const left = Date.parse(l.leaseExpiresAt) - Date.parse(l.job.startedAt);
        assert.equal(left, 1500, show(res));
        const hb = expectStatus(await w.post(`/v1/jobs/${l.job.id}:heartbeat`, { leaseId: l.leaseId, leaseSeconds: 2.25 }), 200);
        assert.equal(Date.parse(hb.json.leaseExpiresAt) - Date.parse(hb.json.job.lastUpdatedAt), 2250, show(hb));
        expectStatus(await w.post(`/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId, result: {} }), 200);
    });

    it('integers still work; out of range and non-numbers are 422', async () => {
        const { w } = tenant(d);
        assert.equal((await w.post('/v1/leases', { types: ['report.export'], wait: 0, leaseSeconds: 30 })).status, 204);
        for (const body of [{ wait: -0.5 }, { wait: '0.5' }, { leaseSeconds: 0.5 }, { leaseSeconds: 3600.5 }]) {
            const res = await w.post('/v1/leases', { types: ['report.export'], ...body });
            assertProblem(res, 422, 'validation-failed');
        }
    });
});
