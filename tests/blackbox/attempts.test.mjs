// Attempt history (GET /v1/jobs/{id}/attempts): one row per lease, oldest first, with how each lease
// ended; :release (the job goes back unfinished without using an attempt); repeated final reports; fencing
// of reports under a lease that has ended.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    TIMESTAMP, assertProblem, complete, expectStatus, fail, getJob, heartbeat, hget, lease, leaseOne, show, sleep, submit,
    waitUntil,
} from './lib/jobs.mjs';

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1; // the ASan build is slower
const TYPE = 'report.export';
const BACKOFF_MS = 2000; // long enough (at least half of it, after jitter) that a backoff wrongly applied shows as a 204 on an immediate lease
const ROW_FIELDS = ['attempt', 'worker', 'startedAt', 'endedAt', 'outcome'];
const OUTCOMES = ['succeeded', 'partialSuccess', 'failed', 'retrying', 'cancelled', 'expired', 'released'];

/** GET /v1/jobs/{id}/attempts, assert 200 and the shape of every row; returns the rows. */
async function attempts(api, id) {
    const res = expectStatus(await api.get(`/v1/jobs/${id}/attempts`), 200);
    assert.match(hget(res, 'content-type') ?? '', /^application\/json/, show(res));
    assert.deepEqual(Object.keys(res.json ?? {}), ['attempts'], show(res));
    const rows = res.json.attempts;
    assert.ok(Array.isArray(rows), show(res));
    for (const r of rows) {
        const ctx = JSON.stringify(r);
        assert.deepEqual(Object.keys(r).sort(), [...ROW_FIELDS].sort(), `row members: ${ctx}`);
        assert.ok(Number.isInteger(r.attempt) && r.attempt >= 1, `attempt: ${ctx}`);
        assert.match(r.startedAt, TIMESTAMP, `startedAt: ${ctx}`);
        assert.ok(r.endedAt === null || TIMESTAMP.test(r.endedAt), `endedAt: ${ctx}`);
        assert.ok(r.outcome === null || OUTCOMES.includes(r.outcome), `outcome: ${ctx}`);
        assert.equal(r.endedAt === null, r.outcome === null, `endedAt and outcome must be null together: ${ctx}`);
        if (r.endedAt !== null) assert.ok(Date.parse(r.endedAt) >= Date.parse(r.startedAt), `ends before it starts: ${ctx}`);
    }
    return rows;
}

/** Rows are oldest first and each ended no later than the next one started (one live lease at a time). */
function assertSequential(rows) {
    for (let i = 0; i + 1 < rows.length; i++) {
        const ctx = JSON.stringify(rows);
        assert.notEqual(rows[i].endedAt, null, `row ${i} is still open while a later lease exists: ${ctx}`);
        assert.ok(Date.parse(rows[i].endedAt) <= Date.parse(rows[i + 1].startedAt), `rows ${i} and ${i + 1} overlap: ${ctx}`);
    }
}

/** A job as the worker's and the client's API see it now, for "nothing changed" checks. */
async function snapshot(t, id) {
    const job = await getJob(t.c, id);
    return { job, rows: await attempts(t.c, id) };
}

/** Lease until the job comes back (after a backoff or an expiry); returns the lease. */
async function leaseEventually(w, id, { leaseSeconds = 30, worker = 'blackbox', timeoutMs = 15_000 * SLOW } = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const res = await lease(w, TYPE, { wait: 1, leaseSeconds, worker });
        if (res.status === 200) {
            assert.equal(res.json.leases.length, 1, show(res));
            assert.equal(res.json.leases[0].job.id, id, 'leased a different job');
            return res.json.leases[0];
        }
        assert.equal(res.status, 204, show(res));
        assert.ok(Date.now() < deadline, `job ${id} did not become leasable within ${timeoutMs} ms`);
    }
}

describe('attempt history', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: `${standardConfig()}retryBackoff: ${BACKOFF_MS}ms\n` });
    });
    after(async () => {
        if (d) assert.deepEqual(await d.stop(), { code: 0, signal: null }, `daemon exit\n${d.stderr.slice(-4000)}`);
    });

    it('a queued job has no rows; a live lease is one row with endedAt and outcome null', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        assert.deepEqual(await attempts(t.c, id), []);
        const l = await leaseOne(t.w, TYPE, { expectId: id, worker: 'w-live' });
        const rows = await attempts(t.c, id);
        assert.equal(rows.length, 1, JSON.stringify(rows));
        assert.deepEqual({ ...rows[0], startedAt: undefined }, { attempt: 1, worker: 'w-live', startedAt: undefined, endedAt: null, outcome: null });
        assert.equal(rows[0].startedAt, l.job.startedAt, 'the row and the job disagree on when the lease began');
        // Worker keys read it too.
        assert.deepEqual(await attempts(t.w, id), rows);
    });

    it('lease -> fail (retryable) -> lease -> complete: two rows, retrying then succeeded, in order and not overlapping', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const t0 = Date.now();
        const l1 = await leaseOne(t.w, TYPE, { expectId: id, worker: 'w-one' });
        await sleep(20);
        const failed = await fail(t.w, id, l1.leaseId);
        assert.equal(failed.status, 'queued', JSON.stringify(failed));
        const mid = await attempts(t.c, id);
        assert.equal(mid.length, 1, JSON.stringify(mid));
        assert.equal(mid[0].outcome, 'retrying', JSON.stringify(mid));
        assert.equal(mid[0].endedAt, failed.lastUpdatedAt, 'the row ended at another time than the fail');

        const l2 = await leaseEventually(t.w, id, { worker: 'w-two' });
        assert.equal(l2.job.attempt, 2);
        await sleep(20);
        const done = await complete(t.w, id, l2.leaseId, { result: { n: 2 } });
        assert.equal(done.status, 'succeeded', JSON.stringify(done));
        const t1 = Date.now();

        const rows = await attempts(t.c, id);
        const ctx = JSON.stringify(rows);
        assert.equal(rows.length, 2, ctx);
        assert.deepEqual(rows.map((r) => [r.attempt, r.worker, r.outcome]), [[1, 'w-one', 'retrying'], [2, 'w-two', 'succeeded']], ctx);
        assertSequential(rows);
        // The retry waited out the backoff (with equal jitter, at least half of retryBackoff).
        assert.ok(Date.parse(rows[1].startedAt) - Date.parse(rows[0].endedAt) >= BACKOFF_MS / 2, `no backoff between the rows: ${ctx}`);
        assert.equal(rows[1].startedAt, done.startedAt, ctx);
        assert.equal(rows[1].endedAt, done.finishedAt, ctx);
        for (const r of rows) {
            for (const f of ['startedAt', 'endedAt']) {
                const at = Date.parse(r[f]);
                assert.ok(at >= t0 - 1000 && at <= t1 + 1000, `${f} ${r[f]} is outside the test's run: ${ctx}`);
            }
        }
    });

    it('a fail with no attempts left ends the row failed', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {}, maxAttempts: 1 })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        assert.equal((await fail(t.w, id, l.leaseId)).status, 'failed');
        assert.deepEqual((await attempts(t.c, id)).map((r) => [r.attempt, r.outcome]), [[1, 'failed']]);
    });

    it('lease expiry: the row ends expired within seconds; the next lease adds a row; the old lease is refused', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l1 = await leaseOne(t.w, TYPE, { expectId: id, leaseSeconds: 1, worker: 'w-lost' });
        const requeued = await waitUntil(() => getJob(t.c, id), (j) => j.status === 'queued', { timeoutMs: 10_000 * SLOW, intervalMs: 50, what: 'requeue after expiry' });
        assert.equal(requeued.attempt, 1, JSON.stringify(requeued));
        const rows = await attempts(t.c, id);
        assert.deepEqual(rows.map((r) => [r.attempt, r.worker, r.outcome]), [[1, 'w-lost', 'expired']], JSON.stringify(rows));
        const late = Date.parse(rows[0].endedAt) - Date.parse(l1.leaseExpiresAt);
        assert.ok(late >= 0 && late <= 3000 * SLOW, `ended ${late} ms after the lease expiry: ${JSON.stringify(rows)}`);

        // Requeued by expiry without backoff.
        const l2 = await leaseOne(t.w, TYPE, { expectId: id, wait: 0, worker: 'w-next' });
        assert.equal(l2.job.attempt, 2);
        const after2 = await attempts(t.c, id);
        assert.deepEqual(after2.map((r) => [r.attempt, r.worker, r.outcome]), [[1, 'w-lost', 'expired'], [2, 'w-next', null]], JSON.stringify(after2));
        assertSequential(after2);

        assertProblem(await heartbeat(t.w, id, l1.leaseId, { progress: 50 }), 409, 'stale-lease');
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l1.leaseId, result: { stale: true } }), 409, 'stale-lease');
        const done = await complete(t.w, id, l2.leaseId, { result: { fresh: true } });
        assert.deepEqual(done.result, { fresh: true });
        assert.deepEqual((await attempts(t.c, id)).map((r) => r.outcome), ['expired', 'succeeded']);
    });

    it('reports under an expired lease are refused with 409 stale-lease and change nothing (job requeued)', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {}, maxAttempts: 3 })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id, leaseSeconds: 1 });
        await waitUntil(() => getJob(t.c, id), (j) => j.status === 'queued', { timeoutMs: 10_000 * SLOW, intervalMs: 50, what: 'requeue after expiry' });
        const before = await snapshot(t, id);
        const reports = [
            ['heartbeat', { leaseId: l.leaseId, progress: 10 }],
            ['fail', { leaseId: l.leaseId, error: { title: 'late', code: 'late' }, retryable: true }],
            ['fail', { leaseId: l.leaseId, error: { title: 'late', code: 'late' }, retryable: false }],
            ['release', { leaseId: l.leaseId }],
            ['complete', { leaseId: l.leaseId, result: { late: true } }],
            ['cancel', { leaseId: l.leaseId }],
        ];
        const wrong = [];
        for (const [op, body] of reports) {
            const res = await t.w.post(`/v1/jobs/${id}:${op}`, body);
            if (res.status !== 409 || res.json?.code !== 'stale-lease') wrong.push(`:${op} ${JSON.stringify(body)} -> ${res.status} ${res.text.slice(0, 200)}`);
        }
        assert.deepEqual(wrong, [], 'a worker whose lease expired was not told so');
        assert.deepEqual(await snapshot(t, id), before, 'a stale report changed the job or its history');
        // Still leasable at once (a stale fail did not impose a backoff), as attempt 2.
        assert.equal((await leaseOne(t.w, TYPE, { expectId: id, wait: 0 })).job.attempt, 2);
    });

    it('reports under an expired lease are refused with 409 stale-lease (job failed by the expiry)', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {}, maxAttempts: 1 })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id, leaseSeconds: 1 });
        const ended = await waitUntil(() => getJob(t.c, id), (j) => j.status !== 'running', { timeoutMs: 10_000 * SLOW, intervalMs: 50, what: 'the expiry' });
        assert.equal(ended.status, 'failed', JSON.stringify(ended));
        assert.equal(ended.error.code, 'lease-expired', JSON.stringify(ended));
        assert.deepEqual((await attempts(t.c, id)).map((r) => r.outcome), ['expired']);
        const before = await snapshot(t, id);
        const res = await t.w.post(`/v1/jobs/${id}:fail`, { leaseId: l.leaseId, error: { title: 'mine', code: 'mine' }, retryable: false });
        assertProblem(res, 409, 'stale-lease');
        assertProblem(await t.w.post(`/v1/jobs/${id}:fail`, { leaseId: l.leaseId, retryable: true }), 409, 'stale-lease');
        assert.deepEqual(await snapshot(t, id), before);
    });

    it(':release: row released, the job queued again at once, the attempt not used', async () => {
        const t = tenant(d);
        // maxAttempts 2: if releases used attempts, the fail at the end would find none left.
        const id = (await submit(t.c, { type: TYPE, payload: {}, maxAttempts: 2 })).json.id;
        for (let round = 1; round <= 2; round++) {
            const l = await leaseOne(t.w, TYPE, { expectId: id, worker: `w-r${round}` });
            assert.equal(l.job.attempt, 1, `lease ${round} after ${round - 1} release(s)`);
            const res = expectStatus(await t.w.post(`/v1/jobs/${id}:release`, { leaseId: l.leaseId }), 200);
            assert.equal(res.json.status, 'queued', show(res));
            assert.equal(res.json.attempt, 0, `a released attempt still counts: ${show(res)}`);
            assert.equal(res.json.runAt, null, `release scheduled the job later: ${show(res)}`);
            // Repeated under the same lease: answered again, nothing changes.
            const before = await snapshot(t, id);
            const again = expectStatus(await t.w.post(`/v1/jobs/${id}:release`, { leaseId: l.leaseId }), 200);
            assert.equal(again.json.status, 'queued', show(again));
            assert.deepEqual(await snapshot(t, id), before, 'a repeated release changed something');
            assertProblem(await heartbeat(t.w, id, l.leaseId), 409, 'stale-lease');
        }
        // No backoff: leasable at once.
        const l3 = await leaseOne(t.w, TYPE, { expectId: id, wait: 0, worker: 'w-r3' });
        assert.equal(l3.job.attempt, 1);
        const failed = await fail(t.w, id, l3.leaseId);
        assert.equal(failed.status, 'queued', `attempt 1 of 2 failed, so one remains: ${JSON.stringify(failed)}`);
        const rows = await attempts(t.c, id);
        assert.deepEqual(rows.map((r) => [r.attempt, r.worker, r.outcome]),
            [[1, 'w-r1', 'released'], [1, 'w-r2', 'released'], [1, 'w-r3', 'retrying']], JSON.stringify(rows));
        assertSequential(rows);
    });

    it('only a repeat of the report that ended a lease is answered again: another report under it gets 409', async () => {
        const t = tenant(d);
        const u = tenant(d); // job b in a tenant of its own: job a is queued again and would be leased first
        const wrong = [];
        const check = async (id, op, body, k = t) => {
            const res = await k.w.post(`/v1/jobs/${id}:${op}`, body);
            if (res.status !== 409) wrong.push(`:${op} ${JSON.stringify(body)} -> ${res.status} ${res.text.slice(0, 120)}`);
        };
        // Ended by :release: a :fail under it is not a repeat.
        const a = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const la = await leaseOne(t.w, TYPE, { expectId: a });
        expectStatus(await t.w.post(`/v1/jobs/${a}:release`, { leaseId: la.leaseId }), 200);
        const beforeA = await snapshot(t, a);
        await check(a, 'fail', { leaseId: la.leaseId, retryable: true });
        await check(a, 'complete', { leaseId: la.leaseId, result: {} });
        assert.deepEqual(await snapshot(t, a), beforeA);
        // Ended by a retryable :fail: a :release under it is not a repeat.
        const b = (await submit(u.c, { type: TYPE, payload: {} })).json.id;
        const lb = await leaseOne(u.w, TYPE, { expectId: b });
        await fail(u.w, b, lb.leaseId);
        const beforeB = await snapshot(u, b);
        await check(b, 'release', { leaseId: lb.leaseId }, u);
        await check(b, 'fail', { leaseId: lb.leaseId, retryable: false }, u);
        assert.deepEqual(await snapshot(u, b), beforeB);
        assert.deepEqual(wrong, [], 'a report that did not end the lease was answered as its repeat');
    });

    it(':release of a job whose cancel was requested ends it cancelled', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        expectStatus(await t.c.del(`/v1/jobs/${id}`), 202);
        const res = expectStatus(await t.w.post(`/v1/jobs/${id}:release`, { leaseId: l.leaseId }), 200);
        assert.equal(res.json.status, 'cancelled', show(res));
        assert.deepEqual((await attempts(t.c, id)).map((r) => r.outcome), ['cancelled']);
    });

    it('cancel acknowledged by the worker: the row ends cancelled', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id, worker: 'w-c' });
        expectStatus(await t.c.del(`/v1/jobs/${id}`), 202);
        const hb = expectStatus(await heartbeat(t.w, id, l.leaseId), 200);
        assert.equal(hb.json.cancelRequested, true, show(hb));
        assert.equal((await attempts(t.c, id))[0].outcome, null, 'a cancel request alone ended the lease');
        const res = expectStatus(await t.w.post(`/v1/jobs/${id}:cancel`, { leaseId: l.leaseId }), 200);
        assert.equal(res.json.status, 'cancelled', show(res));
        const rows = await attempts(t.c, id);
        assert.deepEqual(rows.map((r) => [r.attempt, r.worker, r.outcome]), [[1, 'w-c', 'cancelled']], JSON.stringify(rows));
        assert.equal(rows[0].endedAt, res.json.finishedAt);
    });

    it('a repeated :complete under the lease that completed the job: 200, same job, result unchanged, no new row; another result 409', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        const first = expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: { v: 1 } }), 200);
        assert.equal(first.json.status, 'succeeded', show(first));
        const before = await snapshot(t, id);
        const etag = hget(expectStatus(await t.c.get(`/v1/jobs/${id}`), 200), 'etag');
        await sleep(20); // a change now would carry a later lastUpdatedAt
        const again = expectStatus(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: { v: 1 } }), 200);
        assert.deepEqual(again.json, first.json, `the repeat answered another job: ${show(again)}`);
        // Another result is another report, not a repeat (report_conflict.test.mjs has the rest).
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: { v: 2 } }), 409, 'stale-lease');
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId }), 409, 'stale-lease');
        assert.deepEqual(await snapshot(t, id), before, 'a repeated complete changed the job or its history');
        assert.deepEqual(expectStatus(await t.c.get(`/v1/jobs/${id}/result`), 200).json, { v: 1 });
        assert.equal(hget(await t.c.get(`/v1/jobs/${id}`), 'etag'), etag);
        // Not a repeat of what ended the lease: refused.
        assertProblem(await heartbeat(t.w, id, l.leaseId, { progress: 5 }), 409, 'stale-lease');
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, status: 'partialSuccess' }), 409, ['stale-lease', 'illegal-transition']);
        assertProblem(await t.w.post(`/v1/jobs/${id}:fail`, { leaseId: l.leaseId, retryable: false }), 409, ['stale-lease', 'illegal-transition']);
        assertProblem(await t.w.post(`/v1/jobs/${id}:release`, { leaseId: l.leaseId }), 409, ['stale-lease', 'illegal-transition']);
        assertProblem(await t.w.post(`/v1/jobs/${id}:complete`, { leaseId: 'lse_not-the-lease', result: { v: 3 } }), 409, 'stale-lease');
        assert.deepEqual(await snapshot(t, id), before);
    });

    it('a repeated retryable :fail under the lease it ended: 200, nothing changes', async () => {
        const t = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        const l = await leaseOne(t.w, TYPE, { expectId: id });
        const first = await fail(t.w, id, l.leaseId);
        assert.equal(first.status, 'queued');
        const before = await snapshot(t, id);
        await sleep(20);
        const again = await fail(t.w, id, l.leaseId);
        assert.deepEqual(again, first);
        assert.deepEqual(await snapshot(t, id), before);
    });

    it('another tenant gets 404 on the attempts of a job; so does an unknown id', async () => {
        const t = tenant(d);
        const other = tenant(d);
        const id = (await submit(t.c, { type: TYPE, payload: {} })).json.id;
        await leaseOne(t.w, TYPE, { expectId: id });
        for (const k of [other.c, other.w, other.a]) assertProblem(await k.get(`/v1/jobs/${id}/attempts`), 404, 'not-found');
        assertProblem(await t.c.get('/v1/jobs/job_AAAAAAAAAAAAAAAAAAAAAA/attempts'), 404, 'not-found');
        assert.equal((await attempts(t.a, id)).length, 1);
    });
});
