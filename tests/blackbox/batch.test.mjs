// Bulk submit: POST /v1/jobs:batch takes 1 to 1,000 jobs, validates each as POST /v1/jobs would, gives each its
// own idempotency key, answers 207 with one result per job in the request's order, and commits every accepted
// job of the request together before it answers (so a kill -9 right after the answer loses none).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, api, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { JOB_ID, assertJobShape, assertProblem, expectStatus, hget, show } from './lib/jobs.mjs';

const LIMITS = '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }';

const post = (c, body, headers = {}) => c.req('POST', '/v1/jobs:batch', { body, headers });

/** The 207 answer's results, checked for its shape: one per job sent. */
function results(res, n) {
    expectStatus(res, 207);
    assert.match(hget(res, 'content-type') ?? '', /^application\/json/, show(res));
    assert.ok(Array.isArray(res.json?.results), `no results array: ${show(res)}`);
    assert.equal(res.json.results.length, n, show(res));
    return res.json.results;
}

/** An item's problem checked as assertProblem checks a whole answer's. */
function itemProblem(item, status, code) {
    assert.equal(item.status, status, JSON.stringify(item));
    const p = item.problem;
    return assertProblem(
        { status: p.status, json: p, headers: { 'content-type': 'application/problem+json' }, text: JSON.stringify(p) },
        status,
        code,
        { instance: '/v1/jobs:batch' },
    );
}

describe('POST /v1/jobs:batch', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: LIMITS }) });
    });
    after(() => d?.stop());

    it('100 valid jobs: 207, each 202 with its job and a Location that answers', async () => {
        const { c } = tenant(d);
        const jobs = Array.from({ length: 100 }, (_, i) => ({ type: 'report.export', payload: { n: i } }));
        const items = results(await post(c, { jobs }), 100);
        const ids = new Set();
        for (const [i, item] of items.entries()) {
            assert.equal(item.status, 202, JSON.stringify(item));
            assert.match(item.id, JOB_ID);
            assert.equal(item.location, `/v1/jobs/${item.id}`);
            assertJobShape(item.job);
            assert.equal(item.job.id, item.id);
            assert.equal(item.job.status, 'queued');
            assert.deepEqual(item.job.payload, { n: i }, 'results are not in the request order');
            ids.add(item.id);
        }
        assert.equal(ids.size, 100, 'two jobs share an id');
        for (const item of items) {
            const res = expectStatus(await c.get(item.location), 200);
            assert.deepEqual(res.json.payload, item.job.payload);
        }
    });

    it('Prefer: return=minimal leaves the job out of each result', async () => {
        const { c } = tenant(d);
        const res = await post(c, { jobs: [{ type: 'email.send' }, { type: 'email.send' }] }, { prefer: 'return=minimal' });
        const items = results(res, 2);
        assert.equal(hget(res, 'preference-applied'), 'return=minimal');
        for (const item of items) assert.deepEqual(Object.keys(item).sort(), ['id', 'location', 'status']);
    });

    it('invalid jobs get their own 422 problem; the valid ones of the same batch are stored', async () => {
        const { c } = tenant(d);
        const jobs = [
            { type: 'report.export', payload: { ok: 1 } },
            { payload: {} }, // no type
            { type: 'video.transcode', payload: {} }, // misses the required sourceUrl
            'not an object',
            { type: 'no.such.type' },
            { type: 'email.send', maxAttempts: 0, idempotencyKey: 'ok-key' },
            { type: 'email.send', idempotencyKey: 17 },
            { type: 'image.resize', payload: { ok: 2 } },
        ];
        const items = results(await post(c, { jobs }), jobs.length);
        assert.equal(items[0].status, 202, JSON.stringify(items[0]));
        assert.equal(itemProblem(items[1], 422, 'validation-failed').errors[0].pointer, '/type');
        assert.equal(itemProblem(items[2], 422, 'validation-failed').errors[0].pointer, '/payload/sourceUrl');
        itemProblem(items[3], 422, 'validation-failed');
        itemProblem(items[4], 422, 'unknown-type');
        assert.equal(itemProblem(items[5], 422, 'validation-failed').errors[0].pointer, '/maxAttempts');
        assert.equal(itemProblem(items[6], 422, 'validation-failed').errors[0].pointer, '/idempotencyKey');
        assert.equal(items[7].status, 202, JSON.stringify(items[7]));
        const listed = expectStatus(await c.get('/v1/jobs'), 200).json.items;
        assert.deepEqual(listed.map((j) => j.id).sort(), [items[0].id, items[7].id].sort(), 'only the valid jobs are stored');
    });

    it('each job has its own idempotency key: a replay answers the stored job, a reused key with another job is 422', async () => {
        const { c } = tenant(d);
        const single = expectStatus(await c.post('/v1/jobs', { type: 'email.send', payload: { to: 'x' } }, { headers: { 'idempotency-key': 'k-single' } }), 202);
        const first = results(await post(c, { jobs: [
            { type: 'report.export', payload: { a: 1 }, idempotencyKey: 'k1' },
            { type: 'report.export', payload: { a: 2 }, idempotencyKey: 'k2' },
        ] }), 2);
        assert.ok(first.every((x) => x.status === 202 && x.replayed === undefined), JSON.stringify(first));
        const again = results(await post(c, { jobs: [
            { type: 'report.export', payload: { a: 1 }, idempotencyKey: 'k1' }, // replay
            { type: 'report.export', payload: { a: 3 }, idempotencyKey: 'k2' }, // same key, another job
            { type: 'report.export', payload: { a: 4 }, idempotencyKey: 'k3' }, // new
            { type: 'report.export', payload: { a: 4 }, idempotencyKey: 'k3' }, // same key twice in one batch
            { type: 'email.send', payload: { to: 'x' }, idempotencyKey: 'k-single' }, // the single submit's key
        ] }), 5);
        assert.equal(again[0].status, 202);
        assert.equal(again[0].id, first[0].id, 'a replayed key made a new job');
        assert.equal(again[0].replayed, true);
        itemProblem(again[1], 422, 'idempotency-key-reused');
        assert.equal(again[2].status, 202);
        assert.equal(again[3].status, 202, JSON.stringify(again[3]));
        assert.equal(again[3].id, again[2].id, 'a key given twice in one batch made two jobs');
        assert.equal(again[3].replayed, true);
        assert.equal(again[4].id, single.json.id, 'a batch job with the key of a single submit (same job) does not replay it');
        const listed = expectStatus(await c.get('/v1/jobs'), 200).json.items;
        assert.equal(listed.length, 4, `jobs stored: ${listed.map((j) => JSON.stringify(j.payload)).join(' ')}`);
    });

    it('1,000 jobs are accepted, more are 413; no jobs or no array: 422; malformed JSON: 400; a request key: 400', async () => {
        const { c } = tenant(d);
        const many = Array.from({ length: 1001 }, () => ({ type: 'email.send' }));
        assertProblem(await post(c, { jobs: many }), 413, 'payload-too-large');
        assertProblem(await post(c, { jobs: [] }), 422, 'validation-failed');
        assertProblem(await post(c, [{ type: 'email.send' }]), 422, 'validation-failed');
        assertProblem(await c.req('POST', '/v1/jobs:batch', { raw: '{"jobs":[{"type":"email.send"},' }), 400, 'malformed-json');
        assertProblem(await post(c, { jobs: [{ type: 'email.send' }] }, { 'idempotency-key': 'whole' }), 400, 'idempotency-key-invalid');
        assert.equal(expectStatus(await c.get('/v1/jobs'), 200).json.items.length, 0, 'a refused batch stored jobs');
        const full = results(await post(c, { jobs: many.slice(0, 1000) }, { prefer: 'return=minimal' }), 1000);
        assert.ok(full.every((x) => x.status === 202), 'a batch of exactly 1,000 jobs was not accepted whole');
    });

    it('a batch of one tenant is not visible to another', async () => {
        const A = tenant(d);
        const B = tenant(d);
        const items = results(await post(A.c, { jobs: [{ type: 'email.send' }, { type: 'email.send' }] }), 2);
        for (const item of items) {
            expectStatus(await A.c.get(item.location), 200);
            assertProblem(await B.c.get(item.location), 404, null);
        }
        assert.equal(expectStatus(await B.c.get('/v1/jobs'), 200).json.items.length, 0);
        // The same idempotency key in another tenant is another job.
        const a = results(await post(A.c, { jobs: [{ type: 'email.send', idempotencyKey: 'shared' }] }), 1);
        const b = results(await post(B.c, { jobs: [{ type: 'email.send', idempotencyKey: 'shared' }] }), 1);
        assert.notEqual(a[0].id, b[0].id);
        assert.equal(b[0].replayed, undefined);
    });
});

describe('POST /v1/jobs:batch counts each job against the rate limit', () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: `keys:
  - { key: "ka", tenant: a, role: client, rateLimit: { requests: 5, window: 60s } }
types:
  email.send: {}
limits: ${LIMITS}
`,
        });
    });
    after(() => d?.stop());

    it('the jobs past the quota get 429 each; the first ones are accepted', async () => {
        const c = api(d, 'ka');
        const res = await post(c, { jobs: Array.from({ length: 8 }, () => ({ type: 'email.send' })) });
        const items = results(res, 8);
        assert.deepEqual(items.map((x) => x.status), [202, 202, 202, 202, 202, 429, 429, 429]);
        itemProblem(items[5], 429, 'rate-limited');
        assert.match(hget(res, 'ratelimit') ?? '', /^"default";r=0;t=\d+$/);
        assertProblem(await c.get('/v1/jobs'), 429, 'rate-limited');
    });
});

describe('POST /v1/jobs:batch survives kill -9 right after the answer', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: LIMITS }) });
    });
    after(() => d?.stop());

    it('every job of every 207 is there after the restart', async () => {
        const c = api(d, 'ka');
        const accepted = new Map();
        const answers = await Promise.all(
            Array.from({ length: 4 }, (_, b) =>
                post(c, { jobs: Array.from({ length: 250 }, (_, i) => ({ type: 'report.export', payload: { b, i } })) }),
            ),
        );
        const exit = await d.kill9();
        assert.equal(exit.signal, 'SIGKILL', `the daemon exited by itself first: ${JSON.stringify(exit)}`);
        for (const res of answers) for (const item of results(res, 250)) accepted.set(item.id, item.job.payload);
        assert.equal(accepted.size, 1000);
        await d.restart();
        const ids = [...accepted.keys()];
        for (let i = 0; i < ids.length; i += 50) {
            const got = await Promise.all(ids.slice(i, i + 50).map((id) => c.get(`/v1/jobs/${id}`)));
            for (const res of got) {
                assert.equal(res.status, 200, `a job of a 207 is missing after the restart: ${show(res)}`);
                assert.deepEqual(res.json.payload, accepted.get(res.json.id));
            }
        }
    });
});
