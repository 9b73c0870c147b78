// Webhook durability: the outbox is written with the job change, so kill -9 with 1,000 deliveries pending loses
// none (every one arrives after the restart), and a receiver that stops for a while gets every delivery once it
// is back. Counted by event id: each event arrives at least once, and a repeated one carries the same
// Idempotency-Key and webhook-id.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { sleep, submit } from './lib/jobs.mjs';
import { assertDelivery, createEndpoint, startReceiver, stopClean, webhookConfig } from './lib/webhooks.mjs';

const SANITIZED = process.env.ACCEPTD_SANITIZED === '1';
// Plenty of quick retries: the receiver is down for a while in each test.
const SCHEDULE = ['0', ...Array(30).fill('1')];

/** Submit n jobs, `loops` at a time; returns their ids. */
async function submitMany(c, n, loops = 16) {
    const ids = [];
    let next = 0;
    await Promise.all(
        Array.from({ length: loops }, async () => {
            while (next < n) {
                next++;
                ids.push((await submit(c)).json.id);
            }
        }),
    );
    return ids;
}

/**
 * Every job's job.queued event arrived at least once and verified; a repeated event id always came with the
 * same Idempotency-Key. Returns the number of repeats.
 */
function assertEveryEvent(requests, secret, d, ids) {
    const byEvent = new Map();
    for (const q of requests) {
        const ev = assertDelivery(q, secret, { type: 'job.queued' });
        assert.equal(q.headers['idempotency-key'], ev.id);
        const seen = byEvent.get(ev.id);
        if (seen) assert.equal(seen.data.job, ev.data.job, 'one event id, two different jobs');
        byEvent.set(ev.id, ev);
    }
    const jobs = new Set([...byEvent.values()].map((e) => e.data.job));
    const missing = ids.filter((id) => !jobs.has(`${d.url}/v1/jobs/${id}`));
    assert.equal(missing.length, 0, `${missing.length} of ${ids.length} jobs never had their event delivered, e.g. ${missing[0]}`);
    assert.equal(byEvent.size, ids.length, 'more events than jobs');
    return requests.length - byEvent.size;
}

describe('webhook durability', () => {
    const cleanup = [];
    after(async () => {
        for (const f of cleanup.reverse()) await f();
    });

    it('kill -9 with 1,000 deliveries pending: every one arrives after the restart', { timeout: 120_000 }, async () => {
        const d = await startDaemon({ config: webhookConfig({ schedule: SCHEDULE }) });
        cleanup.push(() => d.stop());
        // The receiver's port is reserved, then closed: every attempt before the crash is refused.
        const rx = await startReceiver();
        await rx.close();
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/hook`, ['job.queued']);
        const ids = await submitMany(t.c, 1000);
        assert.equal(ids.length, 1000);
        const oldUrl = d.url; // the events were written with links to this daemon's address
        await d.kill9();
        await rx.listen();
        cleanup.push(() => rx.close());
        await d.restart();
        await rx.waitFor((qs) => new Set(qs.map((q) => q.headers['webhook-id'])).size >= 1000, {
            timeoutMs: SANITIZED ? 60_000 : 30_000,
            what: '1,000 distinct events',
        });
        assertEveryEvent(rx.requests, hook.secret, { url: oldUrl }, ids);
    });

    it('a receiver that stops for a while gets every delivery once it is back', { timeout: 120_000 }, async () => {
        const d = await startDaemon({ config: webhookConfig({ schedule: SCHEDULE }) });
        cleanup.push(() => d.stop());
        const rx = await startReceiver();
        cleanup.push(() => rx.close());
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/hook`, ['job.queued']);
        const ids = await submitMany(t.c, 150);
        await rx.waitFor((qs) => qs.length >= 50, { what: 'the first deliveries' });
        await rx.close(); // connections in flight are cut: some of those deliveries will come again
        ids.push(...(await submitMany(t.c, 150)));
        await sleep(2000);
        const whileDown = rx.requests.length;
        await rx.listen();
        ids.push(...(await submitMany(t.c, 100)));
        await rx.waitFor((qs) => new Set(qs.map((q) => q.headers['webhook-id'])).size >= ids.length, {
            timeoutMs: SANITIZED ? 60_000 : 30_000,
            what: `${ids.length} distinct events`,
        });
        assert.ok(rx.requests.length > whileDown);
        assertEveryEvent(rx.requests, hook.secret, d, ids);
    });

    it('a delivery cut by a graceful stop is sent again after the restart', { timeout: 60_000 }, async () => {
        const d = await startDaemon({ config: webhookConfig({ schedule: SCHEDULE }) });
        cleanup.push(() => d.stop());
        const rx = await startReceiver({ respond: () => ({ status: 200, delayMs: 3000 }) });
        cleanup.push(() => rx.close());
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/slow`, ['job.queued']);
        const oldUrl = d.url;
        const ids = [(await submit(t.c)).json.id];
        await rx.waitFor((qs) => qs.length >= 1, { what: 'the delivery to be in flight' });
        const t0 = Date.now();
        await stopClean(d); // the answer has not come yet: the outcome is unknown, so the delivery stays pending
        assert.ok(Date.now() - t0 < 2500, `the stop waited ${Date.now() - t0} ms for the slow receiver`);
        rx.respond = () => ({ status: 200 });
        await d.restart();
        await rx.waitFor((qs) => qs.length >= 2, { what: 'the delivery again after the restart' });
        assert.equal(rx.requests[0].headers['webhook-id'], rx.requests[1].headers['webhook-id']);
        assertEveryEvent(rx.requests, hook.secret, { url: oldUrl }, ids);
    });
});
