// webhook.mjs - verifyWebhook checks a delivery of acceptd against one or more secrets, for both signatures the
// daemon puts on every delivery (docs/webhooks.md): Standard Webhooks (`webhook-id`, `webhook-timestamp`,
// `webhook-signature: v1,<base64>`, HMAC-SHA256 keyed by the base64-decoded part of the secret after `whsec_`,
// over `<id>.<timestamp>.<body>`) and Stripe style (`X-Webhook-Signature: t=<ts>,v1=<hex>`, keyed by the whole
// secret string, over `<t>.<body>`). Each scheme asked for (both by default, as the Python library's "both")
// must be present and verify with one of the secrets (during a rotation a delivery carries one signature per
// secret), and its timestamp must be within the tolerance: a delivery stripped of one signature is refused.
// Signatures are compared in constant time.

import { createHmac, timingSafeEqual } from 'node:crypto';

export class WebhookVerificationError extends Error {
    constructor(message) {
        super(message);
        this.name = 'WebhookVerificationError';
    }
}

function header(headers, name) {
    if (typeof headers?.get === 'function') return headers.get(name);
    for (const [k, v] of Object.entries(headers ?? {})) if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(', ') : v;
    return null;
}

function safeEqual(a, b) {
    return a.length === b.length && timingSafeEqual(a, b);
}

function checkTime(ts, tolerance, now) {
    if (!/^\d+$/.test(ts ?? '')) throw new WebhookVerificationError('webhook timestamp missing or not a number');
    if (Math.abs(now - Number(ts)) > tolerance) throw new WebhookVerificationError('webhook timestamp outside the tolerance');
}

/**
 * Verify a delivery: headers (a Headers or a plain object, as node:http gives them), body (the raw bytes or
 * text, before any JSON parsing), secrets (one `whsec_...` string or a list). Resolves nothing: returns the
 * parsed event, or throws WebhookVerificationError. toleranceSeconds (300) bounds the timestamp's distance from
 * now (nowSeconds, for tests); schemes (['standard', 'stripe']) lists the signatures that must be there and hold
 * (one of them alone, for a proxy that drops the other header).
 */
export function verifyWebhook(headers, body, secrets, { toleranceSeconds = 300, nowSeconds = Date.now() / 1000, schemes = ['standard', 'stripe'] } = {}) {
    const list = (Array.isArray(secrets) ? secrets : [secrets]).filter((s) => typeof s === 'string' && s.length > 0);
    if (list.length === 0) throw new TypeError('acceptd: verifyWebhook needs a secret');
    const raw = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer ?? body, body.byteOffset ?? 0, body.byteLength ?? body.length);
    if (!schemes.some((x) => x === 'standard' || x === 'stripe')) throw new TypeError('acceptd: verifyWebhook schemes: standard, stripe or both');

    const sw = header(headers, 'webhook-signature');
    if (schemes.includes('standard')) {
        if (sw == null) throw new WebhookVerificationError('webhook-signature missing');
        const id = header(headers, 'webhook-id');
        const ts = header(headers, 'webhook-timestamp');
        if (!id) throw new WebhookVerificationError('webhook-id missing');
        checkTime(ts, toleranceSeconds, nowSeconds);
        const given = sw.split(' ').filter((s) => s.startsWith('v1,')).map((s) => Buffer.from(s.slice(3), 'base64'));
        const ok = list.some((secret) => {
            const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
            const mac = createHmac('sha256', key).update(`${id}.${ts}.`).update(raw).digest();
            return given.some((g) => safeEqual(g, mac));
        });
        if (!ok) throw new WebhookVerificationError('webhook-signature does not verify');
    }

    const st = header(headers, 'x-webhook-signature');
    if (schemes.includes('stripe')) {
        if (st == null) throw new WebhookVerificationError('X-Webhook-Signature missing');
        const parts = st.split(',').map((p) => p.trim().split('='));
        const t = parts.find(([k]) => k === 't')?.[1];
        checkTime(t, toleranceSeconds, nowSeconds);
        const given = parts.filter(([k, v]) => k === 'v1' && /^[0-9a-f]+$/i.test(v ?? '')).map(([, v]) => Buffer.from(v, 'hex'));
        const ok = list.some((secret) => {
            const mac = createHmac('sha256', secret).update(`${t}.`).update(raw).digest();
            return given.some((g) => safeEqual(g, mac));
        });
        if (!ok) throw new WebhookVerificationError('X-Webhook-Signature does not verify');
    }

    try {
        return JSON.parse(raw.toString('utf8'));
    } catch {
        throw new WebhookVerificationError('the webhook body is not JSON');
    }
}
