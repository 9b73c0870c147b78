// bench/sse_fanout.mjs - the client side of bench/sse.sh. Holds N /v1/events streams open against a running
// acceptd (open mode) and measures:
//   - daemon RSS growth per open stream (from /proc/<pid>/status),
//   - fan-out latency: from sending one job update to each of the N subscribers receiving it,
//   - the 304 poll rate (wrk, If-None-Match) with the N streams open, against the rate with none.
// Usage: node bench/sse_fanout.mjs URL PID STREAMS UPDATES h1|h2   (wrk options from BENCH_WRK)
//   h1: one HTTP/1.1 connection per stream, held and read by the C client bench/sse_h1.c (built by
//       bench/sse.sh, path in SSE_H1_CLIENT). 10,000 sockets read from JavaScript cost the client as much CPU
//       as the daemon spends sending, and the two share a 2-core machine.
//   h2: h2c with prior knowledge, 100 streams per connection (h2o's default concurrency limit), read here:
//       raw sockets and frames walked by hand, since Node's http2 module would make the client what is
//       measured.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';

const [url, pid, streamsArg = '10000', updatesArg = '30', proto = 'h1'] = process.argv.slice(2);
const N = Number(streamsArg);
const UPDATES = Number(updatesArg);
const PER_CONN = 100;
const WRK = (process.env.BENCH_WRK ?? '-t1 -c32 -d5s').split(/\s+/).filter(Boolean);
const u = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function rssKiB() {
    return Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
}

function request(method, path, body) {
    return new Promise((resolve, reject) => {
        const data = body === undefined ? undefined : JSON.stringify(body);
        const headers = data ? { 'content-type': 'application/json' } : {};
        const req = http.request({ host: u.hostname, port: u.port, method, path, agent, headers }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c) => {
                text += c;
            });
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : null }));
        });
        req.on('error', reject);
        req.end(data);
    });
}

function wrk(path, etag) {
    return new Promise((resolve, reject) => {
        const p = spawn('wrk', [...WRK, '-H', `If-None-Match: ${etag}`, `${url}${path}`]);
        let out = '';
        p.stdout.on('data', (c) => {
            out += c;
        });
        p.stderr.on('data', (c) => {
            out += c;
        });
        p.on('exit', () => {
            const m = /Requests\/sec:\s+([\d.]+)/.exec(out);
            if (!m) reject(new Error(`wrk: ${out}`));
            else resolve({ rps: Number(m[1]), bad: /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? '0' });
        });
    });
}

const pct = (xs, p) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

// ---- delivery bookkeeping: subscriber i saw the current update ----

let current = null; // {marker, t0, lat: Float64Array, count, done}
function deliver(i, bytes) {
    const c = current;
    if (c !== null && Number.isNaN(c.lat[i]) && bytes.includes(c.marker)) {
        c.lat[i] = performance.now() - c.t0;
        if (++c.count === N) c.done();
    }
}

// ---- HTTP/1.1: the C client, a line protocol on its stdin and stdout (see bench/sse_h1.c) ----

function startH1(jobId, leaseId) {
    const p = spawn(process.env.SSE_H1_CLIENT, [u.hostname, u.port, String(N), String(UPDATES), jobId, leaseId], {
        stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = [];
    let waiting = null;
    let out = '';
    p.stdout.setEncoding('utf8');
    p.stdout.on('data', (c) => {
        out += c;
        let nl;
        while ((nl = out.indexOf('\n')) >= 0) {
            lines.push(out.slice(0, nl).split(' '));
            out = out.slice(nl + 1);
        }
        if (waiting !== null && lines.length > 0) waiting();
    });
    const exited = new Promise((_, reject) => p.on('exit', (code) => reject(new Error(`sse_h1 exited with ${code}`))));
    const next = () => Promise.race([exited, new Promise((resolve) => {
        const take = () => {
            waiting = null;
            resolve(lines.shift());
        };
        if (lines.length > 0) take();
        else waiting = take;
    })]);
    return { next, go: () => p.stdin.write('go\n'), end: () => p.stdin.end() };
}

// ---- HTTP/2: frames by hand (RFC 9113); HPACK only to send one fixed request ----

function frame(type, flags, stream, payload) {
    const h = Buffer.alloc(9);
    h.writeUIntBE(payload.length, 0, 3);
    h[3] = type;
    h[4] = flags;
    h.writeUInt32BE(stream, 5);
    return Buffer.concat([h, payload]);
}

function hpackLiteral(index, value) {
    // Literal header field without indexing, indexed name (4-bit prefix), plain string (7-bit length prefix).
    const v = Buffer.from(value);
    const name = index < 15 ? [index] : [15, index - 15];
    if (v.length >= 127) throw new Error('header value too long for this encoder');
    return Buffer.concat([Buffer.from(name), Buffer.from([v.length]), v]);
}

function openH2(first, count) {
    return new Promise((resolve, reject) => {
        const s = net.connect({ host: u.hostname, port: Number(u.port) });
        let buf = Buffer.alloc(0);
        let opened = 0;
        const block = Buffer.concat([Buffer.from([0x82, 0x86]), hpackLiteral(4, '/v1/events'), hpackLiteral(1, u.host)]);
        s.on('connect', () => {
            const settings = Buffer.alloc(6);
            settings.writeUInt16BE(4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
            settings.writeUInt32BE(0x7fffffff, 2);
            const wu = Buffer.alloc(4);
            wu.writeUInt32BE(0x7fffffff - 65535, 0);
            const out = [Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(4, 0, 0, settings), frame(8, 0, 0, wu)];
            for (let k = 0; k < count; k++) out.push(frame(1, 0x5, 2 * k + 1, block)); // END_STREAM | END_HEADERS
            s.write(Buffer.concat(out));
        });
        s.on('data', (chunk) => {
            buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
            let off = 0;
            while (buf.length - off >= 9) {
                const len = buf.readUIntBE(off, 3);
                if (buf.length - off < 9 + len) break;
                const type = buf[off + 3];
                const flags = buf[off + 4];
                const stream = buf.readUInt32BE(off + 5) & 0x7fffffff;
                const payload = buf.subarray(off + 9, off + 9 + len);
                if (type === 0 && stream !== 0) deliver(first + (stream - 1) / 2, payload);
                else if (type === 1 && ++opened === count) resolve(s);
                else if (type === 4 && (flags & 1) === 0) s.write(frame(4, 1, 0, Buffer.alloc(0)));
                else if (type === 6 && (flags & 1) === 0) s.write(frame(6, 1, 0, payload));
                else if (type === 7) reject(new Error(`GOAWAY ${payload.toString('hex')}`));
                off += 9 + len;
            }
            buf = buf.subarray(off);
        });
        s.on('error', reject);
    });
}

// ---- the run ----

const sub = await request('POST', '/v1/jobs', { type: 'bench.sse', payload: { n: 1 } });
const jobPath = sub.headers.location;
const lease = await request('POST', '/v1/leases', { types: ['bench.sse'], max: 1, leaseSeconds: 3600, worker: 'bench' });
const leaseId = lease.json.leases[0].leaseId;
const jobId = lease.json.leases[0].job.id;
const etagNow = async () => (await request('GET', jobPath)).headers.etag;

const poll0 = await wrk(jobPath, await etagNow());
const rss0 = rssKiB();

const socks = [];
let h1 = null;
const t0open = performance.now();
if (proto === 'h2') {
    for (let i = 0; i < N; i += PER_CONN * 10) {
        const batch = [];
        for (let k = i; k < Math.min(N, i + PER_CONN * 10); k += PER_CONN) batch.push(openH2(k, Math.min(PER_CONN, N - k)));
        socks.push(...(await Promise.all(batch)));
    }
} else {
    h1 = startH1(jobId, leaseId);
    await h1.next(); // "open MS"
}
const openMs = performance.now() - t0open;
await new Promise((r) => setTimeout(r, 1000));
const rss1 = rssKiB();
// The poll rate with the streams open (and idle), measured right after the rate with none: the nearer the two
// runs, the less the host's own drift (other guests on a shared machine) weighs on their ratio.
const poll1 = await wrk(jobPath, await etagNow());

// Fan-out latency, in ms: of the last subscriber per update (p50, p99) and of every delivery (p50, p99).
let fan;
if (h1 !== null) {
    h1.go();
    const last = (await h1.next()).slice(1).map(Number);
    const each = (await h1.next()).slice(1).map(Number);
    fan = { last50: last[0], last99: last[1], each50: each[0], each99: each[1] };
} else {
    const lasts = [];
    const all = [];
    for (let k = 1; k <= UPDATES; k++) {
        const message = `fanout ${k}`;
        await new Promise((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`update ${k}: ${current.count} of ${N} subscribers got it within 10 s`)), 10_000);
            current = { marker: Buffer.from(`"message":"${message}"`), t0: performance.now(), lat: new Float64Array(N).fill(NaN), count: 0 };
            current.done = () => {
                clearTimeout(timer);
                resolve();
            };
            request('POST', `/v1/jobs/${jobId}:heartbeat`, { leaseId, progress: k % 100, message }).catch(reject);
        });
        lasts.push(Math.max(...current.lat));
        for (const x of current.lat) all.push(x);
        current = null;
        await new Promise((r) => setTimeout(r, 100));
    }
    fan = { last50: pct(lasts, 50), last99: pct(lasts, 99), each50: pct(all, 50), each99: pct(all, 99) };
}

for (const s of socks) s.destroy();
h1?.end();
agent.destroy();

const f = (x) => x.toFixed(1);
const how = proto === 'h2' ? `HTTP/2 (h2c), ${socks.length} connections` : `HTTP/1.1, ${N} connections (C client)`;
console.log(`[${proto}] streams   ${N} open over ${how}, in ${f(openMs / 1000)} s`);
console.log(`[${proto}] memory    daemon RSS ${rss0} -> ${rss1} KiB: ${f((rss1 - rss0) / N)} KiB per stream  (target <= 4 KiB)`);
console.log(`[${proto}] fan-out   update -> last of ${N} subscribers: p50 ${f(fan.last50)} ms, p99 ${f(fan.last99)} ms over ${UPDATES} updates  (target p99 <= 50 ms); each delivery: p50 ${f(fan.each50)} ms, p99 ${f(fan.each99)} ms`);
console.log(`[${proto}] poll-304  ${Math.round(poll0.rps)} req/s with no stream, ${Math.round(poll1.rps)} req/s with ${N} open: ${(poll1.rps / poll0.rps).toFixed(2)}x  (target >= 0.8x)${poll0.bad !== '0' || poll1.bad !== '0' ? `  non-2xx/3xx: ${poll0.bad}/${poll1.bad}` : ''}`);
if (process.env.BENCH_RESULTS) {
    fs.appendFileSync(process.env.BENCH_RESULTS, `sse-${proto}-rss-per-stream-kib\t${f((rss1 - rss0) / N)}\nsse-${proto}-fanout-p99-ms\t${f(fan.last99)}\nsse-${proto}-poll-ratio\t${(poll1.rps / poll0.rps).toFixed(2)}\n`);
}
