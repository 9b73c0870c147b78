// Webhooks: endpoints and their filters, the job's callbackUrl, both signature schemes checked with the npm
// packages receivers use (`stripe` constructEvent with the whole whsec_ string, `standardwebhooks`), secret
// rotation, and secrets that never show after creation (not in lists, logs or the store at rest).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { it, startDaemon, storeContents, tenant } from './lib/daemon.mjs';
import {
    assertProblem, complete, expectStatus, heartbeat, runToCancelled, runToFailure, runToSuccess, show, sleep, submit,
    submitAndLease,
} from './lib/jobs.mjs';
import { assertDelivery, createEndpoint, deliveries, startReceiver, stopClean, verifies, webhookConfig } from './lib/webhooks.mjs';

describe('webhooks', () => {
    let d;
    let rx;
    before(async () => {
        d = await startDaemon({ config: webhookConfig() });
        rx = await startReceiver();
    });
    after(async () => {
        await rx.close();
        await stopClean(d);
    });

    /** Requests that arrived at path on rx. */
    const at = (p) => rx.requests.filter((q) => q.path === p);

    it('delivers every subscribed event of a job, signed both ways, with a link to the job', async () => {
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/all`);
        assert.deepEqual(hook.events, ['job.queued', 'job.started', 'job.succeeded', 'job.failed', 'job.cancelled', 'job.partialSuccess']);
        assert.equal(hook.enabled, true);
        const job = await runToSuccess(t.c, t.w);
        const got = await rx.waitFor(() => at('/all').length >= 3, { what: 'three events' });
        const mine = got.filter((q) => q.path === '/all');
        const jobUrl = `${d.url}/v1/jobs/${job.id}`;
        const types = mine.map((q) => assertDelivery(q, hook.secret, { jobUrl }).type);
        assert.deepEqual(types.sort(), ['job.queued', 'job.started', 'job.succeeded'].sort());
        assert.equal(new Set(mine.map((q) => q.headers['webhook-id'])).size, 3, 'each event has its own id');
        // A signature made with any other secret does not verify: the check above can fail.
        const other = await createEndpoint(t.c, `${rx.url}/unused`);
        assert.equal(verifies(mine[0], other.secret), false);
        // The link is the job's absolute status URL.
        const res = expectStatus(await t.c.get(new URL(jobUrl).pathname), 200);
        assert.equal(res.json.status, 'succeeded');
        // The delivery log shows them delivered.
        const log = await deliveries(t.c, hook.id);
        assert.equal(log.length, 3);
        for (const dl of log) {
            assert.equal(dl.status, 'delivered', JSON.stringify(dl));
            assert.equal(dl.attempts, 1);
            assert.equal(dl.lastStatus, 200);
            assert.equal(dl.jobId, job.id);
        }
    });

    it('sends only the events an endpoint subscribed to; job.progress only on request', async () => {
        const t = tenant(d);
        const done = await createEndpoint(t.c, `${rx.url}/done`, ['job.succeeded', 'job.failed']);
        const prog = await createEndpoint(t.c, `${rx.url}/progress`, ['job.progress']);
        const l = await submitAndLease(t.c, t.w);
        expectStatus(await heartbeat(t.w, l.job.id, l.leaseId, { progress: 30 }), 200);
        expectStatus(await heartbeat(t.w, l.job.id, l.leaseId, { progress: 30 }), 200); // no change: no event
        expectStatus(await heartbeat(t.w, l.job.id, l.leaseId, { progress: 60 }), 200);
        await complete(t.w, l.job.id, l.leaseId);
        const failed = await runToFailure(t.c, t.w);
        await rx.waitFor(() => at('/done').length >= 2 && at('/progress').length >= 2, { what: 'filtered events' });
        await sleep(300);
        const doneTypes = at('/done').map((q) => assertDelivery(q, done.secret).type);
        assert.deepEqual(doneTypes.sort(), ['job.failed', 'job.succeeded']);
        assert.equal(JSON.parse(at('/done').find((q) => q.body.includes('job.failed')).body).data.job, `${d.url}/v1/jobs/${failed.id}`);
        const progTypes = at('/progress').map((q) => assertDelivery(q, prog.secret).type);
        assert.deepEqual(progTypes, ['job.progress', 'job.progress']);
    });

    it("signs a job's callbackUrl deliveries with the tenant's callback secret and sends the outcome only", async () => {
        const t = tenant(d);
        expectStatus(await t.c.get('/v1/webhooks/callback'), 404);
        const rot = expectStatus(await t.c.post('/v1/webhooks/callback:rotate', {}), 200);
        const secret = rot.json.secret;
        assert.match(secret, /^whsec_/);
        assert.equal(rot.json.id, 'callback');
        assert.equal(rot.json.url, null);
        const shown = expectStatus(await t.c.get('/v1/webhooks/callback'), 200).json;
        assert.equal(shown.secret, undefined);
        const cb = `${rx.url}/cb-${t.name}`;
        const ok = await runToSuccess(t.c, t.w, { type: 'report.export', payload: {}, callbackUrl: cb });
        const cancelled = await runToCancelled(t.c, { type: 'report.export', payload: {}, callbackUrl: cb });
        await rx.waitFor(() => at(`/cb-${t.name}`).length >= 2, { what: 'callbacks' });
        await sleep(300);
        const evs = at(`/cb-${t.name}`).map((q) => assertDelivery(q, secret));
        assert.deepEqual(evs.map((e) => `${e.type} ${e.data.job}`).sort(), [
            `job.cancelled ${d.url}/v1/jobs/${cancelled.id}`,
            `job.succeeded ${d.url}/v1/jobs/${ok.id}`,
        ].sort());
        const log = await deliveries(t.c, 'callback');
        assert.equal(log.length, 2);
        assert.ok(log.every((x) => x.webhookId === 'callback' && x.url === cb), JSON.stringify(log));
        assertProblem(await t.c.del('/v1/webhooks/callback'), 400, 'invalid-request');
    });

    it('rotation: the new secret signs at once and the old one keeps signing during the grace period', async () => {
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/rot-${t.name}`, ['job.queued']);
        await submit(t.c);
        await rx.waitFor(() => at(`/rot-${t.name}`).length >= 1);
        const before = at(`/rot-${t.name}`)[0];
        assertDelivery(before, hook.secret);
        assert.equal(before.headers['webhook-signature'].split(' ').length, 1);

        const res = expectStatus(await t.c.post(`/v1/webhooks/${hook.id}:rotate`, {}), 200);
        assert.equal(res.headers.get('cache-control'), 'no-store');
        const fresh = res.json.secret;
        assert.notEqual(fresh, hook.secret);
        assert.match(res.json.previousSecretExpiresAt, /Z$/);
        await submit(t.c);
        await rx.waitFor(() => at(`/rot-${t.name}`).length >= 2);
        const during = at(`/rot-${t.name}`)[1];
        // Both libraries verify it with either secret: receivers can switch at their own pace.
        assertDelivery(during, fresh);
        assertDelivery(during, hook.secret);
        assert.equal(during.headers['webhook-signature'].split(' ').length, 2, during.headers['webhook-signature']);
        assert.equal(during.headers['x-webhook-signature'].match(/v1=/g).length, 2);
        assert.equal(verifies(during, (await createEndpoint(t.c, `${rx.url}/x`)).secret), false);
    });

    it('never shows a secret again: not in lists, reads, logs or the store at rest', async () => {
        const t = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/secret`);
        const list = expectStatus(await t.c.get('/v1/webhooks'), 200);
        assert.ok(list.json.items.some((h) => h.id === hook.id), show(list));
        assert.ok(!list.text.includes('whsec_'), list.text);
        const one = expectStatus(await t.c.get(`/v1/webhooks/${hook.id}`), 200);
        assert.ok(!one.text.includes('whsec_'), one.text);
        assert.equal(one.json.url, `${rx.url}/secret`);
        await submit(t.c);
        await rx.waitFor(() => at('/secret').length >= 1);
        const raw = hook.secret.slice('whsec_'.length);
        // The data dir's files (the SQLite database among them) and, on PostgreSQL, a dump of the database,
        // which shows bytea in hex.
        const hex = [Buffer.from(raw).toString('hex'), Buffer.from(raw, 'base64').toString('hex')];
        for (const { name, bytes } of storeContents(d)) {
            assert.ok(!bytes.includes(raw), `${name} holds the secret in plain text`);
            assert.ok(!bytes.includes(raw.slice(0, 20)), `${name} holds part of the secret`);
            for (const h of hex) assert.ok(!bytes.includes(h.slice(0, 40)), `${name} holds the secret in hex`);
        }
        assert.ok(!d.stderr.includes(raw.slice(0, 20)), 'the log shows the secret');
        const key = fs.statSync(path.join(d.dataDir, 'webhook-secrets.key'));
        assert.equal(key.mode & 0o777, 0o600);
    });

    it('keeps endpoints per tenant; deleting one stops its deliveries', async () => {
        const t = tenant(d);
        const u = tenant(d);
        const hook = await createEndpoint(t.c, `${rx.url}/gone-${t.name}`, ['job.queued']);
        expectStatus(await u.c.get(`/v1/webhooks/${hook.id}`), 404);
        expectStatus(await u.c.del(`/v1/webhooks/${hook.id}`), 404);
        assert.equal(expectStatus(await u.c.get('/v1/webhooks'), 200).json.items.length, 0);
        assertProblem(await t.w.get('/v1/webhooks'), 403, 'forbidden');
        expectStatus(await t.c.del(`/v1/webhooks/${hook.id}`), 204);
        expectStatus(await t.c.get(`/v1/webhooks/${hook.id}`), 404);
        expectStatus(await t.c.del(`/v1/webhooks/${hook.id}`), 404);
        await submit(t.c);
        await sleep(500);
        assert.equal(at(`/gone-${t.name}`).length, 0);
    });

    it('validates an endpoint before storing it', async () => {
        const t = tenant(d);
        const bad = [
            [{ url: 'ftp://x.example/' }, '/url'],
            [{}, '/url'],
            [{ url: 42 }, '/url'],
            [{ url: `${rx.url}/v`, events: ['job.exploded'] }, '/events/0'],
            [{ url: `${rx.url}/v`, events: [] }, '/events'],
            [{ url: `${rx.url}/v`, events: 'job.queued' }, '/events'],
        ];
        for (const [body, pointer] of bad) {
            const p = assertProblem(await t.c.post('/v1/webhooks', body), 422, 'validation-failed');
            assert.ok(p.errors.some((e) => e.pointer === pointer), `${JSON.stringify(body)}: ${JSON.stringify(p.errors)}`);
        }
        assertProblem(await t.c.req('POST', '/v1/webhooks', { raw: '{nope' }), 400, 'malformed-json');
        assertProblem(await t.c.req('POST', '/v1/webhooks', { raw: '{}', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported-media-type');
        assert.equal(expectStatus(await t.c.get('/v1/webhooks'), 200).json.items.length, 0);
    });

    it('answers a 422 with more errors than its list can hold as JSON, listing those that fit whole', async () => {
        const t = tenant(d);
        // 900 bad event types fit the 4 KiB body; their errors (some 170 bytes each) do not fit the 64 KiB list.
        const p = assertProblem(await t.c.post('/v1/webhooks', { url: `${rx.url}/v`, events: Array(900).fill(1) }), 422,
            'validation-failed');
        assert.equal(p.detail, '900 fields failed validation; see errors');
        assert.ok(p.errors.length > 100 && p.errors.length < 900, `${p.errors.length} errors listed`);
        p.errors.forEach((e, i) => {
            assert.deepEqual(Object.keys(e), ['pointer', 'detail']);
            assert.equal(e.pointer, `/events/${i}`);
        });
        assert.equal(expectStatus(await t.c.get('/v1/webhooks'), 200).json.items.length, 0);
    });
});
