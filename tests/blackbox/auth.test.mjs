// Authentication, roles and tenant isolation; the no-keys loopback mode.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, api, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    assertProblem, complete, expectStatus, getJob, hget, lease, leaseOne, listAll, runToCancelled, sleep, submit, submitAndLease,
} from './lib/jobs.mjs';

const UNKNOWN_ID = 'job_AAAAAAAAAAAAAAAAAAAAAA';

function assertUnauthorized(res) {
    assertProblem(res, 401, 'unauthorized');
    assert.match(hget(res, 'www-authenticate') ?? '', /^Bearer\b/i, `WWW-Authenticate: ${hget(res, 'www-authenticate')}`);
}

/** A 404 for another tenant's job must be indistinguishable from a 404 for no job at all. */
function assertSameAsUnknown(res, unknown) {
    const p = assertProblem(res, 404, 'not-found');
    const u = assertProblem(unknown, 404, 'not-found');
    assert.deepEqual(Object.keys(p).sort(), Object.keys(u).sort());
    for (const f of ['type', 'title', 'status', 'code']) assert.equal(p[f], u[f], f);
    assert.equal(hget(res, 'content-type'), hget(unknown, 'content-type'));
}

describe('authentication and roles', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('no Authorization -> 401 unauthorized with WWW-Authenticate: Bearer, before any validation', async () => {
        const anon = api(d);
        assertUnauthorized(await anon.get('/v1/jobs'));
        assertUnauthorized(await anon.get('/v1/jobs/changes'));
        assertUnauthorized(await anon.get(`/v1/jobs/${UNKNOWN_ID}`));
        assertUnauthorized(await anon.post('/v1/jobs', { type: 'report.export', payload: {} }));
        assertUnauthorized(await anon.req('POST', '/v1/jobs', { raw: '{not json' }));
        assertUnauthorized(await anon.post('/v1/leases', { types: ['report.export'], max: 1, wait: 0 }));
        assertUnauthorized(await anon.del(`/v1/jobs/${UNKNOWN_ID}`));
    });

    it('a wrong key or scheme -> 401', async () => {
        const t = tenant(d);
        const good = t.keys.c;
        for (const authorization of ['Bearer nope', `Bearer ${good.toUpperCase()}`, `Bearer ${good.slice(0, -1)}`,
            `Bearer ${good}x`, 'Bearer ', `Basic ${Buffer.from(`${good}:`).toString('base64')}`, good]) {
            const res = await api(d).get('/v1/jobs', { headers: { authorization } });
            assertUnauthorized(res);
        }
        expectStatus(await api(d).get('/v1/jobs', { headers: { authorization: `bearer ${good}` } }), 200); // scheme is case-insensitive
    });

    it('two Authorization fields -> 401, whichever keys they carry', async () => {
        const one = tenant(d);
        const other = tenant(d);
        const job = (await submit(other.c)).json;
        for (const [first, second] of [[one.keys.c, other.keys.c], [one.keys.c, one.keys.c]]) {
            const res = await rawRequest(
                d,
                `GET /v1/jobs/${job.id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\n` +
                    `Authorization: Bearer ${second}\r\nConnection: close\r\n\r\n`,
            );
            assert.equal(res.status, 401, res.raw);
            assert.equal(res.json?.code, 'unauthorized', res.raw);
            assert.match(res.headers['www-authenticate'] ?? '', /^Bearer\b/);
        }
        expectStatus(await other.c.get(`/v1/jobs/${job.id}`), 200);
    });

    it('a client key cannot lease or report on jobs -> 403 forbidden', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        assertProblem(await lease(c, 'report.export', { wait: 0 }), 403, 'forbidden');
        for (const verb of ['heartbeat', 'complete', 'fail']) {
            assertProblem(await c.post(`/v1/jobs/${id}:${verb}`, { leaseId: 'lse_x', error: { title: 'x' } }), 403, 'forbidden');
        }
        assert.equal((await getJob(c, id)).status, 'queued');
    });

    it('a worker key leases and reads, but cannot submit or retry', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const l = await leaseOne(w, 'report.export', { expectId: id });
        expectStatus(await w.get(`/v1/jobs/${id}`), 200);
        expectStatus(await w.get('/v1/jobs'), 200);
        await complete(w, id, l.leaseId);
        assertProblem(await w.post('/v1/jobs', { type: 'report.export', payload: {} }), 403, 'forbidden');
        const cancelled = await runToCancelled(c);
        assertProblem(await w.post(`/v1/jobs/${cancelled.id}:retry`), 403, 'forbidden');
        assert.equal((await listAll(c)).length, 2, 'a forbidden request stored a job');
    });

    it('an admin key submits, leases and completes within its tenant', async () => {
        const { c, a } = tenant(d);
        const id = (await submit(a)).json.id;
        const l = await leaseOne(a, 'report.export', { expectId: id });
        await complete(a, id, l.leaseId);
        assert.equal((await getJob(c, id)).status, 'succeeded');
    });
});

describe('tenant isolation', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it("another tenant's job answers 404 exactly like an unknown id, for every verb", async () => {
        const x = tenant(d);
        const y = tenant(d);
        const l = await submitAndLease(x.c, x.w);
        const id = l.job.id;
        const etag = hget(await x.c.get(`/v1/jobs/${id}`), 'etag');

        const same = async (path, call) => assertSameAsUnknown(await call(path(id)), await call(path(UNKNOWN_ID)));
        await same((i) => `/v1/jobs/${i}`, (p) => y.c.get(p));
        await same((i) => `/v1/jobs/${i}/result`, (p) => y.c.get(p));
        await same((i) => `/v1/jobs/${i}`, (p) => y.c.del(p));
        await same((i) => `/v1/jobs/${i}:cancel`, (p) => y.c.post(p));
        await same((i) => `/v1/jobs/${i}:heartbeat`, (p) => y.w.post(p, { leaseId: l.leaseId, progress: 99 }));
        await same((i) => `/v1/jobs/${i}:complete`, (p) => y.w.post(p, { leaseId: l.leaseId, result: { stolen: true } }));
        await same((i) => `/v1/jobs/${i}:fail`, (p) => y.w.post(p, { leaseId: l.leaseId, error: { title: 'x' }, retryable: false }));
        await same((i) => `/v1/jobs/${i}:cancel`, (p) => y.w.post(p, { leaseId: l.leaseId }));

        const after = expectStatus(await x.c.get(`/v1/jobs/${id}`), 200);
        assert.equal(after.json.status, 'running');
        assert.equal(after.json.cancelRequested, false);
        assert.equal(hget(after, 'etag'), etag, "another tenant's calls changed the job");

        const cancelled = await runToCancelled(x.c);
        assertSameAsUnknown(await y.c.post(`/v1/jobs/${cancelled.id}:retry`), await y.c.post(`/v1/jobs/${UNKNOWN_ID}:retry`));
        assert.equal((await listAll(x.c)).length, 2);
        assert.deepEqual(await listAll(y.c), []);
    });

    it("lists, changes and leases never show another tenant's jobs", async () => {
        const x = tenant(d);
        const y = tenant(d);
        const x1 = (await submit(x.c)).json.id;
        const x2 = (await submit(x.c, { type: 'image.resize', payload: {} })).json.id;
        expectStatus(await lease(y.w, ['report.export', 'image.resize'], { wait: 0 }), 204);
        const y1 = (await submit(y.c)).json.id;

        assert.deepEqual((await listAll(x.c)).map((j) => j.id).sort(), [x1, x2].sort());
        assert.deepEqual((await listAll(y.c)).map((j) => j.id), [y1]);
        assert.deepEqual((await listAll(y.c, 'type=image.resize')).map((j) => j.id), []);
        assert.deepEqual((await listAll(y.c, 'status=queued')).map((j) => j.id), [y1]);
        const ch = expectStatus(await y.c.get('/v1/jobs/changes'), 200);
        assert.deepEqual(ch.json.changes.map((j) => j.id), [y1]);

        const got = await leaseOne(y.w, ['report.export', 'image.resize'], { wait: 0 });
        assert.equal(got.job.id, y1);
        expectStatus(await lease(y.w, ['report.export', 'image.resize'], { wait: 0 }), 204);
        assert.equal((await getJob(x.c, x1)).status, 'queued');
    });
});

describe('no keys configured', () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: 'types:\n  report.export: {}\nlimits: { maxBodyBytes: 4096, maxWaitSeconds: 5 }\n',
        });
    });
    after(() => d?.stop());

    it('serves loopback without Authorization, with every role, and says so at start', async () => {
        const anon = api(d);
        expectStatus(await anon.get('/v1/jobs'), 200);
        const id = (await submit(anon)).json.id;
        const l = await leaseOne(anon, 'report.export', { expectId: id });
        await complete(anon, id, l.leaseId);
        assert.equal((await getJob(anon, id)).status, 'succeeded');
        assert.match(d.stdout + d.stderr, /loopback|no keys/i, 'no start-up notice about the keyless loopback mode');
        assert.deepEqual(expectStatus(await anon.get('/healthz'), 200).json, { status: 'ok', auth: 'none' });
    });
});

describe('rate limits per key', () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: `keys:
  - { key: "ka", tenant: a, role: client, rateLimit: { requests: 3, window: 2s } }
  - { key: "kb", tenant: b, role: client }
  - { key: "wa", tenant: a, role: worker, rateLimit: { requests: 0 } }
limits: { rateLimit: { requests: 100, window: 60s } }
`,
        });
    });
    after(() => d?.stop());

    it('past its quota a key gets 429 with Retry-After and RateLimit fields; other keys are not touched', async () => {
        const a = api(d, 'ka');
        for (const left of [2, 1, 0]) {
            const res = expectStatus(await a.get('/v1/jobs'), 200);
            assert.equal(hget(res, 'ratelimit-policy'), '"default";q=3;w=2');
            assert.match(hget(res, 'ratelimit') ?? '', new RegExp(`^"default";r=${left};t=[12]$`));
        }
        const limited = await a.post('/v1/jobs', { type: 'report.export', payload: {} });
        assert.match(assertProblem(limited, 429, 'rate-limited').detail, /quota/);
        const wait = Number(hget(limited, 'retry-after'));
        assert.ok(wait >= 1 && wait <= 2, `Retry-After: ${hget(limited, 'retry-after')}`);
        assert.equal(hget(limited, 'ratelimit'), `"default";r=0;t=${wait}`);

        // kb takes the default policy and has its own count; wa has no limit at all.
        const b = expectStatus(await api(d, 'kb').get('/v1/jobs'), 200);
        assert.equal(hget(b, 'ratelimit-policy'), '"default";q=100;w=60');
        assert.match(hget(b, 'ratelimit') ?? '', /^"default";r=99;t=(59|60)$/);
        const w = expectStatus(await api(d, 'wa').get('/v1/jobs'), 200);
        assert.equal(hget(w, 'ratelimit-policy'), null);
        assert.equal(hget(w, 'ratelimit'), null);

        // Once the window has closed the key is served again, and the refused submit stored nothing.
        await sleep(wait * 1000 + 100);
        const again = expectStatus(await a.get('/v1/jobs'), 200);
        assert.match(hget(again, 'ratelimit') ?? '', /^"default";r=2;t=[12]$/);
        assert.deepEqual(again.json.items, []);
    });
});
