// Fairness between webhook endpoints: one endpoint has at most webhooks.perEndpoint deliveries in flight, so a
// slow one cannot take every delivery slot while the others wait for its requests to time out.

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { submit } from './lib/jobs.mjs';
import { createEndpoint, deliveries, startReceiver, stopClean, webhookConfig } from './lib/webhooks.mjs';

describe('webhook fairness', () => {
    it('a slow endpoint holds at most perEndpoint of the slots; another endpoint is served meanwhile', async () => {
        // 4 slots, 2 per endpoint, and a timeout far beyond the test: only the cap can free a slot.
        const d = await startDaemon({ config: webhookConfig({ timeoutSeconds: 60, extra: '  concurrency: 4\n  perEndpoint: 2\n' }) });
        let release;
        const held = new Promise((resolve) => {
            release = resolve;
        });
        let open = 0;
        let mostOpen = 0;
        const slow = await startReceiver({
            respond: async () => {
                mostOpen = Math.max(mostOpen, ++open);
                await held;
                open--;
                return { status: 200 };
            },
        });
        const fast = await startReceiver();
        try {
            const a = tenant(d);
            const b = tenant(d);
            await createEndpoint(a.c, `${slow.url}/slow`);
            await createEndpoint(b.c, `${fast.url}/fast`);
            for (let i = 0; i < 8; i++) await submit(a.c);
            await slow.waitFor((q) => q.length >= 2, { what: "the slow endpoint's first deliveries" });
            for (let i = 0; i < 3; i++) await submit(b.c);
            // Without the cap all 4 slots would be the slow endpoint's, and these would wait out its timeout.
            await fast.waitFor((q) => q.length >= 3, { timeoutMs: 15_000, what: 'deliveries to the other endpoint' });
            assert.equal(slow.requests.length, 2, 'the slow endpoint got more than its share of the slots');
            assert.equal(mostOpen, 2);
            // Once it answers, the slow endpoint gets the rest of its deliveries, still two at a time.
            release();
            await slow.waitFor((q) => q.length >= 8, { what: "the rest of the slow endpoint's deliveries" });
            assert.equal(mostOpen, 2);
        } finally {
            release();
            await slow.close();
            await fast.close();
            await stopClean(d);
        }
    });

    it('the read past a full endpoint does not send again what the same scan just started', async () => {
        // The slow endpoint is full (2 in flight, 1 waiting), so every scan that finds the other endpoint's
        // delivery also reads past the slow one's (at most every 100 ms: hence the pauses). That second read
        // still shows the delivery the first one started as due; it must not be sent twice.
        const d = await startDaemon({ config: webhookConfig({ timeoutSeconds: 60, extra: '  concurrency: 4\n  perEndpoint: 2\n' }) });
        let release;
        const held = new Promise((resolve) => {
            release = resolve;
        });
        const slow = await startReceiver({
            respond: async () => {
                await held;
                return { status: 200 };
            },
        });
        const fast = await startReceiver();
        try {
            const a = tenant(d);
            const b = tenant(d);
            await createEndpoint(a.c, `${slow.url}/slow`);
            const hook = await createEndpoint(b.c, `${fast.url}/fast`);
            for (let i = 0; i < 3; i++) await submit(a.c);
            await slow.waitFor((q) => q.length >= 2, { what: "the slow endpoint's first deliveries" });
            for (let i = 0; i < 5; i++) {
                await sleep(300);
                await submit(b.c);
            }
            await fast.waitFor((q) => q.length >= 5, { what: 'deliveries to the other endpoint' });
            // Both copies would leave in the same turn; once every outcome is committed, any copy has arrived.
            for (let i = 0; (await deliveries(b.c, hook.id, 'delivered')).length < 5; i++) {
                assert.ok(i < 600, 'the deliveries were not all recorded as delivered');
                await sleep(25);
            }
            const ids = fast.requests.map((q) => q.headers['webhook-id']);
            assert.equal(ids.length, new Set(ids).size, `${ids.length} requests for ${new Set(ids).size} events`);
        } finally {
            release();
            await slow.close();
            await fast.close();
            await stopClean(d);
        }
    });
});
