// Submitting work: POST /v1/jobs and configured routes, the 202 and its headers, validation before
// anything is stored.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    JOB_ID, TIMESTAMP, assertJobShape, assertProblem, assertRetryAfter, assertStrongEtag, expectStatus, hget,
    listAll, parseLinks, submit,
} from './lib/jobs.mjs';

describe('submit', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('answers 202 with Location, Operation-Location, Link, Retry-After, ETag and the job', async () => {
        const { c } = tenant(d);
        const payload = { sourceUrl: 'https://example.com/a.mp4', nested: { list: [1, 'two', null], flag: true } };
        const before = Date.now();
        const res = await submit(c, { type: 'video.transcode', payload });
        const job = res.json;

        assert.match(hget(res, 'content-type') ?? '', /^application\/json/);
        assertJobShape(job);
        assert.match(job.id, JOB_ID);
        const self = `/v1/jobs/${job.id}`;
        assert.equal(hget(res, 'location'), self);
        assert.equal(hget(res, 'operation-location'), `${d.url}${self}/status`, 'Operation-Location: the status monitor');
        const monitor = parseLinks(hget(res, 'link')).filter((l) => l.rel === 'monitor');
        assert.deepEqual(monitor.map((l) => l.target), [self], `Link: ${hget(res, 'link')}`);
        assertRetryAfter(res);
        assertStrongEtag(res);
        assert.equal(hget(res, 'content-location'), null, 'Content-Location without a route resource');

        assert.equal(job.type, 'video.transcode');
        assert.equal(job.status, 'queued');
        assert.deepEqual(job.payload, payload);
        assert.equal(job.priority, 'normal');
        assert.ok(job.progress === null || job.progress === 0, `progress ${job.progress}`);
        assert.equal(job.attempt, 0);
        assert.equal(job.maxAttempts, 3);
        assert.equal(job.cancelRequested, false);
        for (const f of ['startedAt', 'finishedAt', 'expiresAt', 'runAt', 'retryOf', 'message']) assert.equal(job[f], null, f);
        const created = Date.parse(job.createdAt);
        assert.ok(created >= before - 2000 && created <= Date.now() + 2000, `createdAt ${job.createdAt} is not now`);
        assert.ok(Date.parse(job.lastUpdatedAt) >= created, 'lastUpdatedAt before createdAt');
    });

    it('answers a GET right after the 202 with the same representation and ETag', async () => {
        const { c } = tenant(d);
        const res = await submit(c, { type: 'report.export', payload: { q: 1 } });
        const got = expectStatus(await c.get(res.headers.get('location')), 200);
        assert.equal(got.headers.get('etag'), res.headers.get('etag'));
        assert.deepEqual(got.json, res.json);
    });

    it('takes priority, maxAttempts, runAt, timeoutSeconds and callbackUrl from the request', async () => {
        const { c } = tenant(d);
        expectStatus(await c.post('/v1/webhooks/callback:rotate', {}), 200); // a callbackUrl needs a callback secret
        const runAt = '2031-05-06T07:08:09Z';
        const job = (await submit(c, {
            type: 'report.export', payload: {}, priority: 'high', maxAttempts: 5, runAt, timeoutSeconds: 600,
            callbackUrl: 'https://hooks.example.com/done', someUnknownField: 'ignored',
        })).json;
        assert.equal(job.priority, 'high');
        assert.equal(job.maxAttempts, 5);
        assert.match(job.runAt, TIMESTAMP);
        assert.equal(Date.parse(job.runAt), Date.parse(runAt));
        const low = (await submit(c, { type: 'report.export', priority: 'low' })).json;
        assert.equal(low.priority, 'low');
        assert.deepEqual(low.payload, {}, 'payload defaults to {}');
    });

    it("defaults maxAttempts from the job's type", async () => {
        const { c } = tenant(d);
        const job = (await submit(c, { type: 'image.resize', payload: {} })).json;
        assert.equal(job.maxAttempts, 7);
    });

    it('accepts application/json with parameters and +json media types', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: {} });
        for (const ct of ['application/json; charset=utf-8', 'application/vnd.example+json', 'Application/JSON']) {
            const res = await c.req('POST', '/v1/jobs', { raw, headers: { 'content-type': ct } });
            assert.equal(res.status, 202, `${ct}: ${res.text}`);
        }
        assert.equal((await listAll(c)).length, 3);
    });

    it('a route takes the whole body as payload and sends Content-Location', async () => {
        const { c } = tenant(d);
        const body = { sourceUrl: 'https://example.com/b.mp4', preset: '720p', type: 'not-the-job-type' };
        const res = await submit(c, body, { path: '/v1/videos' });
        const job = res.json;
        assertJobShape(job);
        assert.equal(job.type, 'video.transcode');
        assert.deepEqual(job.payload, body);
        assert.equal(hget(res, 'content-location'), `/v1/videos/${job.id}`);
        assert.equal(hget(res, 'location'), `/v1/jobs/${job.id}`);
        assert.equal(hget(res, 'operation-location'), `${d.url}/v1/jobs/${job.id}/status`);
    });

    it('a route without a resource sends no Content-Location', async () => {
        const { c } = tenant(d);
        const res = await submit(c, { month: '2025-01' }, { path: '/v1/reports', headers: { 'idempotency-key': 'r1' } });
        assert.equal(res.json.type, 'report.export');
        assert.deepEqual(res.json.payload, { month: '2025-01' });
        assert.equal(hget(res, 'content-location'), null);
    });

    it('accepts a body of exactly maxBodyBytes', async () => {
        const { c } = tenant(d);
        const skeleton = JSON.stringify({ type: 'report.export', payload: { pad: '' } });
        const raw = JSON.stringify({ type: 'report.export', payload: { pad: 'x'.repeat(4096 - skeleton.length) } });
        assert.equal(Buffer.byteLength(raw), 4096);
        expectStatus(await c.req('POST', '/v1/jobs', { raw }), 202);
    });

    it('two Content-Type fields -> 415, whichever comes first, and nothing stored', async () => {
        const { c } = tenant(d);
        const raw = JSON.stringify({ type: 'report.export', payload: {} });
        for (const [first, second] of [['application/json', 'text/plain'], ['text/plain', 'application/json']]) {
            const res = await rawRequest(
                d,
                `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${c.key}\r\nContent-Type: ${first}\r\n` +
                    `Content-Type: ${second}\r\nContent-Length: ${raw.length}\r\nConnection: close\r\n\r\n${raw}`,
            );
            assert.equal(res.status, 415, res.raw);
            assert.equal(res.json?.code, 'unsupported-media-type', res.raw);
        }
        assert.deepEqual(await listAll(c), []);
    });

    describe('rejects before storing anything', () => {
        const json = (v) => JSON.stringify(v);
        const tooBig = json({ type: 'report.export', payload: { pad: 'x'.repeat(4097 - json({ type: 'report.export', payload: { pad: '' } }).length) } });
        // [name, path, raw body, headers, status, code, pointer (422 validation-failed only)]
        const cases = [
            ['truncated JSON', '/v1/jobs', '{"type": "report.export",', {}, 400, 'malformed-json'],
            ['trailing garbage after JSON', '/v1/jobs', '{"type":"report.export"} x', {}, 400, 'malformed-json'],
            ['empty body', '/v1/jobs', '', {}, 400, 'malformed-json'],
            ['text/plain', '/v1/jobs', json({ type: 'report.export' }), { 'content-type': 'text/plain' }, 415, 'unsupported-media-type'],
            ['form encoding', '/v1/jobs', 'type=report.export', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'unsupported-media-type'],
            ['body of maxBodyBytes + 1', '/v1/jobs', tooBig, {}, 413, 'payload-too-large'],
            ['body far over the limit', '/v1/jobs', json({ type: 'report.export', payload: { pad: 'y'.repeat(100_000) } }), {}, 413, 'payload-too-large'],
            ['body is an array', '/v1/jobs', '[]', {}, 422, 'validation-failed'],
            ['body is a string', '/v1/jobs', '"report.export"', {}, 422, 'validation-failed'],
            ['missing type', '/v1/jobs', json({ payload: {} }), {}, 422, 'validation-failed', '/type'],
            ['type not a string', '/v1/jobs', json({ type: 5 }), {}, 422, 'validation-failed', '/type'],
            ['empty type', '/v1/jobs', json({ type: '' }), {}, 422, 'validation-failed', '/type'],
            ['payload not an object', '/v1/jobs', json({ type: 'report.export', payload: 'x' }), {}, 422, 'validation-failed', '/payload'],
            ['bad priority', '/v1/jobs', json({ type: 'report.export', priority: 'urgent' }), {}, 422, 'validation-failed', '/priority'],
            ['maxAttempts 0', '/v1/jobs', json({ type: 'report.export', maxAttempts: 0 }), {}, 422, 'validation-failed', '/maxAttempts'],
            ['maxAttempts 101', '/v1/jobs', json({ type: 'report.export', maxAttempts: 101 }), {}, 422, 'validation-failed', '/maxAttempts'],
            ['maxAttempts 2.5', '/v1/jobs', json({ type: 'report.export', maxAttempts: 2.5 }), {}, 422, 'validation-failed', '/maxAttempts'],
            ['maxAttempts as a string', '/v1/jobs', json({ type: 'report.export', maxAttempts: '3' }), {}, 422, 'validation-failed', '/maxAttempts'],
            ['timeoutSeconds 0', '/v1/jobs', json({ type: 'report.export', timeoutSeconds: 0 }), {}, 422, 'validation-failed', '/timeoutSeconds'],
            ['timeoutSeconds 604801', '/v1/jobs', json({ type: 'report.export', timeoutSeconds: 604801 }), {}, 422, 'validation-failed', '/timeoutSeconds'],
            ['callbackUrl not http(s)', '/v1/jobs', json({ type: 'report.export', callbackUrl: 'ftp://example.com/x' }), {}, 422, 'validation-failed', '/callbackUrl'],
            ['runAt not RFC 3339', '/v1/jobs', json({ type: 'report.export', runAt: 'tomorrow' }), {}, 422, 'validation-failed', '/runAt'],
            ['required payload field missing', '/v1/jobs', json({ type: 'video.transcode', payload: { other: 1 } }), {}, 422, 'validation-failed', '/payload/sourceUrl'],
            ['required payload field missing, no payload', '/v1/jobs', json({ type: 'video.transcode' }), {}, 422, 'validation-failed', '/payload/sourceUrl'],
            ['unknown type', '/v1/jobs', json({ type: 'no.such.type' }), {}, 422, 'unknown-type'],
            ['unknown route', '/v1/nothing-here', json({ type: 'report.export' }), {}, 404, 'not-found'],
            ['route: body not an object', '/v1/videos', '[1,2]', {}, 422, 'validation-failed'],
            // On a route the body is the payload, so the pointer into the request body has no /payload.
            ['route: required field missing', '/v1/videos', json({ preset: '720p' }), {}, 422, 'validation-failed', '/sourceUrl'],
            ['route: malformed JSON', '/v1/videos', '{"sourceUrl":', {}, 400, 'malformed-json'],
        ];
        for (const [name, path, raw, headers, status, code, pointer] of cases) {
            it(`${name} -> ${status} ${code}`, async () => {
                const { c } = tenant(d);
                const res = await c.req('POST', path, { raw, headers });
                const p = assertProblem(res, status, code);
                if (pointer !== undefined) {
                    assert.ok(Array.isArray(p.errors) && p.errors.length > 0, `no errors[]: ${res.text}`);
                    for (const e of p.errors) {
                        assert.equal(typeof e.pointer, 'string', res.text);
                        assert.equal(typeof e.detail, 'string', res.text);
                    }
                    assert.ok(p.errors.some((e) => e.pointer === pointer), `no error with pointer ${pointer}: ${res.text}`);
                }
                assert.deepEqual(await listAll(c), [], 'a rejected request stored a job');
            });
        }
    });

    it('gives 50 jobs 50 distinct ids: creation time first, then random bits', async () => {
        const { c } = tenant(d);
        const res = await Promise.all(Array.from({ length: 50 }, (_, i) => submit(c, { type: 'report.export', payload: { i } })));
        const ids = res.map((r) => r.json.id);
        for (const id of ids) assert.match(id, JOB_ID);
        assert.equal(new Set(ids).size, 50, 'duplicate ids');
        // After the 8 time characters come 120 random bits: no two ids share even the first 48 of them.
        const randoms = new Set(ids.map((id) => id.slice(12, 20)));
        assert.equal(randoms.size, 50, 'ids share 48 bits after the time: they are not 120 random bits');
        // The 8 time characters are the creation time in ms, base64url digits taken in ASCII order, so ids
        // sort as their times do.
        const DIGITS = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
        const idTime = (id) => [...id.slice(4, 12)].reduce((t, ch) => t * 64 + DIGITS.indexOf(ch), 0);
        for (const r of res) {
            const skew = idTime(r.json.id) - Date.parse(r.json.createdAt);
            assert.ok(Math.abs(skew) < 60_000, `${r.json.id} says ${idTime(r.json.id)}, createdAt ${r.json.createdAt}`);
        }
        const times = [...ids].sort().map(idTime);
        assert.deepEqual(times, [...times].sort((a, b) => a - b), 'ids do not sort by their time');
        const listed = (await listAll(c)).map((j) => j.id).sort();
        assert.deepEqual(listed, [...ids].sort());
        for (let i = 0; i < 50; i++) assert.deepEqual(res[i].json.payload, { i });
    });
});
