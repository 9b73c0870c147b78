// bench/soak.mjs - the load and the sampler of bench/soak.sh: a mixed, rate-bounded load on one running daemon
// for a while, with the daemon's memory and open files sampled, to see whether they level off. It looks for
// leaks, not throughput: every loop sleeps between its requests, so the daemon idles most of the time.
//
//   node bench/soak.mjs URL PID SECONDS SAMPLE_SECONDS
//
// The load, all on 127.0.0.1 (job type soak.work; keep-alive HTTP/1.1 through undici unless said):
//   submit     a job every 100 ms, one in five with an Idempotency-Key (each key used twice: the second
//              answer is the replay)
//   poll       every 100 ms a recent job: GET, then GET with its ETag (304, or 200 if it moved meanwhile;
//              410/404 once retention removed it)
//   workers    2 loops: lease (max 4, wait 5 s), heartbeat each job with progress, then complete it; one
//              job in 20 uploads a 256 KiB artifact in two parts first and completes with artifact: true,
//              one in 50 fails (retryable) and comes back later
//   downloads  each artifact: GET (the whole body, its size checked), GET with Range (206) and with its
//              ETag (304)
//   sse        6 /v1/events streams over HTTP/1.1, each closed by the client after 20-60 s and reopened with
//              Last-Event-ID; one HTTP/2 connection (h2c) with 4 such streams, closed and reopened every
//              60 s; and one job in 10 followed on /v1/jobs/{id}/events until the daemon ends the stream
//              after done (at most 40 at once)
//   webhooks   an endpoint for job.queued and job.succeeded pointing at a receiver in this process
//              (answers 204), so two deliveries per job
// Every SAMPLE_SECONDS one row: the daemon's VmRSS and VmHWM (/proc/PID/status), its open file descriptors
// (/proc/PID/fd), its threads, what its job cache counts against limits.cacheBytes (acceptd_cache_bytes on
// /metrics: a bounded cache, not a leak, while it fills), and what the load did since the last row. After SECONDS the load stops; one
// more row 5 s later (idle). Then the verdict for RSS and descriptors: the mean of the last third of the rows
// under load against the middle third (the first third is the warm-up: caches and pools filling).
// Prints "soak-... value" lines for bench_record at the end ("result NAME VALUE").

import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import crypto from 'node:crypto';
import { Pool } from 'undici';

const [url, pidArg, secondsArg, sampleArg] = process.argv.slice(2);
const PID = Number(pidArg);
const SECONDS = Number(secondsArg);
const SAMPLE = Number(sampleArg);
if (!url || !(PID > 0) || !(SECONDS > 0) || !(SAMPLE > 0)) {
    process.stderr.write('usage: node bench/soak.mjs URL PID SECONDS SAMPLE_SECONDS\n');
    process.exit(2);
}
const TYPE = 'soak.work';
const JSON_HEADERS = { 'content-type': 'application/json' };
const ART_PART = 128 * 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const base = new URL(url);

let running = true;
const count = {}; // what the load did since the last row
const total = {};
const bump = (k, n = 1) => {
    count[k] = (count[k] || 0) + n;
    total[k] = (total[k] || 0) + n;
};
const errors = [];
function error(what) {
    bump('err');
    if (errors.length < 20) {
        errors.push(what);
        process.stderr.write(`soak: ${what}\n`);
    }
}

const pool = new Pool(url, { connections: 16, keepAliveTimeout: 30_000 });

/** One request; resolves {status, headers, text}. */
async function req(method, path, { body, headers = {}, raw = false } = {}) {
    const res = await pool.request({
        method,
        path,
        headers: body !== undefined && !raw ? { ...JSON_HEADERS, ...headers } : headers,
        body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    });
    const buf = Buffer.from(await res.body.arrayBuffer());
    return { status: res.statusCode, headers: res.headers, text: buf.toString('utf8'), size: buf.length };
}

/** Runs fn until the load stops; an exception counts as an error and the loop goes on after a pause. */
async function loop(name, fn) {
    while (running) {
        try {
            await fn();
        } catch (e) {
            error(`${name}: ${e.message}`);
            await sleep(500);
        }
    }
}

// ---- webhook receiver ----

const receiver = http.createServer((rq, rs) => {
    rq.resume();
    rq.on('end', () => {
        bump('hook');
        rs.writeHead(204);
        rs.end();
    });
});
receiver.keepAliveTimeout = 30_000;
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
{
    const r = await req('POST', '/v1/webhooks', {
        body: { url: `http://127.0.0.1:${receiver.address().port}/hook`, events: ['job.queued', 'job.succeeded'] },
    });
    if (r.status !== 201) throw new Error(`create webhook endpoint: ${r.status} ${r.text}`);
}

// ---- clients: submit and poll ----

const recent = []; // ids of recent jobs, for the poller
let submitted = 0;
const followers = { n: 0 };

async function submitOne() {
    submitted++;
    const keyed = submitted % 5 === 0;
    const headers = keyed ? { 'idempotency-key': `soak-${crypto.randomUUID()}` } : {};
    const body = { type: TYPE, payload: { n: submitted, pad: 'x'.repeat(200) } };
    const r = await req('POST', '/v1/jobs', { body, headers });
    if (r.status !== 202) return error(`submit: ${r.status} ${r.text.slice(0, 200)}`);
    bump('submit');
    const id = JSON.parse(r.text).id;
    if (keyed) {
        const again = await req('POST', '/v1/jobs', { body, headers });
        if (again.status !== 202 || JSON.parse(again.text).id !== id) return error(`idempotent replay: ${again.status}`);
    }
    recent.push(id);
    if (recent.length > 200) recent.shift();
    if (submitted % 10 === 0 && followers.n < 40) follow(id);
}

async function pollOne() {
    if (recent.length === 0) return;
    const id = recent[Math.floor(Math.random() * recent.length)];
    const r = await req('GET', `/v1/jobs/${id}`);
    if (r.status === 410 || r.status === 404) return bump('gone');
    if (r.status !== 200 || !r.headers.etag) return error(`poll: ${r.status}`);
    const again = await req('GET', `/v1/jobs/${id}`, { headers: { 'if-none-match': r.headers.etag } });
    if (again.status === 304) bump('304');
    else if (again.status === 200 || again.status === 410) bump('poll');
    else error(`poll with ETag: ${again.status}`);
}

// ---- workers ----

async function uploadArtifact(id, leaseId) {
    const bytes = crypto.randomBytes(2 * ART_PART);
    for (let part = 0; part < 2; part++) {
        const headers = { 'lease-id': leaseId, 'content-type': 'application/octet-stream', 'upload-complete': part === 1 ? '?1' : '?0' };
        if (part > 0) headers['upload-offset'] = String(ART_PART);
        const r = await req('PUT', `/v1/jobs/${id}/result`, {
            body: bytes.subarray(part * ART_PART, (part + 1) * ART_PART),
            headers,
            raw: true,
        });
        if (r.status !== (part === 1 ? 200 : 204)) return error(`artifact part ${part}: ${r.status} ${r.text.slice(0, 200)}`), false;
    }
    return true;
}

async function download(id) {
    const r = await req('GET', `/v1/jobs/${id}/result`);
    if (r.status !== 200 || r.size !== 2 * ART_PART) return error(`download: ${r.status}, ${r.size} bytes`);
    const ranged = await req('GET', `/v1/jobs/${id}/result`, { headers: { range: 'bytes=0-99' } });
    if (ranged.status !== 206 || ranged.size !== 100) return error(`ranged download: ${ranged.status}, ${ranged.size} bytes`);
    const cached = await req('GET', `/v1/jobs/${id}/result`, { headers: { 'if-none-match': r.headers.etag } });
    if (cached.status !== 304) return error(`download with ETag: ${cached.status}`);
    bump('artifact');
}

let workedOn = 0;
async function work(w) {
    const r = await req('POST', '/v1/leases', { body: { types: [TYPE], max: 4, wait: 5, leaseSeconds: 30, worker: `soak-${w}` } });
    if (r.status === 204) return;
    if (r.status !== 200) return error(`lease: ${r.status} ${r.text.slice(0, 200)}`);
    for (const { job, leaseId } of JSON.parse(r.text).leases) {
        bump('lease');
        if (!running) return;
        const hb = await req('POST', `/v1/jobs/${job.id}:heartbeat`, { body: { leaseId, progress: 50, message: 'half way' } });
        if (hb.status !== 200) error(`heartbeat: ${hb.status} ${hb.text.slice(0, 200)}`);
        else bump('hb');
        await sleep(20);
        workedOn++;
        let report = { leaseId, result: { ok: true } };
        let verb = 'complete';
        if (workedOn % 50 === 0) {
            verb = 'fail';
            report = { leaseId, error: { type: 'about:blank', title: 'soak', status: 500 }, retryable: true };
        } else if (workedOn % 20 === 0) {
            if (!(await uploadArtifact(job.id, leaseId))) continue;
            report = { leaseId, artifact: true };
        }
        const done = await req('POST', `/v1/jobs/${job.id}:${verb}`, { body: report });
        if (done.status !== 200) {
            error(`${verb}: ${done.status} ${done.text.slice(0, 200)}`);
            continue;
        }
        bump(verb);
        if (report.artifact) await download(job.id);
    }
}

// ---- SSE ----

/** Reads an SSE body; calls onEvent(id) per event with an id; resolves when it ends. */
function readSse(stream, onEvent) {
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (c) => {
        buf += c;
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, end);
            buf = buf.slice(end + 2);
            const m = /^id: ?(\d+)$/m.exec(block);
            if (m) onEvent(m[1]);
        }
    });
    return new Promise((resolve) => {
        stream.on('end', resolve);
        stream.on('close', resolve);
        stream.on('error', resolve);
    });
}

/** One /v1/events stream over HTTP/1.1 held 20-60 s, then closed by us and reopened where it stopped. */
async function eventsH1() {
    let last = null;
    while (running) {
        const headers = last === null ? {} : { 'last-event-id': last };
        const rq = http.get({ host: base.hostname, port: base.port, path: '/v1/events', headers, agent: false });
        const res = await new Promise((resolve, reject) => rq.on('response', resolve).on('error', reject));
        if (res.statusCode !== 200) {
            res.resume();
            error(`/v1/events: ${res.statusCode}`);
            await sleep(1000);
            continue;
        }
        bump('sse-open');
        const hold = setTimeout(() => rq.destroy(), 20_000 + Math.random() * 40_000);
        const stop = setInterval(() => running || rq.destroy(), 500);
        await readSse(res, (id) => {
            last = id;
            bump('sse-ev');
        });
        clearTimeout(hold);
        clearInterval(stop);
    }
}

/** One h2c connection with 4 /v1/events streams, all closed and reopened every 60 s. */
async function eventsH2() {
    let last = null;
    while (running) {
        const session = http2.connect(url);
        session.on('error', () => {});
        const streams = [];
        for (let i = 0; i < 4; i++) {
            const s = session.request({ ':path': '/v1/events', ...(last === null ? {} : { 'last-event-id': last }) });
            s.on('response', (h) => (h[':status'] === 200 ? bump('sse-open') : error(`/v1/events over h2: ${h[':status']}`)));
            streams.push(readSse(s, (id) => {
                last = id;
                bump('sse-ev');
            }));
        }
        const end = Date.now() + 60_000;
        while (running && Date.now() < end) await sleep(500);
        session.destroy();
        await Promise.all(streams);
    }
}

/** Follows one job's stream until the daemon closes it after done. */
async function follow(id) {
    followers.n++;
    try {
        const rq = http.get({ host: base.hostname, port: base.port, path: `/v1/jobs/${id}/events`, agent: false });
        const res = await new Promise((resolve, reject) => rq.on('response', resolve).on('error', reject));
        if (res.statusCode !== 200) {
            res.resume();
            if (res.statusCode !== 410 && res.statusCode !== 404) error(`/v1/jobs/{id}/events: ${res.statusCode}`);
            return;
        }
        let done = false;
        const stop = setInterval(() => running || rq.destroy(), 500);
        let body = '';
        res.on('data', (c) => {
            body += c;
            if (body.includes('event: done')) done = true;
            if (body.length > 4096) body = body.slice(-64);
        });
        await readSse(res, () => bump('sse-ev'));
        clearInterval(stop);
        if (done) bump('follow');
        else if (running) error(`job stream of ${id} ended without done`);
    } catch (e) {
        error(`follow: ${e.message}`);
    } finally {
        followers.n--;
    }
}

// ---- sampling ----

function proc() {
    const status = fs.readFileSync(`/proc/${PID}/status`, 'utf8');
    const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)[1]);
    return { rss: field('VmRSS'), hwm: field('VmHWM'), threads: field('Threads'), fds: fs.readdirSync(`/proc/${PID}/fd`).length };
}

/** acceptd_cache_bytes from /metrics, in KiB (-1 if it cannot be read). */
async function cacheKiB() {
    try {
        const r = await req('GET', '/metrics');
        const m = /^acceptd_cache_bytes (\d+)$/m.exec(r.text);
        return m ? Math.round(Number(m[1]) / 1024) : -1;
    } catch {
        return -1;
    }
}

const COLS = ['submit', '304', 'lease', 'hb', 'complete', 'artifact', 'sse-ev', 'hook', 'err'];
const rows = [];
const t0 = Date.now();
async function row(label) {
    const cache = label === 'idle' ? -1 : await cacheKiB();
    const p = proc();
    const t = Math.round((Date.now() - t0) / 1000);
    rows.push({ t, label, cache, ...p });
    const cells = COLS.map((c) => String(count[c] || 0).padStart(c.length > 6 ? c.length : 7));
    for (const c of COLS) count[c] = 0;
    console.log(`${String(t).padStart(6)} ${label.padEnd(5)} ${String(p.rss).padStart(9)} ${String(p.hwm).padStart(9)} ${String(p.fds).padStart(5)} ${String(p.threads).padStart(7)} ${String(cache < 0 ? '-' : cache).padStart(10)} ${cells.join(' ')}`);
}

console.log(`${'t(s)'.padStart(6)} ${''.padEnd(5)} ${'RSS(KiB)'.padStart(9)} ${'HWM(KiB)'.padStart(9)} ${'fds'.padStart(5)} ${'threads'.padStart(7)} ${'cache(KiB)'.padStart(10)} ${COLS.map((c) => c.padStart(c.length > 6 ? c.length : 7)).join(' ')}`);
await row('start');

// ---- the run ----

const loops = [
    loop('submit', async () => {
        await submitOne();
        await sleep(100);
    }),
    loop('poll', async () => {
        await pollOne();
        await sleep(100);
    }),
    loop('worker', () => work(1)),
    loop('worker', () => work(2)),
    eventsH2(),
    ...Array.from({ length: 6 }, () => eventsH1()),
];
const sampler = setInterval(() => row('load'), SAMPLE * 1000);
await sleep(SECONDS * 1000);
clearInterval(sampler);
if (rows[rows.length - 1].t < SECONDS) await row('load');
running = false;
await Promise.race([Promise.allSettled(loops), sleep(10_000)]);
await pool.close();
await sleep(5000);
await row('idle');
receiver.close();
receiver.closeAllConnections();

// ---- the verdict ----

const loaded = rows.filter((r) => r.label === 'load');
const third = Math.floor(loaded.length / 3);
const mean = (xs, k) => xs.reduce((s, r) => s + r[k], 0) / xs.length;
console.log(`totals: ${Object.entries(total).map(([k, v]) => `${k} ${v}`).join(', ')}`);
if (third < 1) {
    console.log('verdict: too few rows under load for a verdict (run longer or sample more often)');
} else {
    const middle = loaded.slice(third, 2 * third);
    const last = loaded.slice(loaded.length - third);
    // Levels off: the last third's mean within 5% (RSS, at least 4 MiB) or 8 descriptors of the middle third's.
    const verdict = (name, key, slack) => {
        const m = mean(middle, key);
        const l = mean(last, key);
        const ok = l - m <= slack(m);
        // The least-squares slope over the last two thirds, per minute: a slow leak the means could hide.
        const xs = loaded.slice(third);
        const tx = mean(xs, 't');
        const ty = mean(xs, key);
        const sxy = xs.reduce((s, r) => s + (r.t - tx) * (r[key] - ty), 0);
        const sxx = xs.reduce((s, r) => s + (r.t - tx) ** 2, 0);
        const slope = sxx > 0 ? (sxy / sxx) * 60 : 0;
        console.log(`verdict ${name}: middle third mean ${m.toFixed(0)}, last third mean ${l.toFixed(0)} (${l >= m ? '+' : ''}${(l - m).toFixed(0)}, ${(((l - m) / m) * 100).toFixed(1)}%), slope over the last two thirds ${slope.toFixed(1)}/min: ${ok ? 'levels off' : 'STILL GROWING'}`);
        console.log(`result soak-${name}-middle ${m.toFixed(0)}`);
        console.log(`result soak-${name}-last ${l.toFixed(0)}`);
        return ok;
    };
    const a = verdict('rss-kib', 'rss', (m) => Math.max(0.05 * m, 4096));
    const b = verdict('fds', 'fds', () => 8);
    console.log(`verdict: ${a && b ? 'RSS and file descriptors level off' : 'a resource is still growing'}; errors ${total.err || 0}`);
}
console.log(`result soak-errors ${total.err || 0}`);
process.exit(0);
