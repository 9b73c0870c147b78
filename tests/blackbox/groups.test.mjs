// Groups and fairness (docs/protocol.md "Groups and fairness"): a submit may name a group, the job shows it, a bad
// one is a 422 with a pointer, and within a type and priority leases take the groups round-robin, each group's jobs
// oldest first, so that a backlog of one group does not hold back another's job. Runs on SQLite and on PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertJobShape, assertProblem, expectStatus, getJob, lease, leaseOne, show, submit, fail } from './lib/jobs.mjs';

const LIMITS = '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }';
// A route whose jobs take their group from a member of the body (the payload).
const ROUTES = `
  - { method: POST, path: /v1/exports, type: report.export, group: "customer/id" }`;

/** Submit n jobs of group (undefined: none) in one batch; their ids in order. */
async function submitMany(c, group, n, type = 'report.export') {
    const jobs = Array.from({ length: n }, (_, i) => ({ type, payload: { i }, ...(group !== undefined && { group }) }));
    const res = expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
    for (const item of res.json.results) assert.equal(item.status, 202, JSON.stringify(item));
    return res.json.results.map((item) => item.id);
}

/** Lease n jobs one lease at a time; their groups in order ('-' for none). */
async function leaseGroups(w, n, type = 'report.export') {
    const groups = [];
    for (let i = 0; i < n; i++) {
        const l = await leaseOne(w, type, { wait: 0 });
        groups.push(l.job.group ?? '-');
    }
    return groups;
}

describe('groups', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: LIMITS, routes: ROUTES }) });
    });
    after(() => d?.stop());

    it('a submit names a group; the job shows it, and a job without one has no group member', async () => {
        const { c, w } = tenant(d);
        const res = await submit(c, { type: 'report.export', payload: {}, group: 'customer-42' });
        assertJobShape(res.json);
        assert.equal(res.json.group, 'customer-42', show(res));
        assert.equal((await getJob(c, res.json.id)).group, 'customer-42');
        const none = await submit(c, { type: 'report.export', payload: {} });
        assert.ok(!('group' in none.json), show(none));
        const nulled = await submit(c, { type: 'report.export', payload: {}, group: null });
        assert.ok(!('group' in nulled.json), show(nulled));
        const edge = '~'.repeat(127) + ' ';
        assert.equal((await submit(c, { type: 'report.export', payload: {}, group: edge })).json.group, edge);
        // The lease shows it, and a retry keeps it.
        const l = await leaseOne(w, 'report.export', { wait: 0 });
        assert.equal(l.job.id, res.json.id);
        assert.equal(l.job.group, 'customer-42');
        assert.equal((await fail(w, l.job.id, l.leaseId, { retryable: false })).status, 'failed');
        const retried = expectStatus(await c.req('POST', `/v1/jobs/${l.job.id}:retry`), 202);
        assert.equal(retried.json.group, 'customer-42', show(retried));
    });

    it('a bad group is a 422 with a pointer to it, alone or in a batch', async () => {
        const { c } = tenant(d);
        for (const group of ['', 'x'.repeat(129), 42, true, ['a'], { a: 1 }, 'tab\there', 'new\nline', 'caf\u00e9', 'del\u007f']) {
            const res = await c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: {}, group } });
            const p = assertProblem(res, 422, 'validation-failed');
            assert.ok(p.errors?.some((e) => e.pointer === '/group'), `no error at /group for ${JSON.stringify(group)}: ${res.text}`);
        }
        const res = expectStatus(await c.req('POST', '/v1/jobs:batch', {
            body: { jobs: [{ type: 'report.export', group: 'ok' }, { type: 'report.export', group: '' }] },
        }), 207);
        const [ok, bad] = res.json.results;
        assert.equal(ok.status, 202, JSON.stringify(ok));
        assert.equal(ok.job.group, 'ok');
        assert.equal(bad.status, 422, JSON.stringify(bad));
        assert.ok(bad.problem.errors?.some((e) => /\/group$/.test(e.pointer)), JSON.stringify(bad));
    });

    it('a route takes the group from the body member it names; a bad one is a 422 with a pointer to it', async () => {
        const { c, w } = tenant(d);
        const res = await submit(c, { 'customer/id': 'c-7', size: 1 }, { path: '/v1/exports' });
        assert.equal(res.json.group, 'c-7', show(res));
        assert.deepEqual(res.json.payload, { 'customer/id': 'c-7', size: 1 });
        const none = await submit(c, { size: 2 }, { path: '/v1/exports' });
        assert.ok(!('group' in none.json), show(none));
        const bad = await c.req('POST', '/v1/exports', { body: { 'customer/id': 7 } });
        const p = assertProblem(bad, 422, 'validation-failed');
        assert.ok(p.errors?.some((e) => e.pointer === '/customer~1id'), bad.text);
        assert.equal((await leaseOne(w, 'report.export', { wait: 0 })).job.group, 'c-7');
    });

    it('100 jobs of group A, then one of group B: B\'s job is among the first two leased', async () => {
        const { c, w } = tenant(d);
        await submitMany(c, 'A', 100);
        const [b] = await submitMany(c, 'B', 1);
        const first = await leaseOne(w, 'report.export', { wait: 0 });
        const second = await leaseOne(w, 'report.export', { wait: 0 });
        assert.ok([first.job.id, second.job.id].includes(b), `leased ${first.job.group}, ${second.job.group} first`);
        // A's jobs come oldest first.
        const a = first.job.id === b ? second.job : first.job;
        assert.deepEqual(a.payload, { i: 0 });
    });

    it('two groups with backlogs alternate, one lease at a time and in one answer; no group is one group', async () => {
        const { c, w } = tenant(d);
        await submitMany(c, 'A', 30);
        await submitMany(c, 'B', 30);
        await submitMany(c, undefined, 30);
        assert.deepEqual(await leaseGroups(w, 9), ['A', 'B', '-', 'A', 'B', '-', 'A', 'B', '-']);
        const res = expectStatus(await lease(w, 'report.export', { wait: 0, max: 6 }), 200);
        assert.deepEqual(res.json.leases.map((l) => l.job.group ?? '-'), ['A', 'B', '-', 'A', 'B', '-'], show(res));
        // Within each group, oldest first.
        const more = expectStatus(await lease(w, 'report.export', { wait: 0, max: 3 }), 200);
        assert.deepEqual(more.json.leases.map((l) => l.job.payload.i), [5, 5, 5], show(more));
    });

    it('a group that arrives later joins the turn the queue is at, and priority still comes first', async () => {
        const { c, w } = tenant(d);
        await submitMany(c, 'A', 20);
        assert.deepEqual(await leaseGroups(w, 10), Array(10).fill('A'));
        await submitMany(c, 'C', 3);
        const high = await submit(c, { type: 'report.export', payload: {}, group: 'A', priority: 'high' });
        const l = await leaseOne(w, 'report.export', { wait: 0 });
        assert.equal(l.job.id, high.json.id);
        assert.deepEqual(await leaseGroups(w, 6), ['A', 'C', 'A', 'C', 'A', 'C']);
    });
});
