// Lean answers: Prefer: return=minimal (RFC 7240 §4.2) on submit, leases and reports with next, answered with
// Preference-Applied; a client that does not ask still gets the whole job.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { JOB_ID, TIMESTAMP, assertJobShape, expectStatus, hget, show } from './lib/jobs.mjs';

const MINIMAL = { prefer: 'return=minimal' };
const LEAN_LEASE = ['attempt', 'id', 'leaseExpiresAt', 'leaseId', 'payload', 'type'];

function applied(res) {
    return (hget(res, 'preference-applied') ?? '').split(',').map((s) => s.trim());
}

describe('Prefer: return=minimal', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('submit: the 202 and its headers as always, a body of only {id}', async () => {
        const { c } = tenant(d);
        const res = expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: { a: 1 } }, { headers: MINIMAL }), 202);
        assert.deepEqual(Object.keys(res.json), ['id'], show(res));
        assert.match(res.json.id, JOB_ID);
        assert.ok(applied(res).includes('return=minimal'), show(res));
        assert.equal(hget(res, 'location'), `/v1/jobs/${res.json.id}`);
        assert.ok(hget(res, 'etag'), show(res));
        assert.ok(hget(res, 'operation-location')?.endsWith(`/v1/jobs/${res.json.id}/status`), show(res));
        const both = expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: {} }, { headers: { prefer: 'respond-async, return=minimal' } }), 202);
        assert.deepEqual(Object.keys(both.json), ['id'], show(both));
        assert.deepEqual(applied(both).sort(), ['respond-async', 'return=minimal'], show(both));
    });

    it('without Prefer (or with return=representation) submit answers the whole job', async () => {
        const { c } = tenant(d);
        for (const headers of [{}, { prefer: 'return=representation' }]) {
            const res = expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: {} }, { headers }), 202);
            assertJobShape(res.json);
            assert.equal(hget(res, 'preference-applied'), null, show(res));
        }
    });

    it('POST /v1/leases: each lease is only {id, type, payload, attempt, leaseId, leaseExpiresAt}', async () => {
        const { c, w } = tenant(d);
        const id = expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: { k: 'v' } }), 202).json.id;
        const res = expectStatus(await w.post('/v1/leases', { types: ['report.export'], wait: 2 }, { headers: MINIMAL }), 200);
        assert.deepEqual(Object.keys(res.json), ['leases'], show(res));
        assert.equal(res.json.leases.length, 1, show(res));
        const [l] = res.json.leases;
        assert.deepEqual(Object.keys(l).sort(), LEAN_LEASE, show(res));
        assert.equal(l.id, id);
        assert.equal(l.type, 'report.export');
        assert.deepEqual(l.payload, { k: 'v' });
        assert.equal(l.attempt, 1);
        assert.match(l.leaseId, /^lse_/);
        assert.match(l.leaseExpiresAt, TIMESTAMP);
        assert.ok(applied(res).includes('return=minimal'), show(res));
    });

    it('a parked lease handed a new job is lean too', async () => {
        const { c, w } = tenant(d);
        const parked = w.post('/v1/leases', { types: ['report.export'], wait: 5 }, { headers: MINIMAL });
        await new Promise((r) => setTimeout(r, 300));
        const id = expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: { p: 2 } }), 202).json.id;
        const res = expectStatus(await parked, 200);
        assert.deepEqual(Object.keys(res.json.leases[0]).sort(), LEAN_LEASE, show(res));
        assert.equal(res.json.leases[0].id, id);
    });

    it(':complete, :fail and :release with next: {job: {id, status}, leases: [lean]}', async () => {
        const { c, w } = tenant(d);
        for (const [verb, extra, status] of [
            ['complete', { result: { ok: true } }, 'succeeded'],
            ['fail', { error: { title: 'x', status: 500 }, retryable: false }, 'failed'],
            ['release', {}, 'queued'],
        ]) {
            expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: {} }), 202);
            const first = expectStatus(await w.post('/v1/leases', { types: ['report.export'], wait: 2 }), 200).json.leases[0];
            const nextId = expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: { n: 1 } }), 202).json.id;
            const res = expectStatus(await w.post(`/v1/jobs/${first.job.id}:${verb}`, { leaseId: first.leaseId, ...extra, next: { types: ['report.export'] } }, { headers: MINIMAL }), 200);
            assert.deepEqual(Object.keys(res.json).sort(), ['job', 'leases'], show(res));
            assert.deepEqual(res.json.job, { id: first.job.id, status }, show(res));
            assert.equal(res.json.leases.length, 1, show(res));
            assert.deepEqual(Object.keys(res.json.leases[0]).sort(), LEAN_LEASE, show(res));
            assert.ok(applied(res).includes('return=minimal'), show(res));
            // release puts the first job back ahead of the later one; either way it is one of the two.
            assert.ok([nextId, first.job.id].includes(res.json.leases[0].id), show(res));
            const l = res.json.leases[0];
            expectStatus(await w.post(`/v1/jobs/${l.id}:complete`, { leaseId: l.leaseId, result: {} }), 200);
            // drain whatever is left of this tenant's queue
            for (;;) {
                const more = await w.post('/v1/leases', { types: ['report.export'], wait: 0 });
                if (more.status === 204) break;
                const m = more.json.leases[0];
                expectStatus(await w.post(`/v1/jobs/${m.job.id}:complete`, { leaseId: m.leaseId, result: {} }), 200);
            }
        }
    });

    it('without Prefer, leases and reports with next carry the whole job', async () => {
        const { c, w } = tenant(d);
        expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: {} }), 202);
        expectStatus(await c.post('/v1/jobs', { type: 'report.export', payload: {} }), 202);
        const res = expectStatus(await w.post('/v1/leases', { types: ['report.export'], wait: 2 }), 200);
        const [l] = res.json.leases;
        assert.deepEqual(Object.keys(l).sort(), ['job', 'leaseExpiresAt', 'leaseId'], show(res));
        assertJobShape(l.job);
        assert.equal(hget(res, 'preference-applied'), null);
        const rep = expectStatus(await w.post(`/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId, result: {}, next: { types: ['report.export'] } }), 200);
        assertJobShape(rep.json.job);
        assert.deepEqual(Object.keys(rep.json.leases[0]).sort(), ['job', 'leaseExpiresAt', 'leaseId'], show(rep));
    });
});
