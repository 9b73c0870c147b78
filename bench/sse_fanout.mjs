// bench/sse_fanout.mjs - the driver of bench/sse.sh. Holds N /v1/events streams open against a running
// acceptd (open mode) and measures:
//   - daemon RSS growth per open stream (from /proc/<pid>/status),
//   - fan-out latency: from sending one job update to each of the N subscribers receiving it,
//   - the 304 poll rate (wrk, If-None-Match) with the N streams open, against the rate with none.
// Usage: node bench/sse_fanout.mjs URL PID STREAMS UPDATES h1|h2   (wrk options from BENCH_WRK)
// The streams are held and read by the C client bench/sse_client.c (built by bench/sse.sh, path in
// SSE_CLIENT): over HTTP/1.1 one connection per stream, over h2c 100 streams per connection (h2o's default
// concurrency limit). Read from JavaScript, 10,000 streams cost the client as much CPU as the daemon spends
// sending, and the two share a 2-core machine.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';

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

// ---- the C client, a line protocol on its stdin and stdout (see bench/sse_client.c) ----

function startClient(jobId, leaseId) {
    // Updates 1.1 s apart: one lease's heartbeats are written at most once a second (docs/protocol.md), and one
    // sooner would wait for its window, which is what the fan-out figure is not about.
    const p = spawn(process.env.SSE_CLIENT, [u.hostname, u.port, String(N), String(UPDATES), jobId, leaseId, proto], {
        stdio: ['pipe', 'pipe', 'inherit'],
        env: { ...process.env, SSE_CLIENT_GAP_MS: '1100' },
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
    const exited = new Promise((_, reject) => p.on('exit', (code) => reject(new Error(`sse_client exited with ${code}`))));
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

// ---- the run ----

const sub = await request('POST', '/v1/jobs', { type: 'bench.sse', payload: { n: 1 } });
const jobPath = sub.headers.location;
const lease = await request('POST', '/v1/leases', { types: ['bench.sse'], max: 1, leaseSeconds: 3600, worker: 'bench' });
const leaseId = lease.json.leases[0].leaseId;
const jobId = lease.json.leases[0].job.id;
const etagNow = async () => (await request('GET', jobPath)).headers.etag;

const poll0 = await wrk(jobPath, await etagNow());
const rss0 = rssKiB();

const t0open = performance.now();
const client = startClient(jobId, leaseId);
await client.next(); // "open MS"
const openMs = performance.now() - t0open;
await new Promise((r) => setTimeout(r, 1000));
const rss1 = rssKiB();
// The poll rate with the streams open (and idle), measured right after the rate with none: the nearer the two
// runs, the less the host's own drift (other guests on a shared machine) weighs on their ratio.
const poll1 = await wrk(jobPath, await etagNow());

// Fan-out latency, in ms: of the last subscriber per update (p50, p99) and of every delivery (p50, p99).
client.go();
const last = (await client.next()).slice(1).map(Number);
const each = (await client.next()).slice(1).map(Number);
const fan = { last50: last[0], last99: last[1], each50: each[0], each99: each[1] };
client.end();
agent.destroy();

const f = (x) => x.toFixed(1);
const how = proto === 'h2' ? `HTTP/2 (h2c), ${Math.ceil(N / PER_CONN)} connections (C client)` : `HTTP/1.1, ${N} connections (C client)`;
console.log(`[${proto}] streams   ${N} open over ${how}, in ${f(openMs / 1000)} s`);
console.log(`[${proto}] memory    daemon RSS ${rss0} -> ${rss1} KiB: ${f((rss1 - rss0) / N)} KiB per stream  (target <= 4 KiB)`);
console.log(`[${proto}] fan-out   update -> last of ${N} subscribers: p50 ${f(fan.last50)} ms, p99 ${f(fan.last99)} ms over ${UPDATES} updates  (target p99 <= 50 ms); each delivery: p50 ${f(fan.each50)} ms, p99 ${f(fan.each99)} ms`);
console.log(`[${proto}] poll-304  ${Math.round(poll0.rps)} req/s with no stream, ${Math.round(poll1.rps)} req/s with ${N} open: ${(poll1.rps / poll0.rps).toFixed(2)}x  (target >= 0.8x)${poll0.bad !== '0' || poll1.bad !== '0' ? `  non-2xx/3xx: ${poll0.bad}/${poll1.bad}` : ''}`);
if (process.env.BENCH_RESULTS) {
    fs.appendFileSync(process.env.BENCH_RESULTS, `sse-${proto}-rss-per-stream-kib\t${f((rss1 - rss0) / N)}\nsse-${proto}-fanout-p99-ms\t${f(fan.last99)}\nsse-${proto}-poll-ratio\t${(poll1.rps / poll0.rps).toFixed(2)}\n`);
}
