// bench/webhooks.mjs - the two node sides of bench/webhooks.sh. Prints "name value" lines.
//
//   node bench/webhooks.mjs receiver PORT [KEY CERT]
//       A webhook receiver on 127.0.0.1:PORT (node:http, keep-alive; with KEY and CERT, PEM files, node:http2 over
//       TLS, offering h2 and http/1.1 by ALPN): answers every POST 204 at once and counts
//       it. GET /stats answers {count, distinct, first, last, verified, bad, connections} (ms timestamps of the first and last
//       request); POST /reset clears the counts; POST /secret with the endpoint's secret as the body makes it
//       verify one request in 100 with the `standardwebhooks` and `stripe` packages (a bad signature counts in
//       bad). Runs until killed.
//   node bench/webhooks.mjs queue ACCEPTD_URL HOOK_URL JOBS SUBMITTERS SECRET_FILE
//       Creates an endpoint for HOOK_URL (job.queued only) and writes its secret to SECRET_FILE (for the
//       receiver), then submits JOBS jobs with SUBMITTERS in flight: one event, one delivery each. Prints
//       queued (jobs accepted).

import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { Pool } from 'undici';

const [mode, ...args] = process.argv.slice(2);
const HEADERS = { 'content-type': 'application/json' };

async function post(dispatcher, path, body, headers = HEADERS) {
    const res = await dispatcher.request({ method: 'POST', path, headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await res.body.text();
    return { status: res.statusCode, text };
}

function receiver(port, tls) {
    const stripe = new Stripe('sk_test_unused_no_network');
    let stats;
    let secret = null;
    const ids = new Set();
    const reset = () => {
        stats = { count: 0, distinct: 0, first: 0, last: 0, verified: 0, bad: 0, connections: 0 };
        ids.clear();
    };
    reset();
    const handler = (req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            if (req.method === 'GET' && req.url === '/stats') {
                stats.distinct = ids.size;
                res.writeHead(200, HEADERS);
                res.end(JSON.stringify(stats));
                return;
            }
            if (req.url === '/reset' || req.url === '/secret') {
                if (req.url === '/reset') reset();
                else secret = Buffer.concat(chunks).toString('utf8');
                res.writeHead(204);
                res.end();
                return;
            }
            const now = Date.now();
            if (stats.count === 0) stats.first = now;
            stats.last = now;
            stats.count++;
            const id = req.headers['webhook-id'];
            if (id !== undefined) ids.add(id);
            if (secret !== null && id !== undefined && stats.count % 100 === 1) {
                const body = Buffer.concat(chunks).toString('utf8');
                try {
                    new Webhook(secret).verify(body, req.headers);
                    stripe.webhooks.constructEvent(body, req.headers['x-webhook-signature'], secret);
                    stats.verified++;
                } catch {
                    stats.bad++;
                }
            }
            res.writeHead(204);
            res.end();
        });
    };
    // With a key and a certificate: https, offering h2 and http/1.1 by ALPN (wrk, and acceptd by default, speak
    // HTTP/1.1). Without: plain HTTP/1.1.
    const server = tls ? http2.createSecureServer({ key: fs.readFileSync(tls.key), cert: fs.readFileSync(tls.cert), allowHTTP1: true }, handler) : http.createServer(handler);
    server.keepAliveTimeout = 60_000;
    server.on('connection', () => {
        stats.connections++;
    });
    server.listen(port, '127.0.0.1', () => process.stdout.write(`receiver listening ${port}\n`));
}

async function queue(acceptdUrl, hookUrl, jobs, submitters, secretFile) {
    const pool = new Pool(acceptdUrl, { connections: submitters });
    const hook = await post(pool, '/v1/webhooks', { url: hookUrl, events: ['job.queued'] });
    if (hook.status !== 201) throw new Error(`create endpoint: ${hook.status} ${hook.text}`);
    fs.writeFileSync(secretFile, JSON.parse(hook.text).secret, { mode: 0o600 });
    let next = 0;
    let accepted = 0;
    await Promise.all(
        Array.from({ length: submitters }, async () => {
            while (next < jobs) {
                next++;
                const r = await post(pool, '/v1/jobs', { type: 'bench.webhook', payload: {} });
                if (r.status !== 202) throw new Error(`submit: ${r.status} ${r.text.slice(0, 200)}`);
                accepted++;
            }
        }),
    );
    await pool.close();
    process.stdout.write(`queued ${accepted}\n`);
}

if (mode === 'receiver' && (args.length === 1 || args.length === 3)) {
    receiver(Number(args[0]), args.length === 3 ? { key: args[1], cert: args[2] } : null);
} else if (mode === 'queue' && args.length === 5) {
    await queue(args[0], args[1], Number(args[2]), Number(args[3]), args[4]);
} else {
    process.stderr.write('usage: node bench/webhooks.mjs receiver PORT [KEY CERT] | queue ACCEPTD_URL HOOK_URL JOBS SUBMITTERS SECRET_FILE\n');
    process.exit(2);
}
