// Clients that go away while their request is still being worked on: an HTTP/2 client resets its
// stream while a submit is being committed, while a long poll waits, while a lease request is parked.
// Whether h2o disposes such a request at once or only after it is answered, the daemon must not crash,
// must keep what it committed and must keep serving everyone else; a parked lease that was reset must
// not take the job that arrives next.

import { after, afterEach, before, beforeEach, describe } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';

import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { listAll, sleep, submit, waitUntil } from './lib/jobs.mjs';

/* Open an h2c (prior knowledge) stream, send it, and reset it after resetAfterMs. */
function resetStream(session, { method, path, key, body, headers = {} }, resetAfterMs) {
    return new Promise((resolve) => {
        const h = { ':method': method, ':path': path, authorization: `Bearer ${key}`, ...headers };
        if (body !== undefined) h['content-type'] = 'application/json';
        const s = session.request(h);
        s.on('error', () => {});
        s.on('close', resolve);
        s.resume();
        if (body !== undefined) s.end(JSON.stringify(body));
        else s.end();
        setTimeout(() => s.close(http2.constants.NGHTTP2_CANCEL), resetAfterMs);
    });
}

describe('clients that reset their HTTP/2 stream mid-request', () => {
    let d;
    let session;
    before(async () => {
        d = await startDaemon();
    });
    beforeEach(() => {
        session = http2.connect(d.url);
        session.on('error', () => {});
    });
    afterEach(() => session.close());
    after(async () => {
        await d?.stop();
    });

    it('submits reset before their 202 are still committed, and the daemon keeps serving', async () => {
        const { c, keys } = tenant(d);
        const resets = [];
        for (let i = 0; i < 40; i++)
            resets.push(resetStream(session, { method: 'POST', path: '/v1/jobs', key: keys.c, body: { type: 'report.export', payload: { i } } }, 0));
        await Promise.all(resets);
        // A reset may reach the daemon before or after the body; whatever arrived whole is committed
        // (with no one to tell), and nothing else is.
        const jobs = await listAll(c);
        assert.ok(jobs.length <= 40, `${jobs.length} jobs`);
        for (const j of jobs) assert.equal(j.status, 'queued');
        await submit(c);
        assert.equal((await c.get('/healthz')).status, 200);
    });

    it('a long poll reset while waiting is dropped; the job goes on', async () => {
        const { c, w, keys } = tenant(d);
        const job = (await submit(c)).json;
        await resetStream(session, { method: 'GET', path: `/v1/jobs/${job.id}?wait=5`, key: keys.c }, 200);
        await resetStream(session, { method: 'POST', path: '/v1/jobs', key: keys.c, body: { type: 'report.export' }, headers: { prefer: 'wait=5' } }, 300);
        // Changing the job now wakes nobody who has gone.
        const l = await w.post('/v1/leases', { types: ['report.export'], max: 2 });
        assert.equal(l.status, 200, l.text);
        assert.equal((await c.get(`/v1/jobs/${job.id}`)).status, 200);
    });

    it('a parked lease request reset while waiting takes no job', async () => {
        const { c, w, keys } = tenant(d);
        await resetStream(session, { method: 'POST', path: '/v1/leases', key: keys.w, body: { types: ['email.send'], wait: 5 } }, 200);
        await sleep(100);
        const job = (await submit(c, { type: 'email.send', payload: {} })).json;
        // The job stays queued for a live worker instead of being leased to the one that left.
        const l = await w.post('/v1/leases', { types: ['email.send'], wait: 2 });
        assert.equal(l.status, 200, l.text);
        assert.equal(l.json.leases[0].job.id, job.id);
        await waitUntil(() => c.get(`/v1/jobs/${job.id}`), (r) => r.json.status === 'running', { what: 'job running' });
    });
});
