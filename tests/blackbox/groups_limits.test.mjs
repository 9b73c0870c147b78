// Per-group limits (CONTRACT.md section 11, docs/protocol.md "Queues"): groupConcurrency and groupRateLimit hold
// per group while the other groups' jobs go on, a held-back job says why in waitingFor, and a lease parked on a
// full group gets its next job the moment a slot frees. Runs on SQLite and on PostgreSQL; the cluster part (two
// nodes on one database) only on PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { complete, expectStatus, lease, show, sleep, submit } from './lib/jobs.mjs';
import { getQueue, patchQueue } from './lib/queues.mjs';

async function submitGroup(c, type, group, i) {
    return expectStatus(await submit(c, { type, payload: { i }, group }), 202).json.id;
}

describe('per-group limits', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ types: '\n  video.transcode: {}\n  report.export: {}\n  email.send: {}' }) });
    });
    after(() => d?.stop());

    it('groupConcurrency 1: one running per group, the other group leased meanwhile, the next once one ends (parked too)', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { groupConcurrency: 1 }), 200);
        const a1 = await submitGroup(c, 'report.export', 'A', 1);
        const a2 = await submitGroup(c, 'report.export', 'A', 2);
        const a3 = await submitGroup(c, 'report.export', 'A', 3);
        const b1 = await submitGroup(c, 'report.export', 'B', 1);
        // One lease asking for 10 gets one job of each group, never two of one.
        const first = expectStatus(await lease(w, 'report.export', { max: 10 }), 200).json.leases;
        assert.deepEqual(first.map((l) => l.job.group).sort(), ['A', 'B'], show({ json: first }));
        const la = first.find((l) => l.job.group === 'A');
        const lb = first.find((l) => l.job.group === 'B');
        assert.equal(la.job.id, a1);
        assert.equal(lb.job.id, b1);
        // A is full: nothing more is leased, and A's next job says why.
        assert.equal((await lease(w, 'report.export', { max: 10, wait: 0 })).status, 204);
        const held = expectStatus(await c.get(`/v1/jobs/${a2}`), 200);
        assert.equal(held.json.status, 'queued');
        assert.equal(held.json.waitingFor, 'groupConcurrency', show(held));
        // B's job ending frees nothing of A's.
        await complete(w, lb.job.id, lb.leaseId);
        assert.equal((await lease(w, 'report.export', { max: 10, wait: 0 })).status, 204);
        // A group B job submitted now is leased at once while A stays full.
        const b2 = await submitGroup(c, 'report.export', 'B', 2);
        const nb = expectStatus(await lease(w, 'report.export', { max: 10 }), 200).json.leases;
        assert.deepEqual(nb.map((l) => l.job.id), [b2]);
        // A parked lease gets A's next job the moment A's running job completes.
        const parked = lease(w, 'report.export', { max: 10, wait: 5 });
        await sleep(300);
        await complete(w, la.job.id, la.leaseId);
        const res = expectStatus(await parked, 200);
        assert.deepEqual(res.json.leases.map((l) => l.job.id), [a2]);
        assert.ok(res.ms < 4500, `the parked lease took ${res.ms} ms: it was not woken by the freed slot`);
        assert.equal((await lease(w, 'report.export', { max: 10, wait: 0 })).status, 204);
        const still = expectStatus(await c.get(`/v1/jobs/${a3}`), 200);
        assert.equal(still.json.waitingFor, 'groupConcurrency', show(still));
    });

    it('groupConcurrency 2 with a full group at the head of a long backlog: the other groups are leased', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { groupConcurrency: 2 }), 200);
        const ids = [];
        expectStatus(await c.post('/v1/jobs:batch', {
            jobs: Array.from({ length: 60 }, (_, i) => ({ type: 'report.export', payload: { i }, group: 'big' })),
        }), 207);
        const two = expectStatus(await lease(w, 'report.export', { max: 10 }), 200).json.leases;
        assert.equal(two.length, 2, 'a lease took more than the group\'s room');
        for (let i = 0; i < 5; i++) ids.push(await submitGroup(c, 'report.export', `g${i}`, i));
        const got = expectStatus(await lease(w, 'report.export', { max: 10 }), 200).json.leases;
        assert.deepEqual(got.map((l) => l.job.id).sort(), [...ids].sort(), show({ json: got }));
        const q = expectStatus(await c.get('/v1/queues/report.export'), 200).json;
        assert.equal(q.counts.running, 7);
    });

    it('a submit is not handed to a parked worker past its group\'s limit', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { groupConcurrency: 1 }), 200);
        await submitGroup(c, 'report.export', 'A', 1);
        expectStatus(await lease(w, 'report.export'), 200);
        const parked = lease(w, 'report.export', { wait: 2 });
        await sleep(300);
        const id = await submitGroup(c, 'report.export', 'A', 2);
        assert.equal((await parked).status, 204);
        assert.equal(expectStatus(await c.get(`/v1/jobs/${id}`), 200).json.status, 'queued');
    });

    it('groupRateLimit: a group\'s leases per window never exceed the limit while another group\'s go on', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { groupRateLimit: { limit: 2, period: '1m' } }), 200);
        const aIds = [];
        for (let i = 0; i < 4; i++) aIds.push(await submitGroup(c, 'report.export', 'A', i));
        const bIds = [];
        for (let i = 0; i < 2; i++) bIds.push(await submitGroup(c, 'report.export', 'B', i));
        const got = [];
        for (let k = 0; k < 4; k++) {
            const res = await lease(w, 'report.export', { max: 10, wait: 0 });
            if (res.status === 204) break;
            got.push(...expectStatus(res, 200).json.leases.map((l) => l.job));
        }
        const byGroup = (g) => got.filter((j) => j.group === g).map((j) => j.id);
        // A window of one minute: A gets 2 of its 4 (the oldest), B both of its own.
        assert.deepEqual(byGroup('A'), aIds.slice(0, 2), show({ json: got }));
        assert.deepEqual(byGroup('B').sort(), [...bIds].sort());
        const held = expectStatus(await c.get(`/v1/jobs/${aIds[2]}`), 200);
        assert.equal(held.json.waitingFor, 'groupRateLimit', show(held));
        // A new group is still leased.
        const cId = await submitGroup(c, 'report.export', 'C', 0);
        const res = expectStatus(await lease(w, 'report.export', { max: 10 }), 200).json.leases;
        assert.deepEqual(res.map((l) => l.job.id), [cId]);
    });

    it('groupRateLimit: a parked lease is answered when the group\'s window opens', async () => {
        const { c, w, a } = tenant(d);
        expectStatus(await patchQueue(a, 'report.export', { groupRateLimit: { limit: 1, period: '2s' } }), 200);
        for (let i = 0; i < 3; i++) await submitGroup(c, 'report.export', 'A', i);
        const starts = [];
        const t0 = Date.now();
        while (starts.length < 3 && Date.now() - t0 < 15_000) {
            const res = await lease(w, 'report.export', { max: 10, wait: 5 });
            if (res.status === 204) continue;
            const got = expectStatus(res, 200).json.leases;
            assert.equal(got.length, 1, `one lease answer held ${got.length} jobs of a group limited to 1 per window`);
            starts.push(Date.parse(got[0].job.startedAt));
        }
        assert.equal(starts.length, 3, 'not every job was leased');
        for (let i = 1; i < 3; i++)
            assert.notEqual(Math.floor(starts[i] / 2000), Math.floor(starts[i - 1] / 2000), 'two leases in one window');
        // Three windows of 2 s: a request parked on the limit is answered as a window opens, not at its 5 s wait.
        assert.ok(Date.now() - t0 < 9000, `3 leases took ${Date.now() - t0} ms: the opening windows did not wake the parked request`);
    });
});

describe('the jobs held back by their group\'s limit are counted as waiting', () => {
    it('counts.waiting and waitingFor of the queue, and acceptd_jobs_waiting{reason} in /metrics', async () => {
        const d = await startDaemon({ config: standardConfig({ types: '\n  video.transcode: {}\n  report.export: {}\n  email.send: {}' }) });
        try {
            const { c, w, a } = tenant(d);
            // groupConcurrency 1: A's first job runs, its other two wait; B's runs, C's job has room.
            expectStatus(await patchQueue(a, 'report.export', { groupConcurrency: 1 }), 200);
            for (let i = 0; i < 3; i++) await submitGroup(c, 'report.export', 'A', i);
            await submitGroup(c, 'report.export', 'B', 0);
            const got = expectStatus(await lease(w, 'report.export', { max: 10, wait: 0 }), 200).json.leases;
            assert.deepEqual(got.map((l) => l.job.group).sort(), ['A', 'B']);
            await submitGroup(c, 'report.export', 'C', 0);
            let q = await getQueue(c, 'report.export');
            assert.deepEqual(q.counts, { queued: 3, running: 2, scheduled: 0, waiting: 2 }, JSON.stringify(q));
            assert.equal(q.waitingFor, 'groupConcurrency');
            // groupRateLimit 1 a minute: A's first job is leased, its other three wait for the window.
            expectStatus(await patchQueue(a, 'email.send', { groupRateLimit: { limit: 1, period: '1m' } }), 200);
            for (let i = 0; i < 4; i++) await submitGroup(c, 'email.send', 'A', i);
            assert.equal(expectStatus(await lease(w, 'email.send', { max: 10, wait: 0 }), 200).json.leases.length, 1);
            q = await getQueue(c, 'email.send');
            assert.deepEqual(q.counts, { queued: 3, running: 1, scheduled: 0, waiting: 3 }, JSON.stringify(q));
            assert.equal(q.waitingFor, 'groupRateLimit');
            const m = expectStatus(await a.get('/metrics'), 200).text;
            assert.match(m, /^acceptd_jobs_waiting\{reason="groupConcurrency"\} 2$/m, m);
            assert.match(m, /^acceptd_jobs_waiting\{reason="groupRateLimit"\} 3$/m, m);
            assert.match(m, /^acceptd_jobs_waiting\{reason="concurrency"\} 0$/m, m);
        } finally {
            await d.stop();
        }
    });
});
