// HTTP/2 rapid reset (CVE-2023-44487): a client that resets each stream right after sending its request frees
// the stream's place under h2o's stream limit while the work the request started (a submit's writer operation,
// a lease op) runs on. Such a connection gets GOAWAY with ENHANCE_YOUR_CALM once it has abandoned more requests
// than its budget allows, the daemon's memory stays put, and other clients keep being answered meanwhile. Past
// limits.maxQueuedWrites, writes are refused with 503 rather than queued.

import { after, before, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http2 from 'node:http2';

import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, assertRetryAfter, sleep, submit } from './lib/jobs.mjs';

const FLOOD_STREAMS = 40_000; // at most this many streams per flood...
const FLOOD_MS = 10_000; // ...for at most this long
const RSS_SLACK = 64 << 20;
const ENHANCE_YOUR_CALM = http2.constants.NGHTTP2_ENHANCE_YOUR_CALM; // 11

function rssBytes(pid) {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m[1]) * 1024;
}

/**
 * Open streams on a new HTTP/2 session (h2c, prior knowledge), each a POST of body to path reset with CANCEL as
 * soon as its body has been handed to the session, 100 per turn of the event loop, until the server sends
 * GOAWAY or ends the session, FLOOD_STREAMS have been sent or FLOOD_MS have passed. Resolves {sent, goaway
 * (the GOAWAY's error code or null), peakRss (of pid, sampled each turn)}.
 */
async function rapidReset(d, key, path, body) {
    const session = http2.connect(d.url, { peerMaxConcurrentStreams: 1e6 });
    session.on('error', () => {}); // the session ends with an error after an error GOAWAY
    let goaway = null;
    session.on('goaway', (code) => (goaway = code));
    await new Promise((resolve, reject) => {
        session.once('connect', resolve);
        session.once('error', reject);
    });
    const until = Date.now() + FLOOD_MS;
    let sent = 0;
    let peakRss = rssBytes(d.proc.pid);
    try {
        while (goaway === null && !session.closed && !session.destroyed && sent < FLOOD_STREAMS && Date.now() < until) {
            for (let i = 0; i < 100; i++, sent++) {
                const s = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json', authorization: `Bearer ${key}` });
                s.on('error', () => {});
                s.end(body, () => s.close(http2.constants.NGHTTP2_CANCEL));
            }
            await new Promise((r) => setImmediate(r));
            peakRss = Math.max(peakRss, rssBytes(d.proc.pid));
        }
    } finally {
        session.destroy();
    }
    return { sent, goaway, peakRss };
}

/** GET a job with If-None-Match of its ETag over HTTP/1.1 again and again until stopped.value; its statuses. */
async function pollWhile(c, id, etag, stopped) {
    const statuses = [];
    while (!stopped.value) statuses.push((await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag } })).status);
    return statuses;
}

/** Flood path with body on one connection while another client polls a job; assert what the describe says. */
async function floodAndWatch(d, key, path, body) {
    const { c } = tenant(d);
    const job = await submit(c);
    const id = job.json.id;
    const etag = job.headers.get('etag');
    const start = rssBytes(d.proc.pid);
    const stopped = { value: false };
    const polls = pollWhile(c, id, etag, stopped);
    const flood = await rapidReset(d, key, path, body);
    stopped.value = true;
    const during = await polls;
    const afterwards = await c.get(`/v1/jobs/${id}`, { headers: { 'if-none-match': etag } });
    assert.equal(flood.goaway, ENHANCE_YOUR_CALM, `no GOAWAY(ENHANCE_YOUR_CALM) after ${flood.sent} reset streams (got ${flood.goaway})`);
    assert.ok(
        flood.peakRss - start < RSS_SLACK,
        `RSS grew by ${((flood.peakRss - start) / 1048576).toFixed(1)} MiB over ${flood.sent} reset streams (start ${(start / 1048576).toFixed(1)} MiB)`,
    );
    assert.ok(during.length > 0, 'the other client was never answered during the flood');
    assert.deepEqual([...new Set(during)], [304], `the other client's polls during the flood: ${JSON.stringify(during.slice(0, 20))}`);
    assert.equal(afterwards.status, 304);
}

describe('HTTP/2 rapid reset', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('a connection that resets its submits right after sending them gets GOAWAY(ENHANCE_YOUR_CALM); memory stays put and others are answered', async () => {
        const { keys } = tenant(d);
        await floodAndWatch(d, keys.c, '/v1/jobs', JSON.stringify({ type: 'report.export', payload: {} }));
    });

    it('the same with parked leases (POST /v1/leases with wait) reset right after sending', async () => {
        const { keys } = tenant(d);
        await floodAndWatch(d, keys.w, '/v1/leases', JSON.stringify({ types: ['rr.nothing'], wait: 5 }));
    });
});

describe('limits.maxQueuedWrites', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: '{ maxBodyBytes: 4096, maxWaitSeconds: 5, maxQueuedWrites: 1 }' }) });
    });
    after(() => d?.stop());

    it('writes past the limit are refused with 503 unavailable and Retry-After, not queued; the next one is served', async () => {
        const { c, keys } = tenant(d);
        const session = http2.connect(d.url);
        session.on('error', () => {});
        const post = () =>
            new Promise((resolve, reject) => {
                const s = session.request({ ':method': 'POST', ':path': '/v1/jobs', 'content-type': 'application/json', authorization: `Bearer ${keys.c}` });
                let status = 0;
                let headers = {};
                let text = '';
                s.setEncoding('utf8');
                s.on('response', (h) => {
                    status = h[':status'];
                    headers = h;
                });
                s.on('data', (chunk) => (text += chunk));
                s.on('end', () => resolve({ status, headers, text }));
                s.on('error', reject);
                s.end(JSON.stringify({ type: 'report.export', payload: {} }));
            });
        let answers;
        try {
            // Sent together, they reach the daemon in one read, before any is committed and answered. A write of
            // the daemon's own in flight at that moment (the sweeper's) takes the one place: then all 50 are
            // refused, and the flood is sent again after a pause.
            for (let round = 0; round < 5; round++) {
                answers = await Promise.all(Array.from({ length: 50 }, post));
                if (answers.some((a) => a.status === 202)) break;
                await sleep(300);
            }
        } finally {
            session.destroy();
        }
        const refused = answers.filter((a) => a.status === 503);
        assert.ok(refused.length > 0, `no write was refused: ${JSON.stringify(answers.map((a) => a.status))}`);
        assert.ok(answers.some((a) => a.status === 202), 'not one write was accepted');
        for (const a of answers) assert.ok(a.status === 202 || a.status === 503, `unexpected ${a.status}`);
        const r = refused[0];
        const res = { method: 'POST', path: '/v1/jobs', status: r.status, headers: r.headers, text: r.text, json: JSON.parse(r.text) };
        assertProblem(res, 503, 'unavailable');
        assertRetryAfter(res);
        assert.match(res.json.detail, /limits\.maxQueuedWrites/);
        assert.equal((await submit(c)).status, 202);
    });
});
