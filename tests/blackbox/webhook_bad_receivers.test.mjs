// Bad webhook receivers do not starve a good one. Six endpoints answer badly, each its own way: an endless
// body, a 1 GiB body, headers that never end, a redirect to themselves, 200 after 9.9 s, and a connection
// closed in the middle of the answer. Beside them one good endpoint answers at once. The daemon must read at
// most webhooks.maxResponseBytes of an answer, give up on headers after webhooks.headersTimeoutSeconds, follow
// no redirect, count a cut answer as a failure, and give endpoints that keep failing fewer delivery slots, so
// that the good endpoint still gets its events quickly (docs/webhooks.md, "Bad receivers").
//
// Every receiver is a real Node server on 127.0.0.1. The figures are printed; the assertions are counts and a
// median bound far above what a working daemon shows (tens of milliseconds).

import { describe } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { sleep, submit } from './lib/jobs.mjs';
import { createEndpoint, deliveries, stopClean, webhookConfig } from './lib/webhooks.mjs';

const CHUNK = Buffer.alloc(64 * 1024, 'x');

/** Write chunks to res until total bytes (Infinity: forever) or until the connection is gone. */
async function pump(res, total) {
    let sent = 0;
    while (!res.destroyed && sent < total) {
        sent += CHUNK.length;
        if (!res.write(CHUNK)) {
            await new Promise((resolve) => {
                const done = () => {
                    res.off('drain', done);
                    res.off('close', done);
                    resolve();
                };
                res.on('drain', done);
                res.on('close', done);
            });
        }
    }
    if (!res.destroyed) res.end();
}

/** An HTTP receiver whose handler(req, res, url) answers each request once its body has arrived. */
async function httpReceiver(handler) {
    const r = { hits: 0, url: '' };
    const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
            r.hits++;
            handler(req, res, r.url);
        });
    });
    server.keepAliveTimeout = 30_000;
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    r.url = `http://127.0.0.1:${server.address().port}/hook`;
    r.close = () =>
        new Promise((resolve) => {
            server.close(resolve);
            server.closeAllConnections();
        });
    return r;
}

/** A TCP receiver that answers every connection's first bytes with answer(socket): raw HTTP, written by hand. */
async function rawReceiver(answer) {
    const r = { hits: 0, url: '' };
    const sockets = new Set();
    const server = net.createServer((sock) => {
        sockets.add(sock);
        sock.on('error', () => {});
        sock.on('close', () => sockets.delete(sock));
        sock.once('data', () => {
            r.hits++;
            answer(sock);
        });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    r.url = `http://127.0.0.1:${server.address().port}/hook`;
    r.close = () =>
        new Promise((resolve) => {
            server.close(resolve);
            for (const s of sockets) s.destroy();
        });
    return r;
}

function percentile(xs, p) {
    const s = [...xs].sort((a, b) => a - b);
    return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/**
 * hanging endpoints that never answer, beside a good one, with concurrency slots and perEndpoint each and a
 * headers timeout of 2 s. Once the first attempts have failed, each hanging endpoint may have at most maxEach
 * attempts waiting at once, all of them together at most maxAll, and the good endpoint gets its events at once.
 */
async function failingShare({ concurrency, perEndpoint, hanging, maxEach, maxAll }) {
    // Each attempt a hanging receiver saw: [name, from, to] (to: when the daemon gave up and closed it).
    const attempts = [];
    const hang = async (name) =>
        rawReceiver((sock) => {
            const a = [name, Date.now(), Infinity];
            attempts.push(a);
            sock.on('close', () => {
                a[2] = Date.now();
            });
        });
    const bad = {};
    for (let i = 0; i < hanging; i++) bad[`hang${i}`] = await hang(`hang${i}`);
    const arrived = new Map(); // job id -> ms
    const goodServer = http.createServer((req, res) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            const job = JSON.parse(Buffer.concat(chunks).toString('utf8')).data.job.split('/').pop();
            if (!arrived.has(job)) arrived.set(job, Date.now());
            res.end();
        });
    });
    await new Promise((resolve) => goodServer.listen(0, '127.0.0.1', resolve));
    const d = await startDaemon({
        config: webhookConfig({
            timeoutSeconds: 60,
            schedule: ['0', '300ms', '300ms', '300ms', '300ms', '300ms', '300ms', '300ms'],
            extra: `  concurrency: ${concurrency}\n  perEndpoint: ${perEndpoint}\n  headersTimeoutSeconds: 2\n`,
        }),
    });
    try {
        const b = tenant(d);
        const g = tenant(d);
        const hooks = {};
        for (const [name, r] of Object.entries(bad)) hooks[name] = await createEndpoint(b.c, r.url, ['job.queued']);
        await createEndpoint(g.c, `http://127.0.0.1:${goodServer.address().port}/hook`, ['job.queued']);
        for (let i = 0; i < 20; i++) await submit(b.c);
        // The first attempts hold every slot until their headers timeout (2 s) ends them as failures: wait until
        // each hanging endpoint has had one ended.
        while (Object.keys(bad).some((name) => !attempts.some(([n, , to]) => n === name && to !== Infinity))) await sleep(50);
        await sleep(500);
        const judgedAt = Date.now();
        const GOOD = 12;
        const sent = new Map();
        for (let i = 0; i < GOOD; i++) {
            sent.set((await submit(g.c)).json.id, Date.now());
            await sleep(200);
        }
        const lastSent = Date.now();
        while (arrived.size < GOOD && Date.now() - lastSent < 6000) await sleep(25);
        const lat = [...sent].filter(([id]) => arrived.has(id)).map(([id, at]) => arrived.get(id) - at);
        const p50 = percentile(lat, 50);
        // The most attempts waiting at once since judgedAt, per receiver and in all. The close of an attempt the
        // daemon gave up on may reach the receiver after the next attempt has begun: each attempt's last half
        // second is left out, so only a real overlap counts (one that lasts most of the 2 s timeout).
        const mostAt = (which) => {
            const edges = [];
            for (const [name, from, to] of attempts) {
                const end = Math.min(to, Date.now()) - 500;
                if (!which(name) || end <= judgedAt || end <= from) continue;
                edges.push([Math.max(from, judgedAt), 1], [end, -1]);
            }
            edges.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
            let cur = 0;
            let top = 0;
            for (const [, d] of edges) top = Math.max(top, (cur += d));
            return top;
        };
        const most = new Map(Object.keys(bad).map((name) => [name, mostAt((n) => n === name)]));
        const mostAll = mostAt(() => true);
        console.log(`good endpoint: ${lat.length} of ${GOOD} events, p50 ${p50} ms, max ${Math.max(...lat)} ms;` +
            ` failing endpoints' attempts ${Object.values(bad).map((r) => r.hits).join(', ')},` +
            ` most in flight at once since ${JSON.stringify(Object.fromEntries(most))}, ${mostAll} together`);
        assert.equal(lat.length, GOOD, `the good endpoint got ${lat.length} of ${GOOD} events`);
        // Without the shrinking shares each event waits for a hanging attempt's 2 s timeout, or more.
        assert.ok(p50 <= 1000, `the good endpoint's median delay was ${p50} ms`);
        for (const name of Object.keys(bad)) assert.ok((most.get(name) ?? 0) <= maxEach, `${name} had ${most.get(name)} transfers in flight at once`);
        assert.ok(mostAll <= maxAll, `the failing endpoints had ${mostAll} of the ${concurrency} slots`);
    } finally {
        await stopClean(d);
        for (const r of Object.values(bad)) await r.close();
        await new Promise((resolve) => {
            goodServer.close(resolve);
            goodServer.closeAllConnections();
        });
    }
}

describe('webhook bad receivers', () => {
    it('six bad endpoints do not starve a good one', { timeout: 90_000 }, async () => {
        const timers = new Set();
        const bad = {
            endlessBody: await httpReceiver((req, res) => {
                res.writeHead(200, { 'Content-Type': 'text/plain' });
                pump(res, Infinity);
            }),
            gibBody: await httpReceiver((req, res) => {
                res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': 2 ** 30 });
                pump(res, 2 ** 30);
            }),
            endlessHeaders: await rawReceiver((sock) => {
                sock.write('HTTP/1.1 200 OK\r\n');
                let n = 0;
                const t = setInterval(() => {
                    if (sock.destroyed) clearInterval(t);
                    else sock.write(`X-Wait-${n++}: ${'w'.repeat(32)}\r\n`);
                }, 100);
                timers.add(t);
                sock.on('close', () => clearInterval(t));
            }),
            redirectLoop: await httpReceiver((req, res, url) => {
                res.writeHead(302, { Location: url });
                res.end();
            }),
            slow: await httpReceiver((req, res) => {
                const t = setTimeout(() => {
                    if (!res.destroyed) res.end();
                }, 9_900);
                timers.add(t);
            }),
            closeMidAnswer: await rawReceiver((sock) => {
                sock.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nhalf an ans');
                sock.destroy();
            }),
        };
        const arrived = new Map(); // job id -> ms
        // The good endpoint answers 200 at once and notes when each job's event first arrived.
        const goodRecv = await (async () => {
            const server = http.createServer((req, res) => {
                const chunks = [];
                req.on('data', (c) => chunks.push(c));
                req.on('end', () => {
                    const at = Date.now();
                    try {
                        const job = JSON.parse(Buffer.concat(chunks).toString('utf8')).data.job.split('/').pop();
                        if (!arrived.has(job)) arrived.set(job, at);
                    } catch {
                        /* counted as missing */
                    }
                    res.end();
                });
            });
            server.keepAliveTimeout = 30_000;
            await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
            return {
                url: `http://127.0.0.1:${server.address().port}/hook`,
                close: () =>
                    new Promise((resolve) => {
                        server.close(resolve);
                        server.closeAllConnections();
                    }),
            };
        })();

        // The default timeout and slots (10 s, 64, 16 an endpoint); failed attempts come back every half second.
        const d = await startDaemon({
            config: webhookConfig({ timeoutSeconds: 10, schedule: ['0', '500ms', '500ms', '500ms', '500ms', '500ms', '500ms', '500ms'] }),
        });
        const started = Date.now();
        try {
            const b = tenant(d);
            const g = tenant(d);
            const hooks = {};
            for (const [name, r] of Object.entries(bad)) hooks[name] = await createEndpoint(b.c, r.url, ['job.queued']);
            await createEndpoint(g.c, goodRecv.url, ['job.queued']);

            // Enough bad deliveries to fill every bad endpoint's share of the slots, then a steady trickle.
            for (let i = 0; i < 40; i++) await submit(b.c);
            await sleep(1000);
            const sent = new Map(); // job id -> ms the submit was answered (the event is committed by then)
            const GOOD = 48;
            for (let i = 0; i < GOOD; i++) {
                const res = await submit(g.c);
                sent.set(res.json.id, Date.now());
                if (i % 2 === 0) await submit(b.c);
                await sleep(250);
            }
            // A few seconds' grace for the last ones, then the figures.
            const lastSent = Date.now();
            while (arrived.size < GOOD && Date.now() - lastSent < 4000) await sleep(50);
            const lat = [...sent].filter(([id]) => arrived.has(id)).map(([id, at]) => arrived.get(id) - at);
            const p50 = percentile(lat, 50);
            const max = lat.length ? Math.max(...lat) : NaN;
            const hits = Object.fromEntries(Object.entries(bad).map(([k, r]) => [k, r.hits]));
            const lastErrors = {};
            for (const [name, h] of Object.entries(hooks)) {
                const items = await deliveries(b.c, h.id);
                lastErrors[name] = items.find((x) => x.lastError)?.lastError ?? null;
            }
            console.log(`good endpoint: ${lat.length} of ${GOOD} events, p50 ${p50} ms, p90 ${percentile(lat, 90)} ms, max ${max} ms` +
                ` (run ${((Date.now() - started) / 1000).toFixed(1)} s)`);
            console.log(`bad endpoints' attempts: ${JSON.stringify(hits)}`);
            console.log(`bad endpoints' last errors: ${JSON.stringify(lastErrors, null, 1)}`);

            assert.ok(lat.length >= Math.ceil(0.9 * GOOD), `the good endpoint got ${lat.length} of ${GOOD} events`);
            assert.ok(p50 <= 2000, `the good endpoint's median delay was ${p50} ms`);
            // Each bad endpoint was tried, and its attempts failed for the reason it gave.
            for (const [name, r] of Object.entries(bad)) assert.ok(r.hits > 0, `${name} was never tried`);
            assert.match(lastErrors.endlessBody ?? '', /maxResponseBytes/);
            assert.match(lastErrors.gibBody ?? '', /maxResponseBytes/);
            assert.match(lastErrors.endlessHeaders ?? '', /headersTimeoutSeconds|maxResponseBytes/);
            assert.match(lastErrors.redirectLoop ?? '', /302.*redirects are not followed/);
            assert.match(lastErrors.slow ?? '', /headersTimeoutSeconds/);
            assert.ok(lastErrors.closeMidAnswer, 'a cut answer was not recorded as a failure');
            const goodHook = (await g.c.get('/v1/webhooks')).json.items[0];
            assert.equal((await deliveries(g.c, goodHook.id, 'dead')).length, 0);
        } finally {
            for (const t of timers) clearInterval(t);
            await stopClean(d);
            for (const r of Object.values(bad)) await r.close();
            await goodRecv.close();
        }
    });

    it('an endpoint that keeps failing is down to one slot', { timeout: 60_000 }, async () => {
        // 8 slots, 4 an endpoint, two endpoints that never answer: with fixed shares they hold 4 each for the
        // whole headers timeout, over and over; once their attempts have failed, one each.
        await failingShare({ concurrency: 8, perEndpoint: 4, hanging: 2, maxEach: 1, maxAll: 2 });
    });

    it('endpoints that keep failing never hold every slot', { timeout: 60_000 }, async () => {
        // 4 slots, 2 an endpoint, four endpoints that never answer: one slot each would still be all four. Together
        // they get three, so the good endpoint always finds one.
        await failingShare({ concurrency: 4, perEndpoint: 2, hanging: 4, maxEach: 1, maxAll: 3 });
    });
});
