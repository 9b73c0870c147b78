// bench/schedules.mjs - many schedules on one daemon, for bench/schedules.sh.
//   node schedules.mjs ORIGIN PID TOTAL BURST
// Creates TOTAL schedules, each `every: 1m` (POST /v1/schedules, 64 at a time): BURST of them start at the same
// second T0 (overlap allow, job type bench.burst), the others spread one per second over the 30 seconds from T0 + 30 s
// (job type bench.bg), so that each minute BURST fire in one second, the rest in the minute's second half, and
// nothing between T0 + 1 s and T0 + 30 s. Then it measures:
//   create       the creates' rate
//   idle_cpu     the daemon's CPU (utime + stime of /proc/PID/stat) over the quiet seconds before T0, with every
//                schedule stored and none due
//   burst        once the BURST jobs of T0 are stored: each one's createdAt - schedule.fireTime, p50, p99 and max,
//                and when the last was stored
//   gap_cpu      the daemon's CPU over the rest of the quiet seconds after the burst, until T0 + 28 s
// and prints one line per figure: "name value".
import fs from 'node:fs';
import { Pool } from 'undici';

const [origin, pidArg, totalArg, burstArg] = process.argv.slice(2);
const PID = Number(pidArg);
const TOTAL = Number(totalArg);
const BURST = Number(burstArg);
const pool = new Pool(origin, { connections: 66, pipelining: 1 });
const TICK = 100; // clock ticks per second (USER_HZ)

async function req(method, path, body) {
    const res = await pool.request({ path, method, headers: body ? { 'content-type': 'application/json' } : {}, body });
    const text = await res.body.text();
    return { status: res.statusCode, text };
}

function cpuSeconds() {
    const f = fs.readFileSync(`/proc/${PID}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / TICK; // utime, stime (fields 14 and 15)
}

function percentile(sorted, p) {
    return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

const sleepUntil = (t) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

// T0: far enough ahead for every create at 800 a second (half what a laptop does), on a whole second.
const t0 = Math.ceil((Date.now() + (TOTAL / 800) * 1000 + 20_000) / 1000) * 1000;
const iso = (ms) => new Date(ms).toISOString();
let next = 0;
let bad = 0;
const c0 = performance.now();
await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < TOTAL) {
        const i = next++;
        const burst = i < BURST;
        const start = burst ? t0 : t0 + 30_000 + ((i - BURST) % 30) * 1000;
        const body = JSON.stringify({ id: `s${i}`, every: '1m', startAt: iso(start), overlap: burst ? 'allow' : 'skip',
            job: { type: burst ? 'bench.burst' : 'bench.bg', payload: { i } } });
        const r = await req('POST', '/v1/schedules', body);
        if (r.status !== 201 && bad++ < 3)
            process.stderr.write(`create: ${r.status} ${r.text.slice(0, 300)}\n`);
    }
}));
const createS = (performance.now() - c0) / 1000;
console.log(`create_s ${createS.toFixed(2)}`);
console.log(`create_per_s ${Math.round(TOTAL / createS)}`);
console.log(`bad ${bad}`);
if (Date.now() > t0 - 6000) {
    console.log('late 1');
    process.exit(0);
}
console.log('late 0');
// Idle: every schedule stored, none due until T0.
await sleepUntil(Date.now() + 1000);
const i0 = cpuSeconds(), iw = Date.now();
await sleepUntil(t0 - 1000);
const idleS = (Date.now() - iw) / 1000;
console.log(`idle_s ${idleS.toFixed(1)}`);
console.log(`idle_cpu_pct ${(((cpuSeconds() - i0) / idleS) * 100).toFixed(2)}`);

// The burst: wait until its BURST jobs are stored, reading them by pages of the type.
async function burstJobs() {
    const jobs = [];
    let token = null;
    do {
        const r = await req('GET', `/v1/jobs?type=bench.burst&limit=200${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`);
        const page = JSON.parse(r.text);
        jobs.push(...page.items);
        token = page.nextPageToken;
    } while (token);
    return jobs;
}
await sleepUntil(t0 + 1000);
let jobs = [];
for (;;) {
    const r = await req('GET', '/v1/queues/bench.burst');
    const n = r.status === 200 ? JSON.parse(r.text).counts.queued : 0;
    if (n >= BURST || Date.now() > t0 + 25_000)
        break;
    await sleepUntil(Date.now() + 250);
}
const g0 = cpuSeconds(), gw = Date.now();
jobs = await burstJobs();
const delays = jobs.filter((j) => Date.parse(j.schedule.fireTime) === t0).map((j) => Date.parse(j.createdAt) - t0).sort((a, b) => a - b);
console.log(`burst_jobs ${delays.length}`);
console.log(`burst_p50_ms ${percentile(delays, 50)}`);
console.log(`burst_p99_ms ${percentile(delays, 99)}`);
console.log(`burst_max_ms ${delays[delays.length - 1]}`);
await sleepUntil(Math.max(gw + 5000, t0 + 28_000));
const gapS = (Date.now() - gw) / 1000;
console.log(`gap_s ${gapS.toFixed(1)}`);
console.log(`gap_cpu_pct ${(((cpuSeconds() - g0) / gapS) * 100).toFixed(2)}`);
await pool.close();
