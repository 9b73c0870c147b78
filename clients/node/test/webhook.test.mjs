// verifyWebhook against real deliveries of the daemon: a job's callback (both signatures, Standard Webhooks
// and Stripe style, each checked alone too), a tampered body, a wrong secret, a stale timestamp, and a rotated
// secret (the delivery then carries two signatures per scheme; either secret verifies).

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Worker, verifyWebhook, WebhookVerificationError } from '../src/index.mjs';
import { startDaemon, tenant } from './helpers.mjs';
import { startReceiver, webhookConfig } from '../../../tests/blackbox/lib/webhooks.mjs';

const refused = (f, what) => assert.throws(f, (e) => e instanceof WebhookVerificationError, what);

describe('verifyWebhook', () => {
    let d;
    let rx;
    before(async () => {
        d = await startDaemon({ config: webhookConfig() });
        rx = await startReceiver();
    });
    after(async () => {
        await rx?.close();
        await d?.stop();
    });

    async function delivery(t, client) {
        const before = rx.requests.length;
        const job = await client.submit('email.send', { to: 'x' }, { callbackUrl: `${rx.url}/hook/${t.name}` });
        const w = new Worker(d.url, t.keys.w, { types: ['email.send'], waitSeconds: 1, handler: async () => ({ sent: true }) });
        w.start();
        await job.wait({ timeout: 30_000 });
        await w.stop();
        const reqs = await rx.waitFor((rs) => rs.slice(before).some((r) => r.path === `/hook/${t.name}`), { what: 'the callback' });
        return { job, req: reqs.slice(before).find((r) => r.path === `/hook/${t.name}`) };
    }

    it('verifies both signatures of a delivery and refuses a tampered body, a wrong secret and a stale timestamp', async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const { secret } = await (await client.transport.call('POST', '/v1/webhooks/callback:rotate')).json();
        const { job, req } = await delivery(t, client);
        assert.ok(req.headers['webhook-signature'] && req.headers['x-webhook-signature'], 'both signatures sent');

        const ev = verifyWebhook(req.headers, req.body, secret);
        assert.equal(ev.data.job.endsWith(`/v1/jobs/${job.id}`), true, req.body);
        verifyWebhook(new Headers(req.headers), Buffer.from(req.body), [secret]); // Headers and bytes too
        // Each scheme on its own when asked for alone; by default a delivery stripped of one is refused.
        const { 'x-webhook-signature': _st, ...standardOnly } = req.headers;
        const { 'webhook-signature': _sw, ...stripeOnly } = req.headers;
        verifyWebhook(standardOnly, req.body, secret, { schemes: ['standard'] });
        verifyWebhook(stripeOnly, req.body, secret, { schemes: ['stripe'] });
        refused(() => verifyWebhook(standardOnly, req.body, secret), 'no Stripe-style signature');
        refused(() => verifyWebhook(stripeOnly, req.body, secret), 'no Standard Webhooks signature');

        const tampered = req.body.replace('"job.', '"jOb.');
        assert.notEqual(tampered, req.body);
        refused(() => verifyWebhook(req.headers, tampered, secret), 'tampered body');
        refused(() => verifyWebhook(standardOnly, tampered, secret, { schemes: ['standard'] }), 'tampered body, Standard Webhooks');
        refused(() => verifyWebhook(stripeOnly, tampered, secret, { schemes: ['stripe'] }), 'tampered body, Stripe style');
        refused(() => verifyWebhook(req.headers, req.body, 'whsec_' + Buffer.alloc(32, 7).toString('base64')), 'wrong secret');
        refused(() => verifyWebhook({ ...stripeOnly, 'x-webhook-signature': stripeOnly['x-webhook-signature'].replace(/v1=(.)/, (_, c) => `v1=${c === '0' ? '1' : '0'}`) }, req.body, secret, { schemes: ['stripe'] }), 'a changed Stripe signature');
        refused(() => verifyWebhook({}, req.body, secret), 'no signature');
        const ts = Number(req.headers['webhook-timestamp']);
        refused(() => verifyWebhook(req.headers, req.body, secret, { nowSeconds: ts + 301 }), 'too old');
        verifyWebhook(req.headers, req.body, secret, { nowSeconds: ts + 299 });
        refused(() => verifyWebhook(req.headers, req.body, secret, { nowSeconds: ts + 61, toleranceSeconds: 60 }), 'past a tolerance of 60 s');
    });

    it('verifies with either secret during a rotation', async () => {
        const t = tenant(d);
        const client = new Client(d.url, t.keys.c);
        const { secret: old } = await (await client.transport.call('POST', '/v1/webhooks/callback:rotate')).json();
        const { secret: fresh } = await (await client.transport.call('POST', '/v1/webhooks/callback:rotate')).json();
        const { req } = await delivery(t, client);
        assert.equal(req.headers['webhook-signature'].split(' ').length, 2, req.headers['webhook-signature']);
        verifyWebhook(req.headers, req.body, old);
        verifyWebhook(req.headers, req.body, fresh);
        verifyWebhook(req.headers, req.body, ['whsec_' + Buffer.alloc(32, 1).toString('base64'), fresh]);
    });
});
