// Backpressure on /v1/events: a consumer that stops reading is cut off once its backlog passes the cap
// (a "retry:" hint, then the end of the stream) while a fast consumer of the same changes keeps receiving
// every one of them; the slow one resumes from its last id. The daemon's memory stays bounded meanwhile.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { expectStatus, heartbeat, leaseOne, sleep, submit } from './lib/jobs.mjs';
import { dechunk, holdsConnection, openSse, sseParser } from './lib/sse.mjs';

const SANITIZED = process.env.ACCEPTD_SANITIZED === '1';

function rssKiB(pid) {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m[1]);
}

/** A raw HTTP/1.1 client for GET path that can stop reading (pause) and start again. */
function rawStream(d, path, key) {
    const u = new URL(d.url);
    const sock = net.connect({ host: u.hostname, port: Number(u.port) });
    const st = { sock, data: Buffer.alloc(0), closed: false };
    st.opened = new Promise((resolve) => {
        sock.on('data', (c) => {
            st.data = Buffer.concat([st.data, c]);
            if (st.data.includes('\r\n\r\n')) resolve();
        });
    });
    sock.on('close', () => {
        st.closed = true;
    });
    sock.on('error', () => {});
    sock.write(`GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${key}\r\nAccept: text/event-stream\r\n\r\n`);
    /** Status, and the event stream so far: {events, retries, ended}. */
    st.parse = () => {
        const head = st.data.indexOf('\r\n\r\n');
        const status = Number(/^HTTP\/1\.1 (\d+)/.exec(st.data.toString('latin1'))?.[1] ?? 0);
        const { body, ended } = dechunk(st.data.subarray(head + 4));
        const out = { status, events: [], retries: [], ended };
        const p = sseParser({ onEvent: (e) => out.events.push(e), onRetry: (ms) => out.retries.push(ms) });
        p.feed(body.toString('utf8'));
        return out;
    };
    return st;
}

describe('backpressure on /v1/events', () => {
    let d;
    before(async () => {
        // A long heartbeat: the stalled-socket reaper (two heartbeats without progress) must not act during this test.
        d = await startDaemon({
            config: standardConfig({ limits: '{ maxBodyBytes: 65536, maxWaitSeconds: 5 }' }) + 'sse: { retry: 200ms, heartbeat: 120s }\n',
        });
    });
    after(() => d?.stop());

    it('cuts off a consumer that stopped reading while a fast one gets every change; the slow one resumes', async () => {
        const { c, w, keys } = tenant(d);
        // Many jobs and few rounds: one lease's heartbeats are written at most once a second (coalesced), so each
        // round after the first takes about a second.
        const JOBS = 100;
        const ROUNDS = SANITIZED ? 8 : 16; // changes per job; each change is a ~8 KB event (the payload)
        const payload = { blob: 'x'.repeat(8000) };
        const jobs = [];
        for (let i = 0; i < JOBS; i++) jobs.push((await submit(c, { type: 'report.export', payload })).json.id);
        const leases = [];
        for (const id of jobs) leases.push(await leaseOne(w, 'report.export', { expectId: id, leaseSeconds: 300 }));

        const fast = await openSse(`${d.url}/v1/events`, { headers: { authorization: `Bearer ${keys.c}` } });
        await fast.waitFor((x) => x.retries.length > 0);
        const slow = rawStream(d, '/v1/events', keys.c);
        await slow.opened;
        slow.sock.pause(); // stop reading: the kernel buffers fill, then the daemon's backlog
        const rss0 = rssKiB(d.proc.pid);

        for (let r = 1; r <= ROUNDS; r++) {
            await Promise.all(jobs.map((id, i) => heartbeat(w, id, leases[i].leaseId, { progress: r % 101, message: `round ${r}` }).then((res) => expectStatus(res, 200))));
        }
        const total = JOBS * ROUNDS;
        // The fast consumer got every change, promptly, and was never cut off.
        await fast.waitEvents(total, 20_000);
        assert.equal(fast.ended, false);
        assert.deepEqual(fast.retries, [200]);
        const rss1 = rssKiB(d.proc.pid);

        slow.sock.resume();
        const until = Date.now() + 20_000;
        while (!slow.parse().ended && !slow.closed && Date.now() < until) await sleep(50);
        const got = slow.parse();
        assert.equal(got.status, 200);
        assert.ok(got.ended, 'the slow stream did not end');
        assert.ok(got.events.length < total, `the slow consumer was not cut off: ${got.events.length} of ${total}`);
        assert.ok(got.retries.length === 2, `no retry: hint at the cut: ${got.retries}`);
        const lastId = got.events.at(-1)?.id ?? '0';
        // Nothing after the hint: the cut drops whole events, so the last id is exact.
        assert.match(slow.data.toString('utf8'), /retry: \d+\n\n\r\n0\r\n\r\n$/);

        // Resuming from the last id: every job changed since then, once, at its newest state.
        const resumed = await openSse(`${d.url}/v1/events`, { headers: { authorization: `Bearer ${keys.c}`, 'last-event-id': lastId } });
        await resumed.waitEvents(1);
        await sleep(500);
        const newest = new Map();
        for (const e of [...got.events, ...resumed.events]) newest.set(JSON.parse(e.data).id, JSON.parse(e.data));
        for (const id of jobs) {
            const j = expectStatus(await c.get(`/v1/jobs/${id}`), 200).json;
            assert.equal(newest.get(id)?.message, j.message, `job ${id}: the slow consumer's newest state is not the job's`);
        }
        const resumedIds = resumed.events.map((e) => JSON.parse(e.data).id);
        assert.equal(new Set(resumedIds).size, resumedIds.length, 'a job twice in the replay');
        assert.ok(Number(resumed.events[0].id) > Number(lastId));
        fast.close();
        resumed.close();
        slow.sock.destroy();

        if (!SANITIZED) {
            // ~13 MB of events went by; the stalled stream may hold its backlog cap, not what it missed.
            assert.ok(rss1 - rss0 < 8 * 1024, `daemon RSS grew by ${rss1 - rss0} KiB while a consumer stalled`);
        }
    });
});

describe('a stalled HTTP/1.1 stream', () => {
    it('has its connection shut down after two heartbeat periods without a completed write', async () => {
        const d = await startDaemon({
            config: standardConfig({ limits: '{ maxBodyBytes: 65536, maxWaitSeconds: 5 }' }) + 'sse: { heartbeat: 300ms, retry: 200ms }\n',
        });
        try {
            const { c, w, keys } = tenant(d);
            const id = (await submit(c, { type: 'report.export', payload: { blob: 'y'.repeat(60000) } })).json.id;
            const l = await leaseOne(w, 'report.export', { expectId: id, leaseSeconds: 300 });
            const slow = rawStream(d, '/v1/events', keys.c);
            await slow.opened;
            slow.sock.pause();
            const held = () => holdsConnection(d.proc.pid, Number(new URL(d.url).port), slow.sock.localPort);
            assert.ok(held(), 'cannot find the daemon\'s end of the connection');
            // ~60 KB per change: the socket's buffers fill and the daemon's write stays pending.
            for (let r = 0; r < 120; r++) expectStatus(await heartbeat(w, id, l.leaseId, { message: `m${r}` }), 200);
            const until = Date.now() + 5000;
            while (held()) {
                assert.ok(Date.now() < until, 'the stalled connection is still open after 5 s');
                await sleep(100);
            }
            assert.equal(slow.closed, false, 'the client closed, not the daemon');
            slow.sock.destroy();
        } finally {
            await d.stop();
        }
    });
});
