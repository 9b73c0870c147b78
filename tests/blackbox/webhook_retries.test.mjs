// Webhook retries: 500 then 429 with Retry-After then 200 is delivered on the schedule (Retry-After honoured),
// a 3xx is a failure and never followed, 410 disables the endpoint, and an exhausted delivery becomes a dead
// letter that is listed and sent again on request, with the same event id and Idempotency-Key.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, sleep, submit, waitUntil } from './lib/jobs.mjs';
import { assertDelivery, createEndpoint, deliveries, startReceiver, stopClean, webhookConfig } from './lib/webhooks.mjs';

describe('webhook retries', () => {
    let d;
    let rx;
    before(async () => {
        // Attempts at 0, +1 s, +1 s, +1 s (each up to a tenth later), then a dead letter.
        d = await startDaemon({ config: webhookConfig({ schedule: ['0', '1', '1', '1'] }) });
        rx = await startReceiver();
    });
    after(async () => {
        await rx.close();
        await stopClean(d);
    });

    /** Requests at path; a per-path script of answers for the receiver. */
    const at = (p) => rx.requests.filter((q) => q.path === p);
    const scripts = new Map();
    before(() => {
        rx.respond = (req) => {
            const s = scripts.get(req.path);
            if (!s) return { status: 200 };
            return s.length > 1 ? s.shift() : s[0];
        };
    });

    it('500, then 429 with Retry-After, then 200: delivered on the schedule', async () => {
        const t = tenant(d);
        scripts.set('/flaky', [{ status: 500 }, { status: 429, headers: { 'retry-after': '2' } }, { status: 200 }]);
        const hook = await createEndpoint(t.c, `${rx.url}/flaky`, ['job.queued']);
        await submit(t.c);
        const got = await rx.waitFor(() => at('/flaky').length >= 3, { what: 'three attempts' });
        const tries = got.filter((q) => q.path === '/flaky');
        const evs = tries.map((q) => assertDelivery(q, hook.secret, { type: 'job.queued' }));
        assert.equal(new Set(evs.map((e) => e.id)).size, 1, 'every attempt carries the same event');
        assert.equal(new Set(tries.map((q) => q.headers['idempotency-key'])).size, 1);
        const gap1 = tries[1].at - tries[0].at;
        const gap2 = tries[2].at - tries[1].at;
        assert.ok(gap1 >= 950 && gap1 < 2500, `the 2nd attempt came ${gap1} ms after the 1st; the schedule says 1 s`);
        assert.ok(gap2 >= 1950 && gap2 < 3500, `the 3rd attempt came ${gap2} ms after the 2nd; Retry-After said 2 s`);
        await sleep(1500);
        assert.equal(at('/flaky').length, 3, 'nothing after the 200');
        const [dl] = await waitUntil(() => deliveries(t.c, hook.id), (l) => l[0]?.status === 'delivered', { what: 'delivered' });
        assert.equal(dl.attempts, 3);
        assert.equal(dl.lastStatus, 200);
        assert.equal(dl.lastError, null);
    });

    it('a 3xx is a failure and the redirect is not followed', async () => {
        const t = tenant(d);
        scripts.set('/moved', [{ status: 302, headers: { location: `${rx.url}/elsewhere` } }, { status: 200 }]);
        const hook = await createEndpoint(t.c, `${rx.url}/moved`, ['job.queued']);
        await submit(t.c);
        await rx.waitFor(() => at('/moved').length >= 2, { what: 'the retry after the 302' });
        const log = await waitUntil(() => deliveries(t.c, hook.id), (l) => l[0]?.status === 'delivered', { what: 'delivered' });
        assert.equal(log[0].attempts, 2);
        assert.equal(at('/elsewhere').length, 0, 'the redirect was followed');
        assertDelivery(at('/moved')[1], hook.secret);
    });

    it('410 Gone disables the endpoint; nothing more is sent until it is enabled again', async () => {
        const t = tenant(d);
        scripts.set('/gone', [{ status: 410 }]);
        const hook = await createEndpoint(t.c, `${rx.url}/gone`, ['job.queued']);
        await submit(t.c);
        await rx.waitFor(() => at('/gone').length >= 1);
        const h = await waitUntil(() => t.c.get(`/v1/webhooks/${hook.id}`), (r) => r.json?.enabled === false, { what: 'disabled' });
        assert.match(h.json.disabledReason, /410/);
        assert.match(h.json.disabledAt, /Z$/);
        const [dl] = await deliveries(t.c, hook.id);
        assert.equal(dl.status, 'dead');
        assert.equal(dl.attempts, 1);
        assert.equal(dl.lastStatus, 410);
        await submit(t.c);
        await sleep(1500);
        assert.equal(at('/gone').length, 1, 'a disabled endpoint was called');
        assert.equal((await deliveries(t.c, hook.id)).length, 1, 'a disabled endpoint got a delivery row');
        assertProblem(await t.c.post(`/v1/deliveries/${dl.id}:redeliver`, {}), 409, 'illegal-transition');

        scripts.set('/gone', [{ status: 200 }]);
        const en = expectStatus(await t.c.post(`/v1/webhooks/${hook.id}:enable`, {}), 200);
        assert.equal(en.json.enabled, true);
        assert.equal(en.json.secret, undefined);
        await submit(t.c);
        await rx.waitFor(() => at('/gone').length >= 2, { what: 'a delivery after enabling' });
    });

    it('an exhausted delivery is a dead letter, listed and sent again on request', async () => {
        const t = tenant(d);
        scripts.set('/down', [{ status: 500 }]);
        const hook = await createEndpoint(t.c, `${rx.url}/down`, ['job.queued']);
        const job = (await submit(t.c)).json;
        const dead = await waitUntil(() => deliveries(t.c, hook.id, 'dead'), (l) => l.length === 1, { timeoutMs: 15_000, what: 'a dead letter' });
        assert.equal(at('/down').length, 4, 'four attempts: the whole schedule');
        const dl = dead[0];
        assert.equal(dl.attempts, 4);
        assert.equal(dl.lastStatus, 500);
        assert.match(dl.lastError, /500/);
        assert.equal(dl.jobId, job.id);
        assert.equal(dl.nextAttemptAt, null);
        assert.equal((await deliveries(t.c, hook.id, 'pending')).length, 0);
        const firstId = at('/down')[0].headers['webhook-id'];

        scripts.set('/down', [{ status: 200 }]);
        const other = tenant(d);
        expectStatus(await other.c.post(`/v1/deliveries/${dl.id}:redeliver`, {}), 404);
        const res = expectStatus(await t.c.post(`/v1/deliveries/${dl.id}:redeliver`, {}), 202);
        assert.equal(res.json.status, 'pending');
        await rx.waitFor(() => at('/down').length >= 5, { what: 'the redelivery' });
        const again = at('/down')[4];
        assertDelivery(again, hook.secret, { type: 'job.queued' });
        assert.equal(again.headers['webhook-id'], firstId);
        assert.equal(again.headers['idempotency-key'], firstId);
        const [after] = await waitUntil(() => deliveries(t.c, hook.id), (l) => l[0]?.status === 'delivered', { what: 'delivered' });
        assert.equal(after.id, dl.id);
        assertProblem(await t.c.post('/v1/deliveries/dlv_nope:redeliver', {}), 404, 'not-found');
    });
});
