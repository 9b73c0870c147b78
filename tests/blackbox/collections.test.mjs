// Collections: GET /v1/jobs (filters, keyset pagination) and the changes feed GET /v1/jobs/changes.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertJobShape, assertProblem, expectStatus, heartbeat, leaseOne, sleep, submit } from './lib/jobs.mjs';

async function submitSeq(c, n, type = 'report.export') {
    const ids = [];
    for (let i = 0; i < n; i++) ids.push((await submit(c, { type, payload: { i } })).json.id);
    return ids;
}

async function ids(c, query) {
    const res = expectStatus(await c.get(`/v1/jobs?${query}`), 200);
    assert.ok(Array.isArray(res.json.items), res.text);
    return res.json.items.map((j) => j.id);
}

async function changes(c, query = '') {
    const res = expectStatus(await c.get(`/v1/jobs/changes${query ? `?${query}` : ''}`), 200);
    assert.ok(Array.isArray(res.json.changes), res.text);
    assert.equal(typeof res.json.cursor, 'string', res.text);
    assert.ok(res.json.cursor.length > 0, res.text);
    return { list: res.json.changes, ids: res.json.changes.map((j) => j.id), cursor: res.json.cursor, ms: res.ms };
}

describe('GET /v1/jobs', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('lists newest first, full representations, nextPageToken null at the end', async () => {
        const { c } = tenant(d);
        const sent = await submitSeq(c, 3);
        const res = expectStatus(await c.get('/v1/jobs'), 200);
        assert.deepEqual(res.json.items.map((j) => j.id), [...sent].reverse());
        for (const j of res.json.items) assertJobShape(j);
        assert.equal(res.json.nextPageToken, null);
    });

    it('filters by status, type, both, and updatedAfter', async () => {
        const { c, w } = tenant(d);
        const [r1, r2] = await submitSeq(c, 2, 'report.export');
        const [i1, i2] = await submitSeq(c, 2, 'image.resize');
        const l = await leaseOne(w, 'report.export', { expectId: r1 });
        expectStatus(await c.del(`/v1/jobs/${i1}`), 200);

        assert.deepEqual(await ids(c, 'status=queued'), [i2, r2]);
        assert.deepEqual(await ids(c, 'status=running'), [r1]);
        assert.deepEqual(await ids(c, 'status=cancelled'), [i1]);
        assert.deepEqual(await ids(c, 'status=succeeded'), []);
        assert.deepEqual(await ids(c, 'type=image.resize'), [i2, i1]);
        assert.deepEqual(await ids(c, 'type=report.export&status=queued'), [r2]);
        assert.deepEqual(await ids(c, 'type=email.send'), []);
        assert.deepEqual(await ids(c, 'type=image.resize%00x'), [], 'a %00 ended the type filter early');

        await sleep(50);
        const t = new Date().toISOString();
        await sleep(50);
        expectStatus(await heartbeat(w, r1, l.leaseId, { progress: 5 }), 200);
        const n1 = (await submit(c)).json.id;
        assert.deepEqual((await ids(c, `updatedAfter=${encodeURIComponent(t)}`)).sort(), [r1, n1].sort());
    });

    it('limit + pageToken walk 25 jobs exactly once while new jobs keep arriving', async () => {
        const { c } = tenant(d);
        const original = await submitSeq(c, 25);
        const seen = [];
        let token = null;
        const pageSizes = [];
        for (let page = 0; page < 10; page++) {
            const q = `limit=10${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`;
            const res = expectStatus(await c.get(`/v1/jobs?${q}`), 200);
            pageSizes.push(res.json.items.length);
            seen.push(...res.json.items.map((j) => j.id));
            token = res.json.nextPageToken;
            if (token === null || token === undefined) break;
            assert.equal(typeof token, 'string');
            await Promise.all([submit(c), submit(c), submit(c)]); // concurrent writes between pages
        }
        assert.deepEqual(pageSizes, [10, 10, 5]);
        assert.deepEqual(seen, [...original].reverse(), 'every original job once, newest first, none of the new ones');
    });

    it('limit defaults to 50', async () => {
        const { c } = tenant(d);
        await Promise.all(Array.from({ length: 52 }, (_, i) => submit(c, { type: 'report.export', payload: { i } })));
        const p1 = expectStatus(await c.get('/v1/jobs'), 200);
        assert.equal(p1.json.items.length, 50);
        assert.equal(typeof p1.json.nextPageToken, 'string');
        const p2 = expectStatus(await c.get(`/v1/jobs?pageToken=${encodeURIComponent(p1.json.nextPageToken)}`), 200);
        assert.equal(p2.json.items.length, 2);
        assert.equal(p2.json.nextPageToken, null);
        assert.equal(new Set([...p1.json.items, ...p2.json.items].map((j) => j.id)).size, 52);
    });

    it('bad parameters -> 400 invalid-request', async () => {
        const { c } = tenant(d);
        await submit(c);
        expectStatus(await c.get('/v1/jobs?limit=500'), 200);
        expectStatus(await c.get('/v1/jobs?limit=1'), 200);
        for (const q of ['limit=0', 'limit=501', 'limit=abc', 'limit=-1', 'limit=1.5', 'status=bogus',
            'pageToken=garbage', 'updatedAfter=yesterday', 'limit=1%00', 'status=queued%00x']) {
            assertProblem(await c.get(`/v1/jobs?${q}`), 400, 'invalid-request');
        }
    });
});

describe('GET /v1/jobs/changes', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('without since: every job of the tenant, oldest change first', async () => {
        const { c } = tenant(d);
        const other = tenant(d).c;
        await submit(other);
        const sent = await submitSeq(c, 3);
        const ch = await changes(c);
        assert.deepEqual(ch.ids, sent);
        for (const j of ch.list) assertJobShape(j);
    });

    it('the cursor continues; a job changed twice appears once, at its newest state', async () => {
        const { c, w } = tenant(d);
        const [j1, j2, j3] = await submitSeq(c, 3);
        const start = await changes(c);
        assert.deepEqual(start.ids, [j1, j2, j3]);
        const idle = await changes(c, `since=${encodeURIComponent(start.cursor)}`);
        assert.deepEqual(idle.ids, []);

        const l = await leaseOne(w, 'report.export', { expectId: j1 });
        const j4 = (await submit(c)).json.id;
        expectStatus(await heartbeat(w, j1, l.leaseId, { progress: 50 }), 200);
        const next = await changes(c, `since=${encodeURIComponent(idle.cursor)}`);
        assert.deepEqual(next.ids, [j4, j1], 'each changed job once, ordered by its newest change');
        const c1 = next.list.find((j) => j.id === j1);
        assert.equal(c1.status, 'running');
        assert.equal(c1.progress, 50);
        assert.deepEqual((await changes(c, `since=${encodeURIComponent(next.cursor)}`)).ids, []);
    });

    it('limit pages through changes with the cursor', async () => {
        const { c } = tenant(d);
        const sent = await submitSeq(c, 3);
        const first = await changes(c, 'limit=2');
        assert.deepEqual(first.ids, sent.slice(0, 2));
        const rest = await changes(c, `since=${encodeURIComponent(first.cursor)}&limit=2`);
        assert.deepEqual(rest.ids, sent.slice(2));
    });

    it('wait=N holds an empty answer, and returns early when a job changes', async () => {
        const { c } = tenant(d);
        await submit(c);
        const start = await changes(c);
        const idle = await changes(c, `since=${encodeURIComponent(start.cursor)}&wait=2`);
        assert.deepEqual(idle.ids, []);
        assert.ok(idle.ms >= 1500, `not held: ${idle.ms.toFixed(0)} ms`);

        const pending = changes(c, `since=${encodeURIComponent(idle.cursor)}&wait=5`);
        await sleep(300);
        const id = (await submit(c)).json.id;
        const got = await pending;
        assert.deepEqual(got.ids, [id]);
        assert.ok(got.ms < 4000, `the change did not end the wait: ${got.ms.toFixed(0)} ms`);
    });
});
