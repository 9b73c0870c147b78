// bench/bulk.mjs - a bulk cancel of many queued jobs and the submits that run beside it, for bench/bulk.sh.
//   node bulk.mjs ORIGIN JOBS CONNS SECONDS
// Fills the store with JOBS queued jobs of type bulk.victim (POST /v1/jobs:batch, 1,000 a request), then measures,
// on the same daemon:
//   alone   CONNS loops of POST /v1/jobs (type bench, undici Pool, pipelining 1) for SECONDS: each submit's latency
//   during  the same loops while POST /v1/jobs:cancel {"type": "bulk.victim"} runs: the latencies of the submits
//           sent from the cancel's request until its answer, and the time the cancel took
// and prints one line per figure: "name value". Every submit counted is durable (202 after its commit).
import { Pool } from 'undici';

const [origin, jobsArg, connsArg, secondsArg] = process.argv.slice(2);
const JOBS = Number(jobsArg);
const CONNS = Number(connsArg);
const SECONDS = Number(secondsArg);
const pool = new Pool(origin, { connections: CONNS + 2, pipelining: 1 });

async function post(path, body, headers = {})
{
    const res = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const text = await res.body.text();
    return { status: res.statusCode, text };
}

function percentile(sorted, p)
{
    if (sorted.length === 0)
        return NaN;
    return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

async function fill()
{
    const per = 1000;
    const body = JSON.stringify({ jobs: Array.from({ length: per }, (_, i) => ({ type: 'bulk.victim', payload: { i } })) });
    let left = JOBS;
    const one = async () => {
        while (left > 0) {
            left -= per;
            const r = await post('/v1/jobs:batch', body, { prefer: 'return=minimal' });
            if (r.status !== 207 || r.text.includes('"problem"'))
                throw new Error(`batch: ${r.status} ${r.text.slice(0, 300)}`);
        }
    };
    await Promise.all([one(), one()]);
}

// CONNS submit loops until stop(); each latency in ms with the time it was sent, into out.
function submitLoops(out)
{
    let stopping = false;
    let bad = 0;
    const body = '{"type":"bench","payload":{"n":1}}';
    const loop = async () => {
        while (!stopping) {
            const t0 = performance.now();
            const r = await post('/v1/jobs', body, { prefer: 'return=minimal' });
            out.push([t0, performance.now() - t0]);
            if (r.status !== 202)
                bad++;
        }
    };
    const running = Promise.all(Array.from({ length: CONNS }, loop));
    return { stop: async () => { stopping = true; await running; return bad; } };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const summary = (xs) => {
    const s = xs.map((x) => x[1]).sort((a, b) => a - b);
    return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] };
};

const t0 = performance.now();
await fill();
console.log(`fill_s ${((performance.now() - t0) / 1000).toFixed(1)}`);

const alone = [];
let loops = submitLoops(alone);
await sleep(500);
alone.length = 0;
await sleep(SECONDS * 1000);
let bad = await loops.stop();
const a = summary(alone);

const during = [];
loops = submitLoops(during);
await sleep(500);
const c0 = performance.now();
const cancel = await post('/v1/jobs:cancel', JSON.stringify({ type: 'bulk.victim' }));
const c1 = performance.now();
bad += await loops.stop();
if (cancel.status !== 200)
    throw new Error(`bulk cancel: ${cancel.status} ${cancel.text.slice(0, 300)}`);
const counts = JSON.parse(cancel.text);
const d = summary(during.filter(([at]) => at >= c0 && at <= c1));
console.log(`matched ${counts.matched}`);
console.log(`changed ${counts.changed}`);
console.log(`cancel_s ${((c1 - c0) / 1000).toFixed(2)}`);
console.log(`cancel_jobs_per_s ${Math.round(counts.changed / ((c1 - c0) / 1000))}`);
console.log(`alone_submits ${a.n}`);
console.log(`alone_submits_per_s ${Math.round(a.n / SECONDS)}`);
console.log(`alone_p50_ms ${a.p50.toFixed(2)}`);
console.log(`alone_p99_ms ${a.p99.toFixed(2)}`);
console.log(`alone_max_ms ${a.max.toFixed(2)}`);
console.log(`during_submits ${d.n}`);
console.log(`during_submits_per_s ${Math.round(d.n / ((c1 - c0) / 1000))}`);
console.log(`during_p50_ms ${d.p50.toFixed(2)}`);
console.log(`during_p99_ms ${d.p99.toFixed(2)}`);
console.log(`during_max_ms ${d.max.toFixed(2)}`);
console.log(`p99_ratio ${(d.p99 / a.p99).toFixed(2)}`);
console.log(`bad ${bad}`);
await pool.close();
