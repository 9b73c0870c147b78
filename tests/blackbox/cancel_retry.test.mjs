// Cancel (DELETE and :cancel, queued/running/terminal, worker acknowledgement, lease run-out) and :retry.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    JOB_ID, assertJobShape, assertProblem, assertRetryAfter, expectStatus, getJob, heartbeat, hget, listAll, runToCancelled,
    runToFailure, runToSuccess, submit, submitAndLease, waitUntil,
} from './lib/jobs.mjs';

const cancelBy = {
    DELETE: (c, id) => c.del(`/v1/jobs/${id}`),
    ':cancel': (c, id) => c.post(`/v1/jobs/${id}:cancel`),
};

describe('cancel', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    for (const [how, cancel] of Object.entries(cancelBy)) {
        it(`${how} on a queued job -> 200 cancelled at once`, async () => {
            const { c } = tenant(d);
            const id = (await submit(c)).json.id;
            const res = expectStatus(await cancel(c, id), 200);
            assertJobShape(res.json);
            assert.equal(res.json.status, 'cancelled');
            assert.equal(res.json.id, id);
            const job = await getJob(c, id);
            assert.equal(job.status, 'cancelled');
            assert.notEqual(job.finishedAt, null);
        });

        it(`${how} on a terminal job -> 409 illegal-transition, job unchanged`, async () => {
            const { c, w } = tenant(d);
            const done = await runToSuccess(c, w);
            const p = assertProblem(await cancel(c, done.id), 409, 'illegal-transition');
            assert.match(p.detail, /is succeeded/, 'the detail says what state stands in the way');
            assert.equal((await getJob(c, done.id)).status, 'succeeded');
            const cancelled = await runToCancelled(c);
            const before = await c.get(`/v1/jobs/${cancelled.id}`);
            assertProblem(await cancel(c, cancelled.id), 409, 'illegal-transition');
            const after = await c.get(`/v1/jobs/${cancelled.id}`);
            assert.equal(after.headers.get('etag'), before.headers.get('etag'));
        });
    }

    it('a running job: 202 cancelRequested, the heartbeat says so, the worker acknowledges -> cancelled', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const id = l.job.id;
        const res = expectStatus(await c.del(`/v1/jobs/${id}`), 202);
        assert.equal(res.json.status, 'running');
        assert.equal(res.json.cancelRequested, true);
        const seen = await getJob(c, id);
        assert.equal(seen.status, 'running');
        assert.equal(seen.cancelRequested, true);

        const hb = expectStatus(await heartbeat(w, id, l.leaseId, { progress: 30 }), 200);
        assert.equal(hb.json.cancelRequested, true);

        const ack = expectStatus(await w.post(`/v1/jobs/${id}:cancel`, { leaseId: l.leaseId }), 200);
        assert.equal(ack.json.status, 'cancelled');
        const job = await getJob(c, id);
        assert.equal(job.status, 'cancelled');
        assertJobShape(job);
        assertProblem(await w.post(`/v1/jobs/${id}:complete`, { leaseId: l.leaseId, result: {} }), 409, 'stale-lease');
        assert.equal((await getJob(c, id)).status, 'cancelled');
    });

    it('a running job whose cancel is requested becomes cancelled when its lease runs out', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w, { type: 'report.export', payload: {} }, { leaseSeconds: 1 });
        expectStatus(await c.post(`/v1/jobs/${l.job.id}:cancel`), 202);
        const res = await waitUntil(() => c.get(`/v1/jobs/${l.job.id}`), (r) => r.json?.status === 'cancelled', {
            timeoutMs: 10_000, what: 'the job to become cancelled after its lease ran out',
        });
        assert.equal(res.json.status, 'cancelled');
    });
});

describe('retry', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('a failed job: 202, a new job with retryOf, same type, payload, priority and options', async () => {
        const { c, w } = tenant(d);
        const failed = await runToFailure(c, w, { type: 'report.export', payload: { p: [1, 2] }, priority: 'high', timeoutSeconds: 77 });
        const res = expectStatus(await c.post(`/v1/jobs/${failed.id}:retry`), 202);
        const job = res.json;
        assertJobShape(job);
        assert.match(job.id, JOB_ID);
        assert.notEqual(job.id, failed.id);
        assert.equal(job.retryOf, failed.id);
        assert.equal(job.status, 'queued');
        assert.equal(job.type, 'report.export');
        assert.deepEqual(job.payload, { p: [1, 2] });
        assert.equal(job.priority, 'high');
        assert.equal(job.maxAttempts, 1);
        assert.equal(job.attempt, 0);
        assert.equal(hget(res, 'location'), `/v1/jobs/${job.id}`);
        assert.equal(hget(res, 'operation-location'), `${d.url}/v1/jobs/${job.id}/status`);
        assertRetryAfter(res);
        const old = await getJob(c, failed.id);
        assert.equal(old.status, 'failed', 'the original stays failed');
        assert.equal((await getJob(c, job.id)).retryOf, failed.id);
        assert.equal((await listAll(c)).length, 2);
    });

    it('a cancelled job: 202, a new queued job', async () => {
        const { c } = tenant(d);
        const cancelled = await runToCancelled(c, { type: 'image.resize', payload: { w: 10 } });
        const res = expectStatus(await c.post(`/v1/jobs/${cancelled.id}:retry`), 202);
        assert.equal(res.json.retryOf, cancelled.id);
        assert.equal(res.json.status, 'queued');
        assert.equal(res.json.type, 'image.resize');
        assert.deepEqual(res.json.payload, { w: 10 });
    });

    it('queued, running or succeeded -> 409 illegal-transition, no new job', async () => {
        const { c, w } = tenant(d);
        const queued = (await submit(c)).json.id;
        assertProblem(await c.post(`/v1/jobs/${queued}:retry`), 409, 'illegal-transition');
        const running = (await submitAndLease(c, w, { type: 'image.resize', payload: {} })).job.id;
        const p = assertProblem(await c.post(`/v1/jobs/${running}:retry`), 409, 'illegal-transition');
        assert.match(p.detail, /is running/, 'the detail says what state stands in the way');
        const succeeded = (await runToSuccess(c, w, { type: 'email.send', payload: {} })).id;
        assertProblem(await c.post(`/v1/jobs/${succeeded}:retry`), 409, 'illegal-transition');
        assert.equal((await listAll(c)).length, 3);
    });
});
