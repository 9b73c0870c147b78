// Many HTTP/1.1 event streams replaying a long change feed, half of them never reading, all closed at once:
// the daemon stays up and answers. Writes made outside libh2o's own loop (SSE heartbeats from our timers)
// used to leave a socket polled for writing with no write in flight, and libh2o 2.2.5 aborted the next time
// it became writable (evloop.c.h write_pending: "sock->super._cb.write != NULL"); see ad_http_run_pending.
// A short heartbeat makes those writes frequent, and a close storm makes more sockets ready than one poll
// returns; each round is one storm.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { expectStatus, sleep } from './lib/jobs.mjs';

const SANITIZED = process.env.ACCEPTD_SANITIZED === '1';
const CHANGES = SANITIZED ? 5000 : 20000;
const STREAMS = SANITIZED ? 1000 : 2000;
const ROUNDS = 3;
const HOLD_MS = 4000;

/** Open n streams resuming from the first change; even ones never read. Resolves the sockets. */
function openStreams(d, key, n) {
    const u = new URL(d.url);
    const socks = [];
    for (let i = 0; i < n; i++) {
        const s = net.connect({ host: u.hostname, port: Number(u.port) });
        s.on('error', () => {});
        s.bytes = 0;
        s.write(`GET /v1/events HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${key}\r\nLast-Event-ID: 0\r\nAccept: text/event-stream\r\n\r\n`);
        if (i % 2 === 0) s.pause();
        else s.on('data', (c) => (s.bytes += c.length));
        socks.push(s);
    }
    return socks;
}

describe('a storm of event streams closing at once', () => {
    let d;
    before(async () => {
        d = await startDaemon({
            config: standardConfig({ limits: '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }' }) + 'sse: { heartbeat: 500ms, retry: 200ms }\n',
        });
    });
    after(() => d?.stop());

    it('leaves the daemon up and answering', async () => {
        const { c, keys } = tenant(d);
        const jobs = Array.from({ length: 1000 }, () => ({ type: 'report.export', payload: {} }));
        for (let i = 0; i < CHANGES / 1000; i++) expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
        for (let round = 1; round <= ROUNDS; round++) {
            const socks = openStreams(d, keys.c, STREAMS);
            await sleep(HOLD_MS);
            const read = socks.reduce((n, s) => n + s.bytes, 0);
            for (const s of socks) s.destroy();
            await sleep(1000);
            assert.ok(d.alive, `round ${round}: the daemon died:\n${d.stderr.slice(-2000)}`);
            assert.ok(read > 0, `round ${round}: no stream received anything`);
            expectStatus(await c.get('/healthz'), 200);
        }
    });
});
