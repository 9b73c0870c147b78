// Answers a client does not take are bounded: HTTP/2 clients that set SETTINGS_INITIAL_WINDOW_SIZE to 0 and open
// 100 streams of GET /v1/jobs?limit=500 on each of many connections (nothing of any answer can leave), and an
// HPACK bomb (one large header table entry referenced thousands of times, answered 431 behind a window of 0),
// grow the daemon's memory by far less than they ask for (each connection is closed once what it holds passes
// its cap); it comes back once the clients close, and /healthz answers meanwhile. A connection holding a single
// answer that cannot leave is closed once none has left for 10 s, one holding a 431 once it has not left within
// a second; the limits are configuration (limits.maxUnsentBytesPerConnection, maxUnsentBytes, unsentStall).

import { describe, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { expectStatus, sleep } from './lib/jobs.mjs';

const SANITIZED = process.env.ACCEPTD_SANITIZED === '1';
const MiB = 1024 * 1024;

function rss(pid) {
    return Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
}

/** A session whose streams can receive nothing: every stream's window is 0. */
function closedWindow(url) {
    const s = http2.connect(url, { settings: { initialWindowSize: 0 } });
    s.on('error', () => {});
    return s;
}

/** Open n streams of path on session s; resolves once each has its response headers or has ended. */
function openStreams(s, n, headers) {
    const all = [];
    for (let i = 0; i < n; i++) {
        const st = s.request({ ':path': '/v1/jobs?limit=500', ...headers });
        st.on('error', () => {});
        all.push(new Promise((resolve) => {
            st.on('response', (h) => resolve(h[':status']));
            st.on('close', () => resolve(0));
        }));
    }
    return all;
}

/** The worst and the 99th percentile of /healthz probes over ms, over HTTP/1.1. */
async function probeHealth(c, ms) {
    const took = [];
    for (const until = Date.now() + ms; Date.now() < until; ) {
        const t = Date.now();
        expectStatus(await c.get('/healthz', { timeoutMs: 60_000 }), 200);
        took.push(Date.now() - t);
        await sleep(100);
    }
    took.sort((a, b) => a - b);
    return { worst: took.at(-1), p99: took[Math.floor(0.99 * (took.length - 1))] };
}

async function settledRss(pid, under, ms) {
    const until = Date.now() + ms;
    let now = rss(pid);
    while (now >= under && Date.now() < until) {
        await sleep(250);
        now = rss(pid);
    }
    return now;
}

/** An HPACK integer with an n-bit prefix whose other bits are flags. */
function hpackInt(flags, n, v) {
    const max = (1 << n) - 1;
    if (v < max) return [flags | v];
    const out = [flags | max];
    for (v -= max; v >= 128; v >>= 7) out.push((v & 127) | 128);
    out.push(v);
    return out;
}
const hpackStr = (str) => [...hpackInt(0, 7, Buffer.byteLength(str)), ...Buffer.from(str)];
function frame(type, flags, stream, payload) {
    const h = Buffer.alloc(9);
    h.writeUIntBE(payload.length, 0, 3);
    h[3] = type;
    h[4] = flags;
    h.writeUInt32BE(stream, 5);
    return Buffer.concat([h, payload]);
}

/**
 * A raw HTTP/2 connection (node's client copies every header value it sends, so it cannot send a bomb) with every
 * stream's window at 0, sending n requests whose header block refers 16,000 times to one 4,000-byte entry of the
 * HPACK table (added by the first request): 16 KB on the wire, each decoded into a list of 16,000 fields.
 */
function hpackBomb(url, key, n) {
    const u = new URL(url);
    const sock = net.connect({ host: u.hostname, port: Number(u.port) });
    sock.on('error', () => {});
    sock.on('data', () => {});
    const out = [Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(4, 0, 0, Buffer.from([0, 4, 0, 0, 0, 0])), frame(4, 1, 0, Buffer.alloc(0))];
    for (let i = 0; i < n; i++) {
        const block = [0x82, 0x86, ...hpackInt(0, 4, 4), ...hpackStr('/v1/jobs'), ...hpackInt(0, 4, 1), ...hpackStr(u.host),
            ...hpackInt(0, 4, 23), ...hpackStr(`Bearer ${key}`)];
        if (i === 0) block.push(0x40, ...hpackStr('x-bomb'), ...hpackStr('b'.repeat(4000)));
        const refs = Buffer.alloc(16000, 0x80 | 62); // the newest entry of the dynamic table
        const all = Buffer.concat([Buffer.from(block), refs]);
        const id = 2 * i + 1;
        out.push(frame(1, 0x1, id, all.subarray(0, 16384)));
        out.push(frame(9, 0x4, id, all.subarray(16384)));
    }
    sock.write(Buffer.concat(out));
    return sock;
}

describe('answers behind a closed HTTP/2 window', () => {
    // A daemon per test: what one leaves in the heap would hide the other's growth.
    let d;
    beforeEach(async () => {
        d = await startDaemon({ config: standardConfig({ limits: '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }' }) });
    });
    afterEach(() => d?.stop());

    it('hold bounded memory, given back when the clients close', async (t) => {
        const { c, keys } = tenant(d);
        const jobs = Array.from({ length: 500 }, () => ({ type: 'report.export', payload: { blob: 'z'.repeat(600) } }));
        expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
        expectStatus(await c.get('/v1/jobs?limit=500'), 200);
        const CONNS = SANITIZED ? 10 : 40;
        const rss0 = rss(d.proc.pid);
        const sessions = [];
        const statuses = [];
        for (let k = 0; k < CONNS; k++) {
            const s = closedWindow(d.url);
            sessions.push(s);
            statuses.push(...openStreams(s, 100, { authorization: `Bearer ${keys.c}` }));
        }
        const { worst, p99 } = await probeHealth(c, 3000);
        await Promise.race([Promise.all(statuses), sleep(10_000)]);
        const grown = rss(d.proc.pid) - rss0;
        for (const s of sessions) s.destroy();
        const back = await settledRss(d.proc.pid, rss0 + 128 * MiB, 10_000);
        t.diagnostic(`RSS +${Math.round(grown / MiB)} MiB under load, +${Math.round((back - rss0) / MiB)} MiB after close; /healthz p99 ${p99} ms, worst ${worst} ms`);
        if (!SANITIZED) {
            // The sanitizer's allocator keeps what is freed in quarantine: its RSS says nothing of the daemon's.
            assert.ok(grown < 512 * MiB, `RSS grew by ${Math.round(grown / MiB)} MiB for answers nobody could take`);
            assert.ok(back < rss0 + 128 * MiB, `RSS stayed ${Math.round((back - rss0) / MiB)} MiB over its start 10 s after the clients closed`);
        }
        assert.ok(worst < (SANITIZED ? 10_000 : 5000), `/healthz took ${worst} ms`);
        expectStatus(await c.get('/healthz'), 200);
    });

    it('hold bounded memory for 431s to an HPACK bomb, given back when the clients close', async (t) => {
        const { c, keys } = tenant(d);
        const CONNS = SANITIZED ? 4 : 10;
        const rss0 = rss(d.proc.pid);
        const sessions = [];
        for (let k = 0; k < CONNS; k++) sessions.push(hpackBomb(d.url, keys.c, 100));
        const { worst, p99 } = await probeHealth(c, 3000);
        await sleep(2000);
        const grown = rss(d.proc.pid) - rss0;
        for (const s of sessions) s.destroy();
        const back = await settledRss(d.proc.pid, rss0 + 128 * MiB, 10_000);
        t.diagnostic(`RSS +${Math.round(grown / MiB)} MiB under load, +${Math.round((back - rss0) / MiB)} MiB after close; /healthz p99 ${p99} ms, worst ${worst} ms`);
        if (!SANITIZED) {
            assert.ok(grown < 512 * MiB, `RSS grew by ${Math.round(grown / MiB)} MiB for 431s nobody could take`);
            assert.ok(back < rss0 + 128 * MiB, `RSS stayed ${Math.round((back - rss0) / MiB)} MiB over its start 10 s after the clients closed`);
        }
        assert.ok(worst < (SANITIZED ? 10_000 : 5000), `/healthz took ${worst} ms`);
    });

    it('closes a connection none of whose answers has left for 10 s', async () => {
        const { keys } = tenant(d);
        const s = closedWindow(d.url);
        try {
            const closed = new Promise((resolve) => s.on('close', () => resolve(Date.now())));
            const [status] = openStreams(s, 1, { authorization: `Bearer ${keys.c}` });
            const t0 = Date.now();
            assert.equal(await status, 200); // its headers left; no byte of its body can
            const at = await Promise.race([closed, sleep(20_000).then(() => 0)]);
            assert.ok(at !== 0, 'the connection was still open 20 s after its answer');
            assert.ok(at - t0 >= 9000, `closed after ${at - t0} ms, before 10 s without progress`);
        } finally {
            s.destroy();
        }
    });
});

describe('a configured share of answers not taken', () => {
    let d;
    afterEach(() => d?.stop());

    it('closes a connection whose 431 to an HPACK bomb has not left within a second, giving its memory back', async (t) => {
        // Shares far above what 100 bombs hold (~180 MB) and a stall limit far out: only the 431s' own limit applies.
        d = await startDaemon({
            config: standardConfig({
                limits: '{ maxBodyBytes: 1048576, maxWaitSeconds: 5, maxUnsentBytesPerConnection: 1073741824, maxUnsentBytes: 1073741824, unsentStall: 30m }',
            }),
        });
        const { c, keys } = tenant(d);
        const rss0 = rss(d.proc.pid);
        const sock = hpackBomb(d.url, keys.c, 100);
        try {
            const closed = new Promise((resolve) => sock.on('close', () => resolve(true)));
            // The client never closes: only the daemon can end the connection, and the memory comes back with it.
            assert.ok(await Promise.race([closed, sleep(15_000).then(() => false)]), 'the connection was still open 15 s after its 431s');
            const back = await settledRss(d.proc.pid, rss0 + 64 * MiB, 10_000);
            t.diagnostic(`RSS +${Math.round((back - rss0) / MiB)} MiB after the connection was closed`);
            if (!SANITIZED) assert.ok(back < rss0 + 64 * MiB, `RSS stayed ${Math.round((back - rss0) / MiB)} MiB over its start`);
        } finally {
            sock.destroy();
        }
        expectStatus(await c.get('/v1/jobs?limit=1'), 200);
    });

    it('closes a connection at limits.maxUnsentBytesPerConnection', async () => {
        // 1 MiB instead of 8: two answers of ~0.6 MB pass it. The stall limit is far out, so only the share closes it.
        d = await startDaemon({
            config: standardConfig({ limits: '{ maxBodyBytes: 1048576, maxWaitSeconds: 5, maxUnsentBytesPerConnection: 1048576, unsentStall: 30m }' }),
        });
        const { c, keys } = tenant(d);
        const jobs = Array.from({ length: 500 }, () => ({ type: 'report.export', payload: { blob: 'z'.repeat(600) } }));
        expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
        const s = closedWindow(d.url);
        try {
            const closed = new Promise((resolve) => s.on('close', () => resolve(true)));
            openStreams(s, 10, { authorization: `Bearer ${keys.c}` });
            assert.ok(await Promise.race([closed, sleep(20_000).then(() => false)]), 'the connection was still open 20 s after its answers passed 1 MiB');
        } finally {
            s.destroy();
        }
        expectStatus(await c.get('/v1/jobs?limit=1'), 200);
    });
});
