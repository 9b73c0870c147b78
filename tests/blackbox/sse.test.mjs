// Server-Sent Events: GET /v1/jobs/{id}/events and GET /v1/events, with a raw HTTP/1.1 client (lib/sse.mjs,
// which shows every field on the wire) and with the npm `eventsource` client. Resume with Last-Event-ID,
// also across a daemon restart; 204 after done; tenant isolation; the ids of /v1/events are the cursor of
// /v1/jobs/changes; heartbeats; overload answers and shutdown.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import { api, it, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import {
    assertJobShape, assertProblem, complete, expectStatus, fail, heartbeat, leaseOne, sleep, submit,
} from './lib/jobs.mjs';
import { ids, openSse } from './lib/sse.mjs';

const SSE_CONF = 'sse: { heartbeat: 300ms, retry: 200ms, overloadRetry: 30s }\n';
const auth = (key) => ({ authorization: `Bearer ${key}` });
const BRIEF_FIELDS = ['id', 'lastUpdatedAt', 'message', 'progress', 'status'];

/** Strictly increasing integer ids. */
function assertIncreasing(list) {
    const xs = ids(list);
    for (const x of xs) assert.ok(Number.isInteger(x) && x > 0, `id ${x} is not a positive integer: ${xs}`);
    for (let i = 1; i < xs.length; i++) assert.ok(xs[i] > xs[i - 1], `ids not increasing: ${xs}`);
}

/** Every event block on the wire carries its own id line next to its data. */
function assertIdWithEveryData(raw) {
    const blocks = raw.split(/\n\n/).filter((b) => /^data:/m.test(b));
    assert.ok(blocks.length > 0, 'no events on the wire');
    for (const b of blocks) assert.match(b, /^id: \d+$/m, `event without its own id:\n${b}`);
}

/** An EventSource on path that sends key as a bearer token to whatever URL the daemon has now (it moves on
 * restart); requests: the headers of every request it made. */
function eventSource(d, path, key) {
    const requests = [];
    const es = new EventSource(`${d.url}${path}`, {
        fetch: (input, init) => {
            const u = new URL(input);
            const h = { ...init.headers, authorization: `Bearer ${key}` };
            requests.push(h);
            return fetch(new URL(u.pathname + u.search, d.url), { ...init, headers: h });
        },
    });
    const got = [];
    for (const name of ['status', 'progress', 'done']) {
        es.addEventListener(name, (e) => got.push({ event: name, id: e.lastEventId, data: JSON.parse(e.data) }));
    }
    const closed = new Promise((resolve) => {
        es.addEventListener('error', () => {
            if (es.readyState === es.CLOSED) resolve();
        });
    });
    return { es, got, requests, closed };
}

async function until(pred, ms = 10_000, what = 'condition') {
    const end = Date.now() + ms;
    while (!pred()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await sleep(20);
    }
}

describe('GET /v1/jobs/{id}/events', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() + SSE_CONF });
    });
    after(() => d?.stop());

    it('opens with retry:, then status, progress and a final done, each id sent with its data; closes after done', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        assert.equal(s.status, 200);
        assert.match(s.headers['content-type'], /^text\/event-stream/);
        assert.equal(s.headers['cache-control'], 'no-cache');
        // The stream is its HTTP/1.1 connection's last answer: the daemon takes the connection over from h2o,
        // which names it "upgrade" as it hands it over (no Upgrade field follows, so no client switches).
        assert.deepEqual(s.headers.connection.split(/\s*,\s*/).sort(), ['close', 'upgrade']);
        assert.equal(s.headers.upgrade, undefined);
        await s.waitEvents(1);
        const l = await leaseOne(w, 'report.export', { expectId: id });
        await s.waitEvents(2);
        expectStatus(await heartbeat(w, id, l.leaseId, { progress: 25 }), 200);
        expectStatus(await heartbeat(w, id, l.leaseId, { progress: 25 }), 200); // no news: no event
        expectStatus(await heartbeat(w, id, l.leaseId, { message: 'halfway' }), 200);
        await complete(w, id, l.leaseId, { result: { n: 1 } });
        await s.waitEnd();

        assert.match(s.raw, /^retry: \d+\n\n/, 'the stream does not open with retry:');
        assert.deepEqual(s.events.map((e) => e.event), ['status', 'status', 'progress', 'progress', 'done']);
        assertIncreasing(s.events);
        assertIdWithEveryData(s.raw);
        const data = s.events.map((e) => JSON.parse(e.data));
        for (const x of data.slice(0, 4)) assert.deepEqual(Object.keys(x).sort(), BRIEF_FIELDS, JSON.stringify(x));
        assert.deepEqual(data.slice(0, 4).map((x) => [x.status, x.progress, x.message]), [
            ['queued', null, null], ['running', null, null], ['running', 25, null], ['running', 25, 'halfway'],
        ]);
        assertJobShape(data[4]);
        assert.equal(data[4].status, 'succeeded');
        assert.deepEqual(data[4].result, { n: 1 });
        // The ids are the jobs' change cursor: the feed after the progress event holds the job at done's id.
        const ch = expectStatus(await c.get(`/v1/jobs/changes?since=${s.events[3].id}`), 200).json;
        assert.deepEqual(ch.changes.map((j) => j.id), [id]);
        assert.equal(ch.cursor, s.events[4].id);
    });

    it('a finished job replays its whole history then done; Last-Event-ID gives every later event exactly once', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const l = await leaseOne(w, 'report.export', { expectId: id });
        for (const p of [10, 20, 30]) expectStatus(await heartbeat(w, id, l.leaseId, { progress: p }), 200);
        await complete(w, id, l.leaseId);
        const full = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        await full.waitEnd();
        assert.deepEqual(full.events.map((e) => e.event), ['status', 'status', 'progress', 'progress', 'progress', 'done']);
        for (let k = 0; k < full.events.length - 1; k++) {
            const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { ...auth(keys.c), 'last-event-id': full.events[k].id } });
            await s.waitEnd();
            assert.deepEqual(ids(s), ids(full).slice(k + 1), `resumed after ${full.events[k].id}`);
        }
    });

    it('a job leased twice streams and replays both attempts in order, live and from every Last-Event-ID', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const live = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        await live.waitEvents(1);
        const l1 = await leaseOne(w, 'report.export', { expectId: id });
        expectStatus(await heartbeat(w, id, l1.leaseId, { progress: 30 }), 200);
        await live.waitEvents(3);
        expectStatus(await w.post(`/v1/jobs/${id}:release`, { leaseId: l1.leaseId }), 200);
        const l2 = await leaseOne(w, 'report.export', { expectId: id });
        expectStatus(await heartbeat(w, id, l2.leaseId, { progress: 60 }), 200);
        await complete(w, id, l2.leaseId);
        await live.waitEnd();
        const want = [['status', 'queued', null], ['status', 'running', null], ['progress', 'running', 30],
            ['status', 'queued', 30], ['status', 'running', null], ['progress', 'running', 60], ['done', 'succeeded', 100]];
        const shape = (s) => s.events.map((e) => [e.event, JSON.parse(e.data).status, JSON.parse(e.data).progress]);
        assert.deepEqual(shape(live), want);
        assertIncreasing(live.events);
        const full = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        await full.waitEnd();
        assert.deepEqual(shape(full), want);
        assert.deepEqual(ids(full), ids(live));
        for (let k = 0; k < full.events.length - 1; k++) {
            const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { ...auth(keys.c), 'last-event-id': full.events[k].id } });
            await s.waitEnd();
            assert.deepEqual(ids(s), ids(full).slice(k + 1), `resumed after ${full.events[k].id}`);
        }
    });

    it('resumes in the middle of a live job with no gap and no duplicate', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const l = await leaseOne(w, 'report.export', { expectId: id });
        const a = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        expectStatus(await heartbeat(w, id, l.leaseId, { progress: 10 }), 200);
        await a.waitEvents(3);
        a.close();
        for (const p of [20, 30, 40]) expectStatus(await heartbeat(w, id, l.leaseId, { progress: p }), 200);
        const b = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { ...auth(keys.c), 'last-event-id': a.events[2].id } });
        await b.waitEvents(3);
        expectStatus(await heartbeat(w, id, l.leaseId, { progress: 50 }), 200);
        await complete(w, id, l.leaseId);
        await b.waitEnd();
        const all = [...a.events.slice(0, 3), ...b.events];
        assertIncreasing(all);
        assert.deepEqual(all.map((e) => JSON.parse(e.data).progress), [null, null, 10, 20, 30, 40, 50, 100]);
    });

    it('answers 204 to a reconnect after done (and to any later id)', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const l = await leaseOne(w, 'report.export', { expectId: id });
        await complete(w, id, l.leaseId);
        const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        await s.waitEnd();
        const doneId = s.events.at(-1).id;
        for (const last of [doneId, String(Number(doneId) + 1000)]) {
            const r = await c.get(`/v1/jobs/${id}/events`, { headers: { 'last-event-id': last } });
            assert.equal(r.status, 204, `Last-Event-ID ${last}: ${r.status} ${r.text}`);
            assert.equal(r.text, '');
        }
        const before = await c.get(`/v1/jobs/${id}/events`, { headers: { 'last-event-id': String(Number(doneId) - 1) } });
        assert.equal(before.status, 200);
        assert.match(before.text, /event: done/);
    });

    it('a failed attempt shows its requeue, a cancel ends the stream with the cancelled job', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c, { type: 'report.export', payload: {}, maxAttempts: 2 })).json.id;
        const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        const l = await leaseOne(w, 'report.export', { expectId: id });
        await fail(w, id, l.leaseId);
        await s.waitEvents(3);
        expectStatus(await c.del(`/v1/jobs/${id}`), 200);
        await s.waitEnd();
        assert.deepEqual(s.events.map((e) => [e.event, JSON.parse(e.data).status]), [
            ['status', 'queued'], ['status', 'running'], ['status', 'queued'], ['done', 'cancelled'],
        ]);
    });

    it('sends comment heartbeats on an idle stream', async () => {
        const { c, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
        await s.waitFor((x) => x.comments >= 3, 5000, '3 heartbeats (configured every 300 ms)');
        assert.equal(s.events.length, 1, 'heartbeats are comments, not events');
        s.close();
    });

    it('answers problems: 401 without a key, 404 for an unknown job and another tenant\'s, 400 for a bad Last-Event-ID', async () => {
        const t1 = tenant(d);
        const t2 = tenant(d);
        const id = (await submit(t1.c)).json.id;
        const noKey = await api(d).get(`/v1/jobs/${id}/events`);
        assert.equal(noKey.status, 401);
        assertProblem(await t2.c.get(`/v1/jobs/${id}/events`), 404, 'not-found');
        assertProblem(await t1.c.get('/v1/jobs/job_AAAAAAAAAAAAAAAAAAAAAA/events'), 404, 'not-found');
        assertProblem(await t1.c.get(`/v1/jobs/${id}/events`, { headers: { 'last-event-id': 'abc' } }), 400, 'invalid-request');
        // Two Last-Event-ID fields: neither is chosen (fetch would join them, so send raw bytes).
        const two = await rawRequest(
            d,
            `GET /v1/jobs/${id}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t1.keys.c}\r\n` +
                'Last-Event-ID: 0\r\nLast-Event-ID: 1\r\nConnection: close\r\n\r\n',
        );
        assert.equal(two.status, 400, two.raw);
        assert.equal(two.json?.code, 'invalid-request', two.raw);
    });
});

describe('the eventsource client', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() + SSE_CONF });
    });
    after(() => d?.stop());

    it('gets every event once, reconnects after done with Last-Event-ID, gets 204 and stops', async () => {
        const { c, w, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const x = eventSource(d, `/v1/jobs/${id}/events`, keys.c);
        try {
            await until(() => x.got.length >= 1, 10_000, 'the first event');
            const l = await leaseOne(w, 'report.export', { expectId: id });
            for (const p of [10, 55, 90]) expectStatus(await heartbeat(w, id, l.leaseId, { progress: p }), 200);
            await complete(w, id, l.leaseId);
            await x.closed;
            assert.equal(x.es.readyState, x.es.CLOSED);
            assert.deepEqual(x.got.map((e) => [e.event, e.data.status, e.data.progress]), [
                ['status', 'queued', null], ['status', 'running', null], ['progress', 'running', 10],
                ['progress', 'running', 55], ['progress', 'running', 90], ['done', 'succeeded', 100],
            ]);
            assertIncreasing(x.got);
            assert.equal(x.requests.length, 2, 'one stream, then one reconnect answered 204');
            assert.equal(x.requests[1]['Last-Event-ID'], x.got.at(-1).id);
        } finally {
            x.es.close();
        }
    });

    it('resumes across a daemon restart with no gap and no duplicate', async () => {
        const dd = await startDaemon({ config: standardConfig() + SSE_CONF });
        try {
            const { c, w, keys } = tenant(dd);
            const id = (await submit(c)).json.id;
            const l = await leaseOne(w, 'report.export', { expectId: id, leaseSeconds: 60 });
            expectStatus(await heartbeat(w, id, l.leaseId, { progress: 10 }), 200);
            const x = eventSource(dd, `/v1/jobs/${id}/events`, keys.c);
            const raw = await openSse(`${dd.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
            try {
                await until(() => x.got.length >= 3, 10_000, 'three events before the restart');
                await raw.waitEvents(3);
                const stopped = await dd.stop();
                assert.equal(stopped.code, 0, `exit ${JSON.stringify(stopped)}`);
                // SIGTERM closed the stream cleanly, after a retry hint.
                await raw.waitEnd();
                assert.equal(raw.error, null);
                assert.ok(raw.retries.length >= 2, `no retry hint at shutdown: ${raw.retries}`);
                assert.match(raw.raw, /retry: \d+\n\n$/);
                await dd.restart();
                for (const p of [20, 30]) expectStatus(await heartbeat(w, id, l.leaseId, { progress: p }), 200);
                // A raw client resumes from its last id on the new process.
                const rest = await openSse(`${dd.url}/v1/jobs/${id}/events`, { headers: { ...auth(keys.c), 'last-event-id': raw.events.at(-1).id } });
                await rest.waitEvents(2);
                await complete(w, id, l.leaseId);
                await rest.waitEnd();
                const all = [...raw.events, ...rest.events];
                assertIncreasing(all);
                assert.deepEqual(all.map((e) => JSON.parse(e.data).progress), [null, null, 10, 20, 30, 100]);
                // The eventsource client reconnected by itself (to the new port) and saw the same, once each.
                await x.closed;
                assert.deepEqual(x.got.map((e) => e.id), all.map((e) => e.id));
                assert.ok(x.requests.length >= 3, `${x.requests.length} requests`);
            } finally {
                x.es.close();
                raw.close();
            }
        } finally {
            await dd.stop();
        }
    });
});

describe('GET /v1/events', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() + SSE_CONF });
    });
    after(() => d?.stop());

    it('streams every change of the caller\'s tenant and nothing of another tenant', async () => {
        const a = tenant(d);
        const b = tenant(d);
        const sa = await openSse(`${d.url}/v1/events`, { headers: auth(a.keys.c) });
        const sb = await openSse(`${d.url}/v1/events`, { headers: auth(b.keys.c) });
        assert.equal(sa.status, 200);
        const ja = (await submit(a.c)).json.id;
        const jb = (await submit(b.c)).json.id;
        const l = await leaseOne(a.w, 'report.export', { expectId: ja });
        expectStatus(await heartbeat(a.w, ja, l.leaseId, { progress: 40 }), 200);
        await complete(a.w, ja, l.leaseId);
        await sa.waitEvents(4);
        await sb.waitEvents(1);
        await sleep(300);
        assert.deepEqual(sa.events.map((e) => e.event), ['job', 'job', 'job', 'job']);
        const jobs = sa.events.map((e) => JSON.parse(e.data));
        for (const j of jobs) assertJobShape(j);
        assert.deepEqual(jobs.map((j) => [j.id, j.status, j.progress]), [
            [ja, 'queued', null], [ja, 'running', null], [ja, 'running', 40], [ja, 'succeeded', 100],
        ]);
        assertIncreasing(sa.events);
        assertIdWithEveryData(sa.raw);
        assert.deepEqual(sb.events.map((e) => JSON.parse(e.data).id), [jb]);
        sa.close();
        sb.close();
    });

    it('uses the /v1/jobs/changes cursor: ?since= and Last-Event-ID replay what follows, then go live', async () => {
        const { c, w, keys } = tenant(d);
        const cursor0 = expectStatus(await c.get('/v1/jobs/changes'), 200).json.cursor;
        const j1 = (await submit(c)).json.id;
        const j2 = (await submit(c)).json.id;
        const l = await leaseOne(w, 'report.export', { expectId: j1 });
        const feed = expectStatus(await c.get(`/v1/jobs/changes?since=${cursor0}`), 200).json;
        // Switching from the feed to the stream: the stream starts where the feed's cursor left off.
        const s = await openSse(`${d.url}/v1/events?since=${feed.cursor}`, { headers: auth(keys.c) });
        expectStatus(await heartbeat(w, j1, l.leaseId, { progress: 70 }), 200);
        await s.waitEvents(1);
        const after = expectStatus(await c.get(`/v1/jobs/changes?since=${feed.cursor}`), 200).json;
        assert.equal(s.events[0].id, after.cursor);
        assert.equal(JSON.parse(s.events[0].data).progress, 70);
        s.close();
        // Replay from the first cursor: each job once at its newest state, in change order, then live.
        const r = await openSse(`${d.url}/v1/events`, { headers: { ...auth(keys.c), 'last-event-id': cursor0 } });
        await r.waitEvents(2);
        assert.deepEqual(r.events.map((e) => JSON.parse(e.data).id), [j2, j1]);
        assert.equal(r.events[1].id, after.cursor);
        await complete(w, j1, l.leaseId);
        await r.waitEvents(3);
        assert.equal(JSON.parse(r.events[2].data).status, 'succeeded');
        assertIncreasing(r.events);
        r.close();
    });

    it('filters by type and status', async () => {
        const { c, w, keys } = tenant(d);
        const s = await openSse(`${d.url}/v1/events?type=email.send&status=running`, { headers: auth(keys.c) });
        const other = (await submit(c)).json.id;
        const mail = (await submit(c, { type: 'email.send', payload: {} })).json.id;
        await leaseOne(w, 'report.export', { expectId: other });
        await leaseOne(w, 'email.send', { expectId: mail });
        await s.waitEvents(1);
        await sleep(300);
        assert.deepEqual(s.events.map((e) => [JSON.parse(e.data).id, JSON.parse(e.data).status]), [[mail, 'running']]);
        assertProblem(await c.get('/v1/events?status=bogus'), 400, 'invalid-request');
        s.close();
    });
});

describe('overload and shutdown', () => {
    it('past maxStreamsPerTenant a new stream gets 200 with a long retry: and ends, never a 5xx', async () => {
        const d = await startDaemon({ config: standardConfig() + 'sse: { heartbeat: 300ms, retry: 200ms, overloadRetry: 45s, maxStreamsPerTenant: 2 }\n' });
        try {
            const { c, keys } = tenant(d);
            const id = (await submit(c)).json.id;
            const s1 = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
            const s2 = await openSse(`${d.url}/v1/events`, { headers: auth(keys.c) });
            await s1.waitEvents(1);
            const s3 = await openSse(`${d.url}/v1/events`, { headers: auth(keys.c) });
            await s3.waitEnd();
            assert.equal(s3.status, 200);
            assert.match(s3.headers['content-type'], /^text\/event-stream/);
            assert.deepEqual(s3.retries, [45000]);
            assert.equal(s3.events.length, 0);
            // Another tenant is not affected, and a freed slot is usable again.
            const other = tenant(d);
            const s4 = await openSse(`${d.url}/v1/events`, { headers: auth(other.keys.c) });
            assert.deepEqual(await s4.waitFor((x) => x.retries.length > 0).then((x) => x.retries), [200]);
            s1.close();
            // A closed HTTP/1.1 stream is noticed when a write to it fails, at a heartbeat (300 ms here).
            let s5;
            for (const end = Date.now() + 5000; ; await sleep(100)) {
                s5 = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) });
                await s5.waitFor((x) => x.retries.length > 0);
                if (s5.retries[0] === 200) break;
                s5.close();
                assert.ok(Date.now() < end, 'the slot of a closed stream was not freed within 5 s');
            }
            assert.equal(s5.status, 200);
            s2.close();
            s4.close();
            s5.close();
        } finally {
            await d.stop();
        }
    });

    it('SIGTERM ends every stream cleanly with a retry hint and the daemon exits 0', async () => {
        const d = await startDaemon({ config: standardConfig() + SSE_CONF });
        const { c, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const streams = await Promise.all([
            openSse(`${d.url}/v1/jobs/${id}/events`, { headers: auth(keys.c) }),
            openSse(`${d.url}/v1/events`, { headers: auth(keys.c) }),
        ]);
        await streams[0].waitEvents(1);
        const r = await d.stop();
        assert.equal(r.code, 0);
        for (const s of streams) {
            await s.waitEnd();
            assert.equal(s.error, null, 'the stream was cut, not ended');
            assert.match(s.raw, /retry: \d+\n\n$/);
            assert.ok(s.retries.at(-1) >= 200, `${s.retries}`);
        }
    });
});
