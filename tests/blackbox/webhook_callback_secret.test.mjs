// The callback secret is one the tenant was shown: a job with a callbackUrl is refused (422
// callback-secret-missing) until POST /v1/webhooks/callback:rotate has made one and answered it, and every
// signature on every delivery a real receiver gets is made with a secret the test was given by the API before
// it submitted the job (a signature made with any other secret fails the test, even beside a good one).

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { assertProblem, expectStatus, fail, leaseOne, runToCancelled, runToSuccess, sleep, submit } from './lib/jobs.mjs';
import { deliveries, startReceiver, stopClean, verifyDelivery, webhookConfig } from './lib/webhooks.mjs';

const TYPE = 'report.export';

/**
 * Every signature req carries, in both headers, is one made with a secret of known (the whsec_ strings the API
 * answered), and there is at least one of each kind. Returns how many Standard Webhooks signatures it carries.
 */
function assertSignedOnlyWith(req, known) {
    const h = req.headers;
    const body = req.body;
    const standard = new Set(known.map((s) => crypto.createHmac('sha256', Buffer.from(s.slice('whsec_'.length), 'base64'))
        .update(`${h['webhook-id']}.${h['webhook-timestamp']}.${body}`).digest('base64')));
    const sigs = (h['webhook-signature'] ?? '').split(' ').filter(Boolean);
    assert.ok(sigs.length >= 1, `no webhook-signature: ${JSON.stringify(h)}`);
    for (const s of sigs) {
        assert.ok(s.startsWith('v1,'), s);
        assert.ok(standard.has(s.slice(3)), `a webhook-signature made with a secret the tenant was never shown: ${h['webhook-signature']}`);
    }
    const parts = (h['x-webhook-signature'] ?? '').split(',');
    const t = parts.find((p) => p.startsWith('t='))?.slice(2);
    assert.ok(t, `no t= in X-Webhook-Signature: ${h['x-webhook-signature']}`);
    const stripe = new Set(known.map((s) => crypto.createHmac('sha256', s).update(`${t}.${body}`).digest('hex')));
    const v1 = parts.filter((p) => p.startsWith('v1=')).map((p) => p.slice(3));
    assert.ok(v1.length >= 1, h['x-webhook-signature']);
    for (const s of v1) assert.ok(stripe.has(s), `an X-Webhook-Signature made with a secret the tenant was never shown: ${h['x-webhook-signature']}`);
    assert.equal(v1.length, sigs.length);
    return sigs.length;
}

describe('the callback secret', () => {
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

    const at = (p) => rx.requests.filter((q) => q.path === p);

    it('a job with a callbackUrl is refused until the tenant has been shown its callback secret; nothing is made meanwhile', async () => {
        const t = tenant(d);
        const cb = `${rx.url}/first-${t.name}`;
        const key = { 'idempotency-key': `cb-${t.name}` };
        const res = await t.c.req('POST', '/v1/jobs', { body: { type: TYPE, payload: {}, callbackUrl: cb }, headers: key });
        const p = assertProblem(res, 422, 'callback-secret-missing');
        assert.match(p.detail ?? '', /POST \/v1\/webhooks\/callback:rotate/, JSON.stringify(p));
        // The refusal made no job and no secret.
        assert.deepEqual(expectStatus(await t.c.get('/v1/jobs'), 200).json.items, []);
        assertProblem(await t.c.get('/v1/webhooks/callback'), 404, 'not-found');
        // A job without a callbackUrl needs none.
        await submit(t.c, { type: 'email.send', payload: {} });

        // The first rotate makes the secret and shows it; it keeps no earlier secret signing beside it.
        const rot = expectStatus(await t.c.post('/v1/webhooks/callback:rotate', {}), 200);
        const secret = rot.json.secret;
        assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
        assert.equal(rot.json.previousSecretExpiresAt, null, 'the first callback secret has no predecessor that signs');
        // The same submit (same Idempotency-Key: the refusal stored nothing under it) is now taken.
        const ok = expectStatus(await t.c.req('POST', '/v1/jobs', { body: { type: TYPE, payload: {}, callbackUrl: cb }, headers: key }), 202);
        const l = await leaseOne(t.w, TYPE, { expectId: ok.json.id });
        expectStatus(await t.w.post(`/v1/jobs/${ok.json.id}:complete`, { leaseId: l.leaseId, result: {} }), 200);
        const [q] = await rx.waitFor(() => at(`/first-${t.name}`).length >= 1, { what: 'the callback' }).then(() => at(`/first-${t.name}`));
        assert.equal(assertSignedOnlyWith(q, [secret]), 1, q.headers['webhook-signature']);
        assert.equal(verifyDelivery(q, secret).type, 'job.succeeded');
    });

    it('every callback delivery is signed only with secrets the tenant was shown, across a rotation', async () => {
        const t = tenant(d);
        const shown = [expectStatus(await t.c.post('/v1/webhooks/callback:rotate', {}), 200).json.secret];
        const cb = `${rx.url}/cb-${t.name}`;
        await runToSuccess(t.c, t.w, { type: TYPE, payload: {}, callbackUrl: cb });
        await runToCancelled(t.c, { type: TYPE, payload: {}, callbackUrl: cb });
        // A retry of a failed job keeps its callbackUrl: it is signed the same way.
        const f = (await submit(t.c, { type: TYPE, payload: {}, callbackUrl: cb, maxAttempts: 1 })).json.id;
        const lf = await leaseOne(t.w, TYPE, { expectId: f });
        await fail(t.w, f, lf.leaseId, { retryable: false });
        const retried = expectStatus(await t.c.post(`/v1/jobs/${f}:retry`, {}), 202).json.id;
        const lr = await leaseOne(t.w, TYPE, { expectId: retried });
        expectStatus(await t.w.post(`/v1/jobs/${retried}:complete`, { leaseId: lr.leaseId, result: {} }), 200);
        await rx.waitFor(() => at(`/cb-${t.name}`).length >= 4, { what: 'four callbacks' });
        // Rotated: the new secret and the old one (shown before) sign during the grace period.
        shown.push(expectStatus(await t.c.post('/v1/webhooks/callback:rotate', {}), 200).json.secret);
        await runToSuccess(t.c, t.w, { type: TYPE, payload: {}, callbackUrl: cb });
        await rx.waitFor(() => at(`/cb-${t.name}`).length >= 5, { what: 'the callback after the rotation' });
        await sleep(300); // anything more that comes is checked too
        const got = at(`/cb-${t.name}`);
        const counts = got.map((q) => assertSignedOnlyWith(q, shown));
        assert.deepEqual(counts.slice(0, 4), [1, 1, 1, 1], 'before the rotation one secret signs');
        assert.equal(counts[4], 2, 'during the grace period both shown secrets sign');
        const log = await deliveries(t.c, 'callback');
        assert.equal(log.length, got.length);
        assert.ok(log.every((x) => x.status === 'delivered'), JSON.stringify(log));
    });
});
