// Signed URLs (contract §9, valet key) for browsers, whose EventSource cannot send an Authorization header:
// POST /v1/jobs/{id}:sign hands out URLs that read that one job, its result and its events until they
// expire. And CORS, so that a page on another origin may use them.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, api, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, complete, expectStatus, heartbeat, leaseOne, sleep, submit } from './lib/jobs.mjs';
import { openSse } from './lib/sse.mjs';

const CONF = standardConfig() + 'sse: { heartbeat: 300ms, retry: 200ms }\n';

/** The path and query of an absolute URL the daemon handed out, for a client bound to the daemon. */
const rel = (u) => {
    const x = new URL(u);
    return x.pathname + x.search;
};

describe('signed URLs', () => {
    let d;
    let anon;
    before(async () => {
        d = await startDaemon({ config: CONF });
        anon = api(d);
    });
    after(() => d?.stop());

    it(':sign returns URLs that read the job, its events and its result without a key', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const res = expectStatus(await c.post(`/v1/jobs/${id}:sign`, { ttlSeconds: 600 }), 200);
        const { url, events, result, expiresAt } = res.json;
        assert.equal(new URL(url).origin, d.url);
        assert.equal(new URL(url).pathname, `/v1/jobs/${id}`);
        assert.equal(new URL(events).pathname, `/v1/jobs/${id}/events`);
        assert.equal(new URL(result).pathname, `/v1/jobs/${id}/result`);
        const exp = Date.parse(expiresAt);
        assert.ok(Math.abs(exp - (Date.now() + 600_000)) < 5000, `expiresAt ${expiresAt}`);
        assert.equal(Number(new URL(url).searchParams.get('exp')) * 1000, exp);

        const job = expectStatus(await anon.get(rel(url)), 200).json;
        assert.equal(job.id, id);
        assertProblem(await anon.get(rel(result)), 404, 'result-not-ready');
        const s = await openSse(events);
        assert.equal(s.status, 200);
        const l = await leaseOne(w, 'report.export', { expectId: id });
        expectStatus(await heartbeat(w, id, l.leaseId, { progress: 60 }), 200);
        await complete(w, id, l.leaseId, { result: { answer: 42 } });
        await s.waitEnd();
        assert.deepEqual(s.events.map((e) => e.event), ['status', 'status', 'progress', 'done']);
        assert.deepEqual(expectStatus(await anon.get(rel(result)), 200).json, { answer: 42 });
        // The redirect completion style keeps the signature in Location, so the reader can follow it.
        const r303 = expectStatus(await anon.get(`${rel(url)}&onComplete=redirect`), 303);
        const loc = r303.headers.get('location');
        assert.match(loc, new RegExp(`^/v1/jobs/${id}/result\\?exp=\\d+&sig=`));
        assert.deepEqual(expectStatus(await anon.get(loc), 200).json, { answer: 42 });
    });

    it('refuses a tampered signature, another job\'s id, an expired URL and other routes (401)', async () => {
        const { c } = tenant(d);
        const id = (await submit(c)).json.id;
        const other = (await submit(c)).json.id;
        const { url, events } = expectStatus(await c.post(`/v1/jobs/${id}:sign`, {}), 200).json;
        const u = new URL(url);
        const sig = u.searchParams.get('sig');
        const exp = u.searchParams.get('exp');
        const flipped = (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1);
        for (const [what, path] of [
            ['a tampered signature', `/v1/jobs/${id}?exp=${exp}&sig=${flipped}`],
            ['a changed expiry', `/v1/jobs/${id}?exp=${Number(exp) + 1}&sig=${sig}`],
            ['another job', `/v1/jobs/${other}?exp=${exp}&sig=${sig}`],
            ['another job\'s events', `/v1/jobs/${other}/events?exp=${exp}&sig=${sig}`],
            ['no signature', `/v1/jobs/${id}?exp=${exp}`],
            ['the job list', `/v1/jobs?exp=${exp}&sig=${sig}`],
            ['the attempts', `/v1/jobs/${id}/attempts?exp=${exp}&sig=${sig}`],
            ['the tenant stream', `/v1/events?exp=${exp}&sig=${sig}`],
        ]) {
            const r = await anon.get(path);
            assertProblem(r, 401, 'unauthorized');
            assert.ok(r.headers.get('www-authenticate'), `${what}: no WWW-Authenticate`);
        }
        assertProblem(await anon.del(`/v1/jobs/${id}?exp=${exp}&sig=${sig}`), 401, 'unauthorized');
        assertProblem(await anon.req('POST', `/v1/jobs/${id}:cancel?exp=${exp}&sig=${sig}`), 401, 'unauthorized');
        const s = await openSse(events);
        assert.equal(s.status, 200);
        s.close();

        const asked = Date.now();
        const short = expectStatus(await c.post(`/v1/jobs/${id}:sign`, { ttlSeconds: 1 }), 200).json;
        const life = Date.parse(short.expiresAt) - asked;
        assert.ok(life >= 1000 && life <= 2000, `a 1 s URL lives ${life} ms`);
        expectStatus(await anon.get(rel(short.url)), 200);
        await sleep(Date.parse(short.expiresAt) - Date.now() + 1100);
        assertProblem(await anon.get(rel(short.url)), 401, 'unauthorized');
    });

    it('signs only for a client of the job\'s tenant, with a sane ttl', async () => {
        const t = tenant(d);
        const t2 = tenant(d);
        const id = (await submit(t.c)).json.id;
        assertProblem(await t2.c.post(`/v1/jobs/${id}:sign`, {}), 404, 'not-found');
        assertProblem(await t.w.post(`/v1/jobs/${id}:sign`, {}), 403, 'forbidden');
        for (const ttl of [0, -1, 604801, 'x', 1.5]) {
            assertProblem(await t.c.post(`/v1/jobs/${id}:sign`, { ttlSeconds: ttl }), 422, 'validation-failed');
        }
        const res = expectStatus(await t.c.req('POST', `/v1/jobs/${id}:sign`), 200);
        const left = Date.parse(res.json.expiresAt) - Date.now();
        assert.ok(left > 3500_000 && left <= 3601_000, `default ttl: ${left} ms`);
    });

    it('stays valid across a restart (the key is kept in the data dir, mode 0600)', async () => {
        const dd = await startDaemon({ config: CONF });
        try {
            const { c } = tenant(dd);
            const id = (await submit(c)).json.id;
            const { url } = expectStatus(await c.post(`/v1/jobs/${id}:sign`, {}), 200).json;
            await dd.restart();
            expectStatus(await api(dd).get(rel(url)), 200);
            const fs = await import('node:fs');
            const st = fs.statSync(`${dd.dataDir}/signing.key`);
            assert.equal(st.mode & 0o777, 0o600);
            assert.equal(st.size, 32);
        } finally {
            await dd.stop();
        }
    });
});

describe('CORS', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: CONF });
    });
    after(() => d?.stop());

    it('answers a preflight that asks for Last-Event-ID and Authorization', async () => {
        const res = await fetch(`${d.url}/v1/jobs/job_AAAAAAAAAAAAAAAAAAAAAA/events`, {
            method: 'OPTIONS',
            headers: {
                origin: 'http://127.0.0.1:9',
                'access-control-request-method': 'GET',
                'access-control-request-headers': 'last-event-id, authorization',
            },
        });
        assert.equal(res.status, 204);
        assert.equal(res.headers.get('access-control-allow-origin'), '*');
        assert.match(res.headers.get('access-control-allow-methods'), /\bGET\b/);
        const allowed = res.headers.get('access-control-allow-headers').toLowerCase().split(/\s*,\s*/);
        for (const h of ['last-event-id', 'authorization']) assert.ok(allowed.includes(h), `${h} not in ${allowed}`);
    });

    it('lets any origin read answers and streams; without Origin nothing changes', async () => {
        const { c, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const r = await c.get(`/v1/jobs/${id}`, { headers: { origin: 'http://example.test' } });
        assert.equal(r.headers.get('access-control-allow-origin'), '*');
        assert.match(r.headers.get('access-control-expose-headers'), /ETag/);
        const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { origin: 'http://example.test', authorization: `Bearer ${keys.c}` } });
        assert.equal(s.headers['access-control-allow-origin'], '*');
        s.close();
        const plain = await c.get(`/v1/jobs/${id}`);
        assert.equal(plain.headers.get('access-control-allow-origin'), null);
        // An OPTIONS that is not a preflight is still an unknown method.
        assertProblem(await c.req('OPTIONS', `/v1/jobs/${id}`), 405, 'method-not-allowed');
    });
});
