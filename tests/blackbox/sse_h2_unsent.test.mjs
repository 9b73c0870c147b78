// HTTP/2 SSE streams behind a closed window count against the budget of answers clients have not taken
// (docs/operations.md, "Answers clients do not take"), and that budget's limits are configuration. A client sets
// SETTINGS_INITIAL_WINDOW_SIZE to 0 and opens many GET /v1/events streams resuming from Last-Event-ID: 0 over a
// change feed of large jobs: each stream queues one page of it (~0.9 MB, under its own 1 MiB backlog cap) that
// can never leave. Its connection is closed once it holds more than limits.maxUnsentBytesPerConnection; while
// all connections together hold more than limits.maxUnsentBytes, other requests get 503 with Retry-After. The
// stall limit (limits.unsentStall) is set far out here, so that only the byte limits can close a connection.

import { describe, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http2 from 'node:http2';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, assertRetryAfter, expectStatus, sleep } from './lib/jobs.mjs';

const SANITIZED = process.env.ACCEPTD_SANITIZED === '1';
const MiB = 1024 * 1024;
const JOBS = 100; // one page of the change feed (api_events.c AD_EVENTS_PAGE)

function rss(pid) {
    return Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
}

function config(limits) {
    return standardConfig({ limits: `{ maxBodyBytes: 1048576, maxWaitSeconds: 5, unsentStall: 30m${limits} }` });
}

/** JOBS jobs of ~9 KB each: the change feed's first page is ~0.9 MB. */
async function bigFeed(c) {
    const jobs = Array.from({ length: JOBS }, () => ({ type: 'report.export', payload: { blob: 'z'.repeat(9000) } }));
    expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
}

/** A session whose streams can receive nothing; ended resolves with the time it closed. */
function closedWindow(url) {
    const s = http2.connect(url, { settings: { initialWindowSize: 0 } });
    s.on('error', () => {});
    s.ended = new Promise((resolve) => s.on('close', () => resolve(Date.now())));
    return s;
}

/** Open n event streams resuming the whole feed; resolves with their statuses once each has its headers or ended. */
function openFeeds(s, key, n) {
    const all = [];
    for (let i = 0; i < n; i++) {
        const st = s.request({ ':path': '/v1/events', authorization: `Bearer ${key}`, 'last-event-id': '0' });
        st.on('error', () => {});
        all.push(new Promise((resolve) => {
            st.on('response', (h) => resolve(h[':status']));
            st.on('close', () => resolve(0));
        }));
    }
    return Promise.all(all);
}

describe('HTTP/2 SSE streams behind a closed window', () => {
    let d;
    afterEach(() => d?.stop());

    it('close their connection once it holds more than its share', async (t) => {
        d = await startDaemon({ config: config('') });
        const { c, keys } = tenant(d);
        await bigFeed(c);
        const rss0 = rss(d.proc.pid);
        const s = closedWindow(d.url);
        try {
            // 100 streams of ~0.9 MB: ~90 MB if none were counted; the default share is 8 MiB.
            openFeeds(s, keys.c, 100);
            const at = await Promise.race([s.ended, sleep(30_000).then(() => 0)]);
            const grown = rss(d.proc.pid) - rss0;
            t.diagnostic(`RSS +${Math.round(grown / MiB)} MiB while the connection was open`);
            assert.ok(at !== 0, `the connection was still open 30 s after its streams queued ~${Math.round((100 * JOBS * 9300) / MiB)} MiB`);
            if (!SANITIZED) assert.ok(grown < 64 * MiB, `RSS grew by ${Math.round(grown / MiB)} MiB`);
        } finally {
            s.destroy();
        }
        expectStatus(await c.get('/healthz'), 200);
        expectStatus(await c.get('/v1/jobs?limit=1'), 200);
    });

    it('get other requests 503 with Retry-After while all of them hold more than the total', async () => {
        // Streams opened one at a time on two connections in turn, until other requests are refused: each connection
        // holds about half of what both hold, so the total (4 MiB) is passed while each is under its share (also
        // 4 MiB, the most a share may be). How much a stream has queued at a moment depends on the store (its page
        // is read inline on SQLite, by a reader thread on PostgreSQL), so the test does not count on a size.
        d = await startDaemon({ config: config(', maxUnsentBytesPerConnection: 4194304, maxUnsentBytes: 4194304') });
        const { c, keys } = tenant(d);
        await bigFeed(c);
        const sessions = [closedWindow(d.url), closedWindow(d.url)];
        try {
            let res;
            for (let i = 0; i < 40 && (res === undefined || res.status === 200); i++) {
                assert.deepEqual(await openFeeds(sessions[i % 2], keys.c, 1), [200]);
                for (const until = Date.now() + 1000; Date.now() < until; await sleep(100)) {
                    res = await c.get('/v1/jobs?limit=1');
                    if (res.status !== 200) break;
                }
            }
            assertProblem(res, 503, 'unavailable');
            assertRetryAfter(res);
            expectStatus(await c.get('/healthz'), 200); // the probes are answered anyway
            // Neither connection passed its own share: both are still open.
            const open = await Promise.race([Promise.race(sessions.map((s) => s.ended)).then(() => false), sleep(500).then(() => true)]);
            assert.ok(open, 'a connection under its share was closed');
        } finally {
            for (const s of sessions) s.destroy();
        }
        // Once the clients have gone, so has what they held.
        let res;
        for (const until = Date.now() + 10_000; Date.now() < until; await sleep(100)) {
            res = await c.get('/v1/jobs?limit=1');
            if (res.status === 200) break;
        }
        expectStatus(res, 200);
    });

    it('refuse to start with limits that cannot hold', async () => {
        // A configuration error exits with status 2 (docs/operations.md), naming the setting.
        for (const [limits, why] of [
            [', maxUnsentBytesPerConnection: 1000', /limits\.maxUnsentBytesPerConnection: expected an integer from 1048576 to 1099511627776, got '1000'/],
            [', maxUnsentBytes: 2097152', /limits\.maxUnsentBytesPerConnection \(8388608\) must not be more than limits\.maxUnsentBytes \(2097152\)/],
            ['', /limits\.unsentStall: expected a duration/],
        ]) {
            const conf = limits ? config(limits) : standardConfig({ limits: '{ unsentStall: 0s }' });
            const e = await startDaemon({ config: conf }).then(async (started) => {
                await started.stop();
                return null;
            }, (err) => err);
            assert.ok(e !== null, `started with:\n${conf}`);
            assert.match(e.message, /^acceptd exited before listening \(code 2, signal null\)/, e.message);
            assert.match(e.message.slice(e.message.indexOf('--- stderr ---')), why, e.message);
        }
    });
});
