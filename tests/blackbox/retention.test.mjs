// Retention: expiresAt per terminal state and type, 410 Gone during the tombstone, then 404.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    assertProblem, expectStatus, getJob, listAll, runToCancelled, runToFailure, runToSuccess, sleep, submit, waitUntil,
} from './lib/jobs.mjs';

const S = 1000;
const DAY = 86_400_000;

const config = standardConfig({
    types: `
  video.transcode: { required: [sourceUrl], maxAttempts: 3, retention: { succeeded: 2s, failed: 2s, cancelled: 2s, partialSuccess: 2s } }
  mixed.retention: { retention: { succeeded: 3s, failed: 4s, cancelled: 1d, partialSuccess: 5s } }
  report.export: {}`,
    retention: '{ succeeded: 30d, failed: 20d, cancelled: 10d, partialSuccess: 5d }',
    tombstone: '2s',
    sweepInterval: '200ms',
});

function lifetime(job) {
    return Date.parse(job.expiresAt) - Date.parse(job.finishedAt);
}

function assertLifetime(job, ms) {
    assert.ok(Math.abs(lifetime(job) - ms) <= 1, `${job.status}: expiresAt ${job.expiresAt} - finishedAt ${job.finishedAt} = ${lifetime(job)} ms, want ${ms}`);
}

async function sleepUntil(t) {
    const ms = t - Date.now();
    if (ms > 0) await sleep(ms);
}

describe('retention', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config });
    });
    after(() => d?.stop());

    it('expiresAt = finishedAt + retention of the terminal state, per type, else the global default', async () => {
        const { c, w } = tenant(d);
        const v = { type: 'video.transcode', payload: { sourceUrl: 'https://example.com/v.mp4' } };
        assertLifetime(await runToSuccess(c, w, v), 2 * S);

        const m = { type: 'mixed.retention', payload: {} };
        assertLifetime(await runToSuccess(c, w, m), 3 * S);
        assertLifetime(await runToFailure(c, w, m), 4 * S);
        assertLifetime(await runToCancelled(c, m), DAY);
        assertLifetime(await runToSuccess(c, w, m, { status: 'partialSuccess', result: {} }), 5 * S);

        const g = { type: 'report.export', payload: {} };
        assertLifetime(await runToSuccess(c, w, g), 30 * DAY);
        assertLifetime(await runToFailure(c, w, g), 20 * DAY);
        assertLifetime(await runToCancelled(c, g), 10 * DAY);
        assertLifetime(await runToSuccess(c, w, g, { status: 'partialSuccess', result: {} }), 5 * DAY);
    });

    it('after expiresAt: 410 gone for the tombstone period, then 404; unfinished jobs stay', async () => {
        const { c, w } = tenant(d);
        const v = { type: 'video.transcode', payload: { sourceUrl: 'https://example.com/w.mp4' } };
        const waiting = (await submit(c, { ...v, runAt: '2099-01-01T00:00:00Z' })).json.id; // never leased here
        const done = await runToSuccess(c, w, v);
        const expires = Date.parse(done.expiresAt);
        assert.equal((await getJob(c, done.id)).status, 'succeeded', 'readable before expiresAt');

        await sleepUntil(expires + 300);
        assertProblem(await c.get(`/v1/jobs/${done.id}`), 410, 'gone');
        await sleepUntil(expires + 1500);
        assertProblem(await c.get(`/v1/jobs/${done.id}`), 410, 'gone'); // still inside the 2 s tombstone

        const res = await waitUntil(() => c.get(`/v1/jobs/${done.id}`), (r) => r.status !== 410, {
            timeoutMs: expires + 10_000 - Date.now(), intervalMs: 200, what: 'the tombstone to end',
        });
        assertProblem(res, 404, 'not-found');
        assert.ok(!(await listAll(c)).some((j) => j.id === done.id), 'a deleted job is still listed');

        const still = expectStatus(await c.get(`/v1/jobs/${waiting}`), 200);
        assert.equal(still.json.status, 'queued');
        assert.equal(still.json.expiresAt, null);
    });
});
