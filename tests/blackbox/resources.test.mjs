// Business resources: GET on a configured route's `resource` (/v1/videos/{id}, {id} the job id) serves a
// placeholder pointing at the job while it is pending, then the job's outcome as the resource itself: its
// result (or a 303 to resultLocation), or its stored problem. Another tenant, or a job of another route, is 404.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, hget, show } from './lib/jobs.mjs';

const VIDEO = { sourceUrl: 'https://example.com/a.mp4' };

describe('business resources', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    async function submitVideo(c) {
        const res = expectStatus(await c.post('/v1/videos', VIDEO), 202);
        assert.equal(hget(res, 'content-location'), `/v1/videos/${res.json.id}`);
        return res.json.id;
    }

    async function leaseVideo(w, id) {
        const res = expectStatus(await w.post('/v1/leases', { types: ['video.transcode'], wait: 2 }), 200);
        assert.equal(res.json.leases[0].job.id, id, show(res));
        return res.json.leases[0].leaseId;
    }

    it('pending: a placeholder {id, status, job} with Link rel=monitor and the job ETag', async () => {
        const { c, w } = tenant(d);
        const id = await submitVideo(c);
        const res = expectStatus(await c.get(`/v1/videos/${id}`), 200);
        assert.deepEqual(res.json, { id, status: 'queued', job: `/v1/jobs/${id}` }, show(res));
        const links = hget(res, 'link') ?? '';
        assert.match(links, new RegExp(`</v1/jobs/${id}>; rel="monitor"`), show(res));
        const job = expectStatus(await c.get(`/v1/jobs/${id}`), 200);
        assert.equal(hget(res, 'etag'), hget(job, 'etag'), 'the resource carries its job ETag');
        assert.equal((await c.get(`/v1/videos/${id}`, { headers: { 'if-none-match': hget(res, 'etag') } })).status, 304);
        await leaseVideo(w, id);
        const running = expectStatus(await c.get(`/v1/videos/${id}`), 200);
        assert.equal(running.json.status, 'running', show(running));
        assert.notEqual(hget(running, 'etag'), hget(res, 'etag'));
    });

    it('succeeded: the result is the representation; resultLocation gives a 303', async () => {
        const { c, w } = tenant(d);
        const id = await submitVideo(c);
        const leaseId = await leaseVideo(w, id);
        expectStatus(await w.post(`/v1/jobs/${id}:complete`, { leaseId, result: { width: 1920, url: 'x' } }), 200);
        const res = expectStatus(await c.get(`/v1/videos/${id}`), 200);
        assert.deepEqual(res.json, { width: 1920, url: 'x' }, show(res));
        assert.ok(hget(res, 'etag'), show(res));
        const id2 = await submitVideo(c);
        const lease2 = await leaseVideo(w, id2);
        expectStatus(await w.post(`/v1/jobs/${id2}:complete`, { leaseId: lease2, resultLocation: 'https://cdn.example.com/v.mp4' }), 200);
        const moved = await c.get(`/v1/videos/${id2}`);
        assert.equal(moved.status, 303, show(moved));
        assert.equal(hget(moved, 'location'), 'https://cdn.example.com/v.mp4');
    });

    it('failed: the stored problem with its own status', async () => {
        const { c, w } = tenant(d);
        const id = await submitVideo(c);
        const leaseId = await leaseVideo(w, id);
        const error = { title: 'Bad input', status: 422, detail: 'not a video', code: 'bad-video' };
        expectStatus(await w.post(`/v1/jobs/${id}:fail`, { leaseId, error, retryable: false }), 200);
        const res = await c.get(`/v1/videos/${id}`);
        assert.equal(res.status, 422, show(res));
        assert.match(hget(res, 'content-type'), /^application\/problem\+json/);
        assert.equal(JSON.parse(res.text).code, 'bad-video');
    });

    it('another tenant, an unknown id, or a job of another route: 404', async () => {
        const { c } = tenant(d);
        const other = tenant(d);
        const id = await submitVideo(c);
        assertProblem(await other.c.get(`/v1/videos/${id}`), 404, 'not-found');
        assertProblem(await c.get('/v1/videos/job_AAAAAAAAAAAAAAAAAAAAAAAAAAAA'), 404, 'not-found');
        const plain = expectStatus(await c.post('/v1/jobs', { type: 'video.transcode', payload: VIDEO }), 202).json.id;
        assertProblem(await c.get(`/v1/videos/${plain}`), 404, 'not-found');
        assert.equal((await c.get(`/v1/videos/${id}/x`)).status, 404);
    });
});
