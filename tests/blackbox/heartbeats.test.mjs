// Heartbeats coalesced per lease (docs/protocol.md, "Workers"): however fast a worker heartbeats, one lease's
// heartbeats are written at most once a second, so the job's event log (and the store) grows by at most one
// progress event a second; every heartbeat is answered 200 once a write holding it is durable, with its lease
// extension honoured, and the latest progress wins.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { complete, expectStatus, getJob, heartbeat, sleep, submitAndLease } from './lib/jobs.mjs';
import { openSse } from './lib/sse.mjs';

const WINDOW_MS = 1000; // the documented spacing of one lease's writes
const STORM_MS = 3000;
const CLIENTS = 16;

describe('heartbeats', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('a storm of heartbeats with changing progress on one lease writes at most one progress event a second', async () => {
        const { c, w, keys } = tenant(d);
        const l = await submitAndLease(c, w);
        const id = l.job.id;
        const t0 = Date.now();
        let sent = 0;
        let n = 0;
        const loop = async () => {
            while (Date.now() - t0 < STORM_MS) {
                const progress = n++ % 100;
                const before = Date.now();
                const res = expectStatus(await heartbeat(w, id, l.leaseId, { progress }), 200);
                sent++;
                // Honoured: the lease runs 30 s from when this heartbeat came, not from an earlier write.
                const until = Date.parse(res.json.leaseExpiresAt);
                assert.ok(until >= before + 30_000 - 2, `leaseExpiresAt ${res.json.leaseExpiresAt} < ${new Date(before + 30_000).toISOString()}`);
                assert.equal(res.json.cancelRequested, false);
            }
        };
        await Promise.all(Array.from({ length: CLIENTS }, loop));
        // The last heartbeat comes inside the window of the storm's last write: it waits for the window's end and is
        // written then, not dropped.
        const last = expectStatus(await heartbeat(w, id, l.leaseId, { progress: 77, message: 'almost' }), 200).json;
        assert.equal(last.job.progress, 77);
        const elapsed = Date.now() - t0;
        const job = await getJob(c, id);
        assert.equal(job.progress, 77);
        assert.equal(job.message, 'almost');
        assert.equal(job.status, 'running');
        await complete(w, id, l.leaseId);

        // The job's event log, replayed from its start: status (queued), status (running), progress..., done.
        const s = await openSse(`${d.url}/v1/jobs/${id}/events`, { headers: { authorization: `Bearer ${keys.c}` } });
        assert.equal(s.status, 200);
        await s.waitEnd(60_000);
        const kinds = s.events.map((e) => e.event);
        assert.equal(kinds.at(-1), 'done');
        const progress = s.events.filter((e) => e.event === 'progress');
        // One write at once, then at most one per window, and the last heartbeat's.
        const bound = Math.ceil(elapsed / WINDOW_MS) + 2;
        assert.ok(sent >= CLIENTS, `the storm sent ${sent} heartbeats`);
        assert.ok(progress.length <= bound, `${sent} heartbeats in ${elapsed} ms made ${progress.length} progress events (at most ${bound})`);
        assert.equal(JSON.parse(progress.at(-1).data).progress, 77);
    });

    it('a short lease is kept by heartbeats sent faster than the window', async () => {
        // With leaseSeconds 1 the writes are spaced by a quarter of it: a worker heartbeating every 100 ms keeps the
        // lease for longer than the lease itself, and never hears 409.
        const { c, w } = tenant(d);
        const l = await submitAndLease(c, w, undefined, { leaseSeconds: 1 });
        const t0 = Date.now();
        let i = 0;
        while (Date.now() - t0 < 2500) {
            expectStatus(await heartbeat(w, l.job.id, l.leaseId, { progress: i++ % 100, leaseSeconds: 1 }), 200);
            await new Promise((r) => setTimeout(r, 100));
        }
        const job = await getJob(c, l.job.id);
        assert.equal(job.status, 'running');
        assert.equal(job.attempt, 1);
        await complete(w, l.job.id, l.leaseId);
    });

    it('SIGTERM writes a heartbeat that waits for its window, and answers it', async () => {
        // Its own daemon: this one is stopped. The first heartbeat opens a window of a second; the second waits in
        // it when SIGTERM comes, and is written and answered by the drain rather than dropped with its connection.
        const d2 = await startDaemon({ config: standardConfig() });
        try {
            const { c, w } = tenant(d2);
            const l = await submitAndLease(c, w);
            expectStatus(await heartbeat(w, l.job.id, l.leaseId, { progress: 10 }), 200);
            const waiting = heartbeat(w, l.job.id, l.leaseId, { progress: 20 }).then(
                (res) => res,
                (e) => ({ status: 0, error: e.message }),
            );
            await sleep(300);
            await d2.stop();
            const res = await waiting;
            // 503 only when the heartbeat came after SIGTERM (a host so slow that 300 ms were not enough): refused,
            // never written. Never an answer lost.
            assert.ok(res.status === 200 || res.status === 503, `the waiting heartbeat got ${res.status} ${res.error ?? res.text}`);
            await d2.restart();
            const job = await getJob(c, l.job.id);
            assert.equal(job.progress, res.status === 200 ? 20 : 10);
            if (res.status === 200) assert.equal(res.json.job.progress, 20);
        } finally {
            await d2.stop();
        }
    });
});
