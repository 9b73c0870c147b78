// Long polling on GET /v1/jobs/{id} (?wait=N, Prefer: wait=N) and Prefer on submit
// (respond-async, wait=N answering the outcome directly). limits.maxWaitSeconds is 5 here.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    assertProblem, assertRetryAfter, assertStrongEtag, complete, expectStatus, fail, hget, leaseOne, sleep, submit,
} from './lib/jobs.mjs';

/** Tokens of a Preference-Applied header, e.g. ["wait=5"]. */
function applied(res) {
    return (hget(res, 'preference-applied') ?? '').split(',').map((s) => s.trim().replace(/\s*=\s*/, '=')).filter(Boolean);
}

describe('long polling', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('?wait=2 with the current ETag is held, then 304', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        const res = await c.get(`/v1/jobs/${id}?wait=2`, { headers: { 'if-none-match': etag } });
        assert.equal(res.status, 304, res.text);
        assert.equal(hget(res, 'etag'), etag);
        assert.ok(res.ms >= 1500, `answered after ${res.ms.toFixed(0)} ms, not held ~2 s`);
        assert.ok(res.ms < 4000, `answered after ${res.ms.toFixed(0)} ms, held well past wait=2`);
    });

    it('a change during ?wait=5 answers 200 at once with the new state and ETag', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        const pending = c.get(`/v1/jobs/${id}?wait=5`, { headers: { 'if-none-match': etag } });
        await sleep(300);
        await leaseOne(w, 'report.export', { expectId: id });
        const res = await pending;
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.status, 'running');
        assert.notEqual(assertStrongEtag(res), etag);
        assert.ok(res.ms < 4000, `the change did not end the wait: ${res.ms.toFixed(0)} ms`);
    });

    it('a heartbeat (new ETag, same status) ends a wait that carries If-None-Match', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const l = await leaseOne(w, 'report.export', { expectId: id });
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        const pending = c.get(`/v1/jobs/${id}?wait=5`, { headers: { 'if-none-match': etag } });
        await sleep(300);
        expectStatus(await w.post(`/v1/jobs/${id}:heartbeat`, { leaseId: l.leaseId, progress: 55 }), 200);
        const res = await pending;
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.progress, 55);
        assert.ok(res.ms < 4000, `${res.ms.toFixed(0)} ms`);
    });

    it('without If-None-Match, ?wait is held until the status changes', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const idle = await c.get(`/v1/jobs/${id}?wait=1`);
        assert.equal(idle.status, 200, idle.text);
        assert.equal(idle.json.status, 'queued');
        assert.ok(idle.ms >= 800, `not held: ${idle.ms.toFixed(0)} ms`);

        const pending = c.get(`/v1/jobs/${id}?wait=5`);
        await sleep(300);
        await leaseOne(w, 'report.export', { expectId: id });
        const res = await pending;
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.status, 'running');
        assert.ok(res.ms < 4000, `${res.ms.toFixed(0)} ms`);
    });

    it('Prefer: wait=2 is a long poll too, and says Preference-Applied', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        const res = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag, prefer: 'wait=2' } });
        assert.equal(res.status, 304, res.text);
        assert.ok(res.ms >= 1500, `${res.ms.toFixed(0)} ms`);
        assert.ok(applied(res).includes('wait=2'), `Preference-Applied: ${hget(res, 'preference-applied')}`);
    });

    it('a wait that is not an integer 0-86400: 400 in the query, ignored in Prefer (RFC 7240)', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        for (const n of ['abc', '-1', '86401', '99999999999999999999']) {
            assertProblem(await c.get(`/v1/jobs/${id}?wait=${n}`), 400, 'invalid-request');
            const res = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag, prefer: `wait=${n}` } });
            assert.equal(res.status, 304, `Prefer: wait=${n} -> ${res.status} ${res.text}`);
            assert.deepEqual(applied(res), [], `Prefer: wait=${n}: Preference-Applied ${hget(res, 'preference-applied')}`);
        }
    });

    it('?wait is capped by limits.maxWaitSeconds (5)', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        const res = await c.get(`/v1/jobs/${id}?wait=60`, { headers: { 'if-none-match': etag } });
        assert.equal(res.status, 304, res.text);
        assert.ok(res.ms >= 4000 && res.ms < 9000, `held ${res.ms.toFixed(0)} ms, want ~5000`);
    });
});

describe('Prefer on submit', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('wait=5 and the job succeeds in time: 200 with the result document', async () => {
        const { c, w } = tenant(d);
        const pending = c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: { x: 1 } }, headers: { prefer: 'wait=5' } });
        const l = await leaseOne(w, 'report.export', { wait: 5 });
        await complete(w, l.job.id, l.leaseId, { result: { answer: 42, rows: ['a'] } });
        const res = await pending;
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.json, { answer: 42, rows: ['a'] });
        assert.ok(applied(res).includes('wait=5'), `Preference-Applied: ${hget(res, 'preference-applied')}`);
        assert.equal(hget(res, 'content-location'), `/v1/jobs/${l.job.id}`);
        assert.ok(res.ms < 4500, `${res.ms.toFixed(0)} ms`);
    });

    it('wait=5 on a route with a resource: 201 Created, Location = the resource', async () => {
        const { c, w } = tenant(d);
        const pending = c.req('POST', '/v1/videos', { body: { sourceUrl: 'https://example.com/d.mp4' }, headers: { prefer: 'wait=5' } });
        const l = await leaseOne(w, 'video.transcode', { wait: 5 });
        await complete(w, l.job.id, l.leaseId, { result: { id: 'vid-1', state: 'ready' } });
        const res = await pending;
        assert.equal(res.status, 201, res.text);
        assert.equal(hget(res, 'location'), `/v1/videos/${l.job.id}`);
        assert.deepEqual(res.json, { id: 'vid-1', state: 'ready' });
        assert.ok(applied(res).includes('wait=5'), `Preference-Applied: ${hget(res, 'preference-applied')}`);
    });

    it('wait=5 and the job fails in time: the stored problem with its status', async () => {
        const { c, w } = tenant(d);
        const pending = c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: {}, maxAttempts: 1 }, headers: { prefer: 'wait=5' } });
        const l = await leaseOne(w, 'report.export', { wait: 5 });
        await fail(w, l.job.id, l.leaseId, { error: { title: 'Quota exceeded', status: 429, code: 'quota', detail: 'try later' }, retryable: false });
        const res = await pending;
        assert.equal(res.status, 429, res.text);
        assert.match(hget(res, 'content-type') ?? '', /^application\/problem\+json/);
        assert.equal(res.json.code, 'quota');
    });

    it('wait=5 and the job is cancelled in time: 409 job-cancelled', async () => {
        const { c, w } = tenant(d);
        const pending = c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: {} }, headers: { prefer: 'wait=5' } });
        const l = await leaseOne(w, 'report.export', { wait: 5 });
        expectStatus(await c.del(`/v1/jobs/${l.job.id}`), 202);
        expectStatus(await w.post(`/v1/jobs/${l.job.id}:cancel`, { leaseId: l.leaseId }), 200);
        assertProblem(await pending, 409, 'job-cancelled', { instance: '/v1/jobs' });
    });

    it('respond-async: 202 at once with Preference-Applied, even with a wait', async () => {
        const { c } = tenant(d);
        const res = await c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: {} }, headers: { prefer: 'respond-async' } });
        assert.equal(res.status, 202, res.text);
        assert.ok(applied(res).includes('respond-async'), `Preference-Applied: ${hget(res, 'preference-applied')}`);
        assert.equal(hget(res, 'location'), `/v1/jobs/${res.json.id}`);

        const both = await c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: {} }, headers: { prefer: 'respond-async, wait=5' } });
        assert.equal(both.status, 202, both.text);
        assert.ok(applied(both).includes('respond-async'), `Preference-Applied: ${hget(both, 'preference-applied')}`);
        assert.ok(both.ms < 2000, `respond-async was held ${both.ms.toFixed(0)} ms`);
    });

    it('a wait that runs out answers the usual 202', async () => {
        const { c } = tenant(d);
        const res = await c.req('POST', '/v1/jobs', { body: { type: 'report.export', payload: {} }, headers: { prefer: 'wait=1' } });
        assert.equal(res.status, 202, res.text);
        assert.ok(res.ms >= 800, `not held: ${res.ms.toFixed(0)} ms`);
        assert.equal(res.json.status, 'queued');
        assert.equal(hget(res, 'location'), `/v1/jobs/${res.json.id}`);
        assert.equal(hget(res, 'operation-location'), `${d.url}/v1/jobs/${res.json.id}/status`);
        assertRetryAfter(res);
    });
});
