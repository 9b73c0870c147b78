#!/usr/bin/env node
// A receiver of acceptd's webhooks in Node, on the acceptd library (clients/node): verifyWebhook checks both
// signatures every delivery carries (docs/webhooks.md, "Headers and signatures") and the receiver answers 204
// only when both hold.
//
//   WEBHOOK_SECRET=whsec_... PORT=9000 node examples/node/webhook-receiver.mjs
//
// - webhook-signature (Standard Webhooks): HMAC-SHA256 keyed with the base64-decoded part of the secret
//   after `whsec_`, over `<webhook-id>.<webhook-timestamp>.<body>`, as `v1,<base64>`;
// - X-Webhook-Signature (Stripe style): HMAC-SHA256 keyed with the whole secret string, over `<t>.<body>`,
//   as `t=<unix seconds>,v1=<hex>`.
// During a secret rotation a header holds several v1 values; one match is enough. verifyWebhook compares in
// constant time, over the raw body bytes (never re-serialized JSON), and refuses a timestamp more than five
// minutes away, which bounds replays. A refused delivery gets 400 and is retried by acceptd.
//
// Prints `listening on URL`, then one line per request: `accepted EVENT_ID TYPE JOB_URL` or
// `rejected: REASON`. A real receiver would deduplicate on webhook-id (delivery is at least once).

import http from 'node:http';
// In your project: `npm install ./clients/node` and import from 'acceptd'.
import { verifyWebhook, WebhookVerificationError } from '../../clients/node/src/index.mjs';

const SECRET = process.env.WEBHOOK_SECRET;
const HOST = process.env.HOST ?? '127.0.0.1';
const PORT = Number(process.env.PORT ?? 0);
const MAX_BODY = 1 << 20;
if (!SECRET || !SECRET.startsWith('whsec_')) {
    console.error('webhook-receiver: set WEBHOOK_SECRET to the endpoint secret (whsec_...)');
    process.exit(2);
}

const server = http.createServer((req, res) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
        size += c.length;
        if (size > MAX_BODY) req.destroy();
        else chunks.push(c);
    });
    req.on('end', () => {
        let event;
        try {
            if (req.method !== 'POST') throw new WebhookVerificationError(`method ${req.method}`);
            event = verifyWebhook(req.headers, Buffer.concat(chunks), SECRET, { toleranceSeconds: 5 * 60 });
        } catch (e) {
            if (!(e instanceof WebhookVerificationError)) throw e;
            console.log(`rejected: ${e.message}`);
            res.writeHead(400, { 'content-type': 'text/plain' }).end(`${e.message}\n`);
            return;
        }
        console.log(`accepted ${event.id} ${event.type} ${event.data?.job ?? ''}`);
        res.writeHead(204).end();
    });
});
server.listen(PORT, HOST, () => {
    const a = server.address();
    console.log(`listening on http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
