#!/usr/bin/env node
// A receiver of acceptd's webhooks in Node, with no dependencies: it checks both signatures every delivery
// carries (docs/webhooks.md, "Headers and signatures") and answers 204 only when both hold.
//
//   WEBHOOK_SECRET=whsec_... PORT=9000 node examples/node/webhook-receiver.mjs
//
// - webhook-signature (Standard Webhooks): HMAC-SHA256 keyed with the base64-decoded part of the secret
//   after `whsec_`, over `<webhook-id>.<webhook-timestamp>.<body>`, as `v1,<base64>`;
// - X-Webhook-Signature (Stripe style): HMAC-SHA256 keyed with the whole secret string, over `<t>.<body>`,
//   as `t=<unix seconds>,v1=<hex>`.
// During a secret rotation a header holds several v1 values; one match is enough. Signatures are compared in
// constant time, over the raw body bytes (never re-serialized JSON), and a timestamp more than five minutes
// away is refused, which bounds replays. A refused delivery gets 400 and is retried by acceptd.
//
// Prints `listening on URL`, then one line per request: `accepted EVENT_ID TYPE JOB_URL` or
// `rejected: REASON`. A real receiver would deduplicate on webhook-id (delivery is at least once).

import crypto from 'node:crypto';
import http from 'node:http';

const SECRET = process.env.WEBHOOK_SECRET;
const HOST = process.env.HOST ?? '127.0.0.1';
const PORT = Number(process.env.PORT ?? 0);
const TOLERANCE_S = 5 * 60;
const MAX_BODY = 1 << 20;
if (!SECRET || !SECRET.startsWith('whsec_')) {
    console.error('webhook-receiver: set WEBHOOK_SECRET to the endpoint secret (whsec_...)');
    process.exit(2);
}

const hmac = (key, msg, enc) => crypto.createHmac('sha256', key).update(msg).digest(enc);

/** Constant-time comparison of two strings (a length mismatch leaks only the length). */
function safeEqual(a, b) {
    const x = Buffer.from(a);
    const y = Buffer.from(b);
    return x.length === y.length && crypto.timingSafeEqual(x, y);
}

function fresh(ts) {
    const t = Number(ts);
    return /^\d+$/.test(ts) && Math.abs(Date.now() / 1000 - t) <= TOLERANCE_S;
}

/** Standard Webhooks 1.0. Returns null when it verifies, else why not. */
function checkStandard(headers, body) {
    const id = headers['webhook-id'];
    const ts = headers['webhook-timestamp'];
    const sig = headers['webhook-signature'];
    if (!id || !ts || !sig) return 'webhook-id, webhook-timestamp or webhook-signature missing';
    if (!fresh(ts)) return 'webhook-timestamp too far from now';
    const key = Buffer.from(SECRET.slice('whsec_'.length), 'base64');
    const expected = hmac(key, Buffer.concat([Buffer.from(`${id}.${ts}.`), body]), 'base64');
    const ok = sig.split(' ').some((s) => s.startsWith('v1,') && safeEqual(s.slice(3), expected));
    return ok ? null : 'webhook-signature does not match';
}

/** The Stripe-style X-Webhook-Signature. Returns null when it verifies, else why not. */
function checkStripeStyle(headers, body) {
    const h = headers['x-webhook-signature'];
    if (!h) return 'X-Webhook-Signature missing';
    const parts = h.split(',').map((p) => p.split('='));
    const t = parts.find(([k]) => k === 't')?.[1];
    if (!t || !fresh(t)) return 'X-Webhook-Signature: t missing or too far from now';
    const expected = hmac(SECRET, Buffer.concat([Buffer.from(`${t}.`), body]), 'hex');
    const ok = parts.some(([k, v]) => k === 'v1' && v !== undefined && safeEqual(v, expected));
    return ok ? null : 'X-Webhook-Signature does not match';
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
        const body = Buffer.concat(chunks);
        const why = req.method !== 'POST' ? `method ${req.method}` : (checkStandard(req.headers, body) ?? checkStripeStyle(req.headers, body));
        if (why) {
            console.log(`rejected: ${why}`);
            res.writeHead(400, { 'content-type': 'text/plain' }).end(`${why}\n`);
            return;
        }
        // Only now is the body trusted enough to parse.
        const event = JSON.parse(body.toString('utf8'));
        console.log(`accepted ${event.id} ${event.type} ${event.data?.job ?? ''}`);
        res.writeHead(204).end();
    });
});
server.listen(PORT, HOST, () => {
    const a = server.address();
    console.log(`listening on http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
