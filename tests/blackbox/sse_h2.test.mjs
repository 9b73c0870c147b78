// SSE over HTTP/2 (h2c with prior knowledge, node:http2): many event streams multiplexed on one connection,
// each ending on its own, plus ordinary requests on the same connection meanwhile.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { complete, expectStatus, heartbeat, leaseOne, submit } from './lib/jobs.mjs';
import { ids, openSse2 } from './lib/sse.mjs';

const CONF = standardConfig() + 'sse: { heartbeat: 300ms, retry: 200ms }\n';

/** A GET over the session; resolves {status, json}. */
function get2(session, path, headers) {
    return new Promise((resolve, reject) => {
        const s = session.request({ ':path': path, ...headers });
        let body = '';
        let status = 0;
        s.setEncoding('utf8');
        s.on('response', (h) => {
            status = h[':status'];
        });
        s.on('data', (c) => {
            body += c;
        });
        s.on('end', () => resolve({ status, json: body ? JSON.parse(body) : null }));
        s.on('error', reject);
    });
}

describe('SSE over HTTP/2', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: CONF });
    });
    after(() => d?.stop());

    it('carries 30 job streams and 2 tenant streams on one connection, each with its own events and end', async () => {
        const { c, w, keys } = tenant(d);
        const session = http2.connect(d.url); // http: URL = h2c with prior knowledge
        session.on('error', () => {});
        const auth = { authorization: `Bearer ${keys.c}` };
        try {
            const jobs = [];
            for (let i = 0; i < 30; i++) jobs.push((await submit(c)).json.id);
            const feeds = await Promise.all([openSse2(session, '/v1/events', { headers: auth }), openSse2(session, '/v1/events', { headers: auth })]);
            const streams = await Promise.all(jobs.map((id) => openSse2(session, `/v1/jobs/${id}/events`, { headers: auth })));
            for (const s of [...streams, ...feeds]) {
                assert.equal(s.status, 200);
                assert.match(s.headers['content-type'], /^text\/event-stream/);
            }
            await Promise.all(streams.map((s) => s.waitEvents(1)));
            // Ordinary requests share the connection while the streams are open.
            const r = await get2(session, `/v1/jobs/${jobs[0]}`, auth);
            assert.equal(r.status, 200);
            assert.equal(r.json.id, jobs[0]);

            const leases = [];
            for (const id of jobs) leases.push(await leaseOne(w, 'report.export', { expectId: id }));
            for (let i = 0; i < jobs.length; i++) expectStatus(await heartbeat(w, jobs[i], leases[i].leaseId, { progress: i + 1 }), 200);
            // Half the jobs finish: their streams end, the others stay open.
            for (let i = 0; i < 15; i++) await complete(w, jobs[i], leases[i].leaseId);
            await Promise.all(streams.slice(0, 15).map((s) => s.waitEnd()));
            await Promise.all(streams.slice(15).map((s) => s.waitEvents(3)));
            for (let i = 0; i < 30; i++) {
                const s = streams[i];
                const want = i < 15 ? ['status', 'status', 'progress', 'done'] : ['status', 'status', 'progress'];
                assert.deepEqual(s.events.map((e) => e.event), want, `stream ${i}`);
                assert.equal(JSON.parse(s.events[2].data).progress, i + 1);
                for (const e of s.events) assert.equal(JSON.parse(e.data).id, jobs[i]);
                if (i >= 15) assert.equal(s.ended, false, `stream ${i} ended early`);
            }
            for (let i = 15; i < 30; i++) await complete(w, jobs[i], leases[i].leaseId);
            await Promise.all(streams.slice(15).map((s) => s.waitEnd()));
            // Both tenant streams (opened after the submits) saw the 3 later changes of all 30 jobs, in the same order.
            // A submit's own change may come too: with a cluster store (ACCEPTD_TEST_PG) changes reach the streams
            // from the store's log (the pump), so it goes out to a stream opened before the pump reached it and not
            // to one opened after.
            const later = (f) => ids(f.events.filter((e) => JSON.parse(e.data).status !== 'queued'));
            await Promise.all(feeds.map((f) => f.waitFor((x) => later(x).length >= 30 * 3, 10_000, '90 later changes')));
            assert.deepEqual(later(feeds[0]), later(feeds[1]));
            const ended = feeds[0].events.filter((e) => JSON.parse(e.data).status === 'succeeded').map((e) => JSON.parse(e.data).id);
            assert.deepEqual([...ended].sort(), [...jobs].sort());
            for (const f of feeds) f.close();
        } finally {
            session.close();
        }
    });

    it('resumes with Last-Event-ID over HTTP/2 too', async () => {
        const { c, w, keys } = tenant(d);
        const session = http2.connect(d.url);
        session.on('error', () => {});
        const auth = { authorization: `Bearer ${keys.c}` };
        try {
            const id = (await submit(c)).json.id;
            const l = await leaseOne(w, 'report.export', { expectId: id });
            for (const p of [10, 20, 30]) expectStatus(await heartbeat(w, id, l.leaseId, { progress: p }), 200);
            await complete(w, id, l.leaseId);
            const full = await openSse2(session, `/v1/jobs/${id}/events`, { headers: auth });
            await full.waitEnd();
            const rest = await openSse2(session, `/v1/jobs/${id}/events`, { headers: { ...auth, 'last-event-id': full.events[2].id } });
            await rest.waitEnd();
            assert.deepEqual(ids(rest), ids(full).slice(3));
            const after = await get2(session, `/v1/jobs/${id}/events`, { ...auth, 'last-event-id': full.events.at(-1).id });
            assert.equal(after.status, 204);
        } finally {
            session.close();
        }
    });
});
