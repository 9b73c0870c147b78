// The job resource: GET /v1/jobs/{id}, conditional requests, completion styles and /result.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    HTTP_DATE, assertJobShape, assertProblem, assertRetryAfter, assertStrongEtag, complete, expectStatus, fail,
    getJob, heartbeat, hget, leaseOne, runToCancelled, runToFailure, runToSuccess, sleep, submit, submitAndLease,
} from './lib/jobs.mjs';

const DAY_MS = 86_400_000;

describe('job resource', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('HEAD answers like GET without a body', async () => {
        const { c } = tenant(d);
        const sent = await submit(c);
        const get = expectStatus(await c.get(`/v1/jobs/${sent.json.id}`), 200);
        const head = expectStatus(await c.req('HEAD', `/v1/jobs/${sent.json.id}`), 200);
        assert.equal(head.text, '');
        assert.equal(hget(head, 'etag'), hget(get, 'etag'));
        assert.equal(hget(head, 'content-type'), hget(get, 'content-type'));
    });

    it('GET answers every field with a strong ETag, no-cache and Retry-After while queued', async () => {
        const { c } = tenant(d);
        const sent = await submit(c, { type: 'report.export', payload: { month: '2025-02' }, priority: 'low' });
        const res = expectStatus(await c.get(`/v1/jobs/${sent.json.id}`), 200);
        assert.match(hget(res, 'content-type') ?? '', /^application\/json/);
        assertJobShape(res.json);
        assert.equal(res.json.id, sent.json.id);
        assert.equal(res.json.status, 'queued');
        assert.equal(res.json.priority, 'low');
        assert.deepEqual(res.json.payload, { month: '2025-02' });
        const etag = assertStrongEtag(res);
        assert.ok(!etag.startsWith('W/'), etag);
        assert.match(hget(res, 'cache-control') ?? '', /no-cache/);
        assertRetryAfter(res);
    });

    it('If-None-Match with the current tag -> 304, no body, same ETag; another tag -> 200', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const first = await c.get(`/v1/jobs/${id}`);
        const etag = assertStrongEtag(first);
        const nm = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag } });
        assert.equal(nm.status, 304, nm.text);
        assert.equal(nm.text, '');
        assert.equal(hget(nm, 'etag'), etag);
        const other = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': '"something-else"' } });
        assert.equal(other.status, 200);
        assert.equal(other.json.id, id);
    });

    it('If-None-Match follows RFC 9110: a list of tags, and weak comparison', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const etag = assertStrongEtag(await c.get(`/v1/jobs/${id}`));
        const list = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': `"nope", ${etag}` } });
        assert.equal(list.status, 304, 'a list containing the current tag must match');
        const weak = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': `W/${etag}` } });
        assert.equal(weak.status, 304, 'If-None-Match uses weak comparison');
        // The list split over two fields is the same list (RFC 9110 §5.3): fetch joins them, so send raw bytes.
        const split = await rawRequest(
            d,
            `GET /v1/jobs/${id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${c.key}\r\n` +
                `If-None-Match: "nope"\r\nIf-None-Match: ${etag}\r\nConnection: close\r\n\r\n`,
        );
        assert.equal(split.status, 304, `the current tag in a second If-None-Match field must match\n${split.raw}`);
    });

    it('the ETag changes with progress, and with a bare heartbeat (lastUpdatedAt moves)', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const id = l.job.id;
        const r0 = expectStatus(await c.get(`/v1/jobs/${id}`), 200);
        const e0 = assertStrongEtag(r0);
        assert.equal(r0.json.status, 'running');
        assertRetryAfter(r0);

        await sleep(20);
        expectStatus(await heartbeat(w, id, l.leaseId, { progress: 10 }), 200);
        const r1 = expectStatus(await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': e0 } }), 200);
        const e1 = assertStrongEtag(r1);
        assert.notEqual(e1, e0);
        assert.equal(r1.json.progress, 10);

        await sleep(20);
        expectStatus(await heartbeat(w, id, l.leaseId), 200);
        const r2 = expectStatus(await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': e1 } }), 200);
        assert.notEqual(assertStrongEtag(r2), e1);
        assert.ok(Date.parse(r2.json.lastUpdatedAt) > Date.parse(r1.json.lastUpdatedAt), `${r2.json.lastUpdatedAt} vs ${r1.json.lastUpdatedAt}`);
        assert.equal(r2.json.progress, 10);
    });

    it('a succeeded job has its result inline, Expires = expiresAt = finishedAt + retention', async () => {
        const { c, w } = tenant(d);
        const result = { url: 's3://bucket/out.csv', rows: 1234, parts: [{ n: 1 }, { n: 2 }] };
        const done = await runToSuccess(c, w, { type: 'report.export', payload: {} }, { result });
        const res = expectStatus(await c.get(`/v1/jobs/${done.id}`), 200);
        const job = res.json;
        assertJobShape(job);
        assert.equal(job.status, 'succeeded');
        assert.deepEqual(job.result, result);
        assert.equal(job.attempt, 1);
        assert.ok(Date.parse(job.startedAt) <= Date.parse(job.finishedAt));
        assert.equal(Date.parse(job.expiresAt) - Date.parse(job.finishedAt), 30 * DAY_MS);
        const expires = hget(res, 'expires');
        assert.match(expires ?? '', HTTP_DATE);
        assert.ok(Math.abs(Date.parse(expires) - Date.parse(job.expiresAt)) < 1000, `Expires ${expires} vs expiresAt ${job.expiresAt}`);
        assertStrongEtag(res);
    });

    it('a finally failed job has its error inline and no result', async () => {
        const { c, w } = tenant(d);
        const error = { type: 'https://example.com/probs/bad-input', title: 'Bad input', status: 422, detail: 'codec unknown', code: 'bad-input' };
        const failed = await runToFailure(c, w, { type: 'report.export', payload: {} }, error);
        const res = expectStatus(await c.get(`/v1/jobs/${failed.id}`), 200);
        assertJobShape(res.json);
        assert.equal(res.json.status, 'failed');
        assert.equal(res.json.error.code, 'bad-input');
        assert.equal(res.json.error.title, 'Bad input');
        assert.equal(res.json.error.status, 422);
        assert.equal(res.json.error.detail, 'codec unknown');
        assert.ok(!('result' in res.json));
        assert.match(hget(res, 'expires') ?? '', HTTP_DATE);
    });

    it('?onComplete=redirect: 303 to /result once finished, 200 before and when cancelled', async () => {
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w);
        const id = l.job.id;
        const running = expectStatus(await c.get(`/v1/jobs/${id}?onComplete=redirect`), 200);
        assert.equal(running.json.status, 'running');
        await complete(w, id, l.leaseId, { result: { done: 1 } });
        const res = await c.get(`/v1/jobs/${id}?onComplete=redirect`);
        assert.equal(res.status, 303, res.text);
        assert.equal(hget(res, 'location'), `/v1/jobs/${id}/result`);
        const doc = expectStatus(await c.get(hget(res, 'location')), 200);
        assert.deepEqual(doc.json, { done: 1 });

        const failed = await runToFailure(c, w);
        const rf = await c.get(`/v1/jobs/${failed.id}?onComplete=redirect`);
        assert.equal(rf.status, 303, rf.text);
        assert.equal(hget(rf, 'location'), `/v1/jobs/${failed.id}/result`);

        const cancelled = await runToCancelled(c);
        const rc = expectStatus(await c.get(`/v1/jobs/${cancelled.id}?onComplete=redirect`), 200);
        assert.equal(rc.json.status, 'cancelled');
    });

    it("a route's onComplete: redirect is the default; ?onComplete=inline overrides it", async () => {
        const { c, w } = tenant(d);
        const sent = await submit(c, { sourceUrl: 'https://example.com/c.mp4' }, { path: '/v1/videos' });
        const id = sent.json.id;
        const queued = expectStatus(await c.get(`/v1/jobs/${id}`), 200);
        assert.equal(queued.json.status, 'queued');
        const l = await leaseOne(w, 'video.transcode', { expectId: id });
        await complete(w, id, l.leaseId, { result: { video: '/v1/videos/x', duration: 12.5 } });
        const res = await c.get(`/v1/jobs/${id}`);
        assert.equal(res.status, 303, res.text);
        assert.equal(hget(res, 'location'), `/v1/jobs/${id}/result`);
        const inline = expectStatus(await c.get(`/v1/jobs/${id}?onComplete=inline`), 200);
        assert.deepEqual(inline.json.result, { video: '/v1/videos/x', duration: 12.5 });
    });

    it('/result answers the stored result document', async () => {
        const { c, w } = tenant(d);
        const result = { rows: [[1, 'a'], [2, 'b']], total: 2 };
        const job = await runToSuccess(c, w, { type: 'report.export', payload: {} }, { result });
        const res = expectStatus(await c.get(`/v1/jobs/${job.id}/result`), 200);
        assert.match(hget(res, 'content-type') ?? '', /json/);
        assert.deepEqual(res.json, result);
    });

    it('/result of a failed job is the stored problem with its own status (default 500)', async () => {
        const { c, w } = tenant(d);
        const err = { title: 'Source not found', status: 422, detail: 'no such object', code: 'source-missing', type: 'https://example.com/probs/source-missing' };
        const failed = await runToFailure(c, w, undefined, err);
        const res = await c.get(`/v1/jobs/${failed.id}/result`);
        assert.equal(res.status, 422, res.text);
        assert.match(hget(res, 'content-type') ?? '', /^application\/problem\+json/);
        assert.equal(res.json.code, 'source-missing');
        assert.equal(res.json.title, 'Source not found');
        assert.equal(res.json.status, 422);

        const l = await submitAndLease(c, w, { type: 'report.export', payload: {}, maxAttempts: 1 });
        await fail(w, l.job.id, l.leaseId, { error: { title: 'Crashed', code: 'crashed' }, retryable: false });
        const r500 = await c.get(`/v1/jobs/${l.job.id}/result`);
        assert.equal(r500.status, 500, r500.text);
        assert.match(hget(r500, 'content-type') ?? '', /^application\/problem\+json/);
        assert.equal(r500.json.code, 'crashed');
        assert.equal(r500.json.status, 500);
    });

    it('/result while queued or running -> 404 result-not-ready with Retry-After', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const q = await c.get(`/v1/jobs/${id}/result`);
        assertProblem(q, 404, 'result-not-ready');
        assertRetryAfter(q);
        await leaseOne(w, 'report.export', { expectId: id });
        const r = await c.get(`/v1/jobs/${id}/result`);
        assertProblem(r, 404, 'result-not-ready');
        assertRetryAfter(r);
    });

    it('/result of a cancelled job -> 409 job-cancelled', async () => {
        const { c } = tenant(d);
        const job = await runToCancelled(c);
        assertProblem(await c.get(`/v1/jobs/${job.id}/result`), 409, 'job-cancelled');
    });

    it('a resultLocation makes /result a 303 to it', async () => {
        const { c, w } = tenant(d);
        const where = 'https://cdn.example.com/out/clip-1.mp4';
        const job = await runToSuccess(c, w, { type: 'report.export', payload: {} }, { resultLocation: where });
        const got = await getJob(c, job.id);
        assert.equal(got.status, 'succeeded');
        assert.equal(got.resultLocation, where);
        const res = await c.get(`/v1/jobs/${job.id}/result`);
        assert.equal(res.status, 303, res.text);
        assert.equal(hget(res, 'location'), where);
    });

    it('completion with partialSuccess keeps the result', async () => {
        const { c, w } = tenant(d);
        const job = await runToSuccess(c, w, { type: 'report.export', payload: {} }, { status: 'partialSuccess', result: { done: 3, skipped: 1 } });
        assert.equal(job.status, 'partialSuccess');
        const res = expectStatus(await c.get(`/v1/jobs/${job.id}/result`), 200);
        assert.deepEqual(res.json, { done: 3, skipped: 1 });
    });

    it('an unknown id -> 404 not-found problem (job, /result, malformed id)', async () => {
        const { c } = tenant(d);
        assertProblem(await c.get('/v1/jobs/job_AAAAAAAAAAAAAAAAAAAAAA'), 404, 'not-found');
        assertProblem(await c.get('/v1/jobs/job_AAAAAAAAAAAAAAAAAAAAAA/result'), 404, 'not-found');
        assertProblem(await c.get('/v1/jobs/not-an-id'), 404, 'not-found');
    });
});
