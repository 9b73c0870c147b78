// Requests pipelined by a client that then leaves are dropped, not answered for nobody: connections that each
// send thousands of GET /v1/jobs?limit=500 without reading and close get only a handful answered (counted by
// /metrics under their route), the rest dropped (counted under "{client gone}", code 499), and /healthz keeps
// answering meanwhile.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { expectStatus, sleep } from './lib/jobs.mjs';

const SANITIZED = process.env.ACCEPTD_SANITIZED === '1';
const CONNS = 10;
const PIPELINED = 2000; // per connection: ~90 KB of requests

/** acceptd_http_requests_total for route and code, read from /metrics with an admin key. */
async function answered(a, route, code) {
    const text = expectStatus(await a.get('/metrics'), 200).text;
    const line = text.split('\n').find((l) => l.startsWith(`acceptd_http_requests_total{route="${route}",code="${code}"}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('pipelined requests of a client that has gone', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig({ limits: '{ maxBodyBytes: 1048576, maxWaitSeconds: 5 }' }) });
    });
    after(() => d?.stop());

    it('are dropped, and /healthz answers meanwhile', async (t) => {
        const { c, a, keys } = tenant(d);
        const jobs = Array.from({ length: 500 }, () => ({ type: 'report.export', payload: { x: 'y'.repeat(100) } }));
        expectStatus(await c.req('POST', '/v1/jobs:batch', { body: { jobs } }), 207);
        const before = await answered(a, '/v1/jobs', 200);
        const u = new URL(d.url);
        const one = `GET /v1/jobs?limit=500 HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${keys.c}\r\n\r\n`;
        const closed = [];
        for (let k = 0; k < CONNS; k++) {
            const s = net.connect({ host: u.hostname, port: Number(u.port) });
            s.on('error', () => {});
            s.pause(); // never reads an answer
            closed.push(new Promise((resolve) => s.write(one.repeat(PIPELINED), () => resolve(s.destroy()))));
        }
        await Promise.all(closed);
        // /healthz while the daemon would be rendering (before the fix, ~1 ms each, for tens of seconds).
        let worst = 0;
        for (const until = Date.now() + (SANITIZED ? 6000 : 4000); Date.now() < until; ) {
            const t = Date.now();
            expectStatus(await c.get('/healthz', { timeoutMs: 60_000 }), 200);
            worst = Math.max(worst, Date.now() - t);
            await sleep(50);
        }
        // Settled: the count of answers stops growing.
        let now = await answered(a, '/v1/jobs', 200);
        for (let prev = -1; prev !== now; ) {
            prev = now;
            await sleep(500);
            now = await answered(a, '/v1/jobs', 200);
        }
        const rendered = now - before;
        const dropped = await answered(a, '{client gone}', 499);
        assert.ok(rendered < (CONNS * PIPELINED) / 10, `${rendered} of ${CONNS * PIPELINED} pipelined requests were answered after their clients left`);
        assert.ok(dropped >= 1, `no request was counted as dropped (rendered ${rendered})`);
        t.diagnostic(`/healthz worst ${worst} ms`);
        assert.ok(worst < (SANITIZED ? 5000 : 2000), `/healthz took ${worst} ms while the pipelines were dropped`);
    });
});
