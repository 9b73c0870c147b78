// bench/workers.mjs - the worker side of acceptd, measured from one node process over keep-alive HTTP/1.1
// connections (undici). Run by bench/workers.sh against a daemon it started; prints "name value" lines.
//
//   node bench/workers.mjs URL handoff COUNT
//       A worker parks POST /v1/leases {"types":["bench.handoff"],"wait":30}; then one job is submitted on
//       another connection. Latency: from just before the submit is sent to the lease answer fully read.
//       COUNT times, one after the other. Prints handoff-p50, handoff-p99, handoff-max (ms) and handoff-n.
//       With BENCH_SUBMIT_URL set, jobs are submitted there instead (another node of a cluster).
//   node bench/workers.mjs URL submit JOBS SUBMITTERS
//       Durable submits alone: JOBS POST /v1/jobs with SUBMITTERS in flight. Prints submit-node (jobs/s).
//   node bench/workers.mjs URL e2e JOBS SUBMITTERS WORKERS
//       JOBS submitted as above while WORKERS loops lease (max 1, wait 5) and complete, each complete asking
//       for the loop's next job in the same call ("next"). Rate: completed jobs per second from the first
//       submit to the last completion. Prints e2e (jobs/s) and e2e-n.
//   node bench/workers.mjs URL e2e-lib JOBS SUBMITTERS WORKERS
//       The same with WORKERS Workers of the library (clients/node, concurrency 1 each) in place of the
//       hand-written loops: what the library costs a worker. Prints e2e (jobs/s) and e2e-n.
//
// Every mode stops at LIMIT_MS and then reports what it measured so far (with a "partial" line).

import { Client, Pool } from 'undici';

const LIMIT_MS = 60_000;
const HEADERS = { 'content-type': 'application/json' };

const [url, mode, ...rest] = process.argv.slice(2);
const nums = rest.map(Number);
if (!url || !['handoff', 'submit', 'e2e', 'e2e-lib'].includes(mode) || nums.some((n) => !Number.isInteger(n) || n < 1)) {
    process.stderr.write('usage: node bench/workers.mjs URL handoff COUNT | submit JOBS SUBMITTERS | e2e[-lib] JOBS SUBMITTERS WORKERS\n');
    process.exit(2);
}

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** POST a JSON body on a dispatcher; resolves {status, json} once the whole answer is read. */
async function post(dispatcher, path, body) {
    const res = await dispatcher.request({ method: 'POST', path, headers: HEADERS, body: JSON.stringify(body) });
    const text = await res.body.text();
    return { status: res.statusCode, json: text.length > 0 ? JSON.parse(text) : null, text };
}

function expect(res, status, what) {
    if (res.status !== status) throw new Error(`${what}: want ${status}, got ${res.status} ${res.text.slice(0, 300)}`);
    return res;
}

function percentile(sorted, p) {
    return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Submit jobs of type until JOBS were accepted, SUBMITTERS at a time; resolves the number accepted. */
async function submitAll(pool, type, jobs, submitters, deadline) {
    let next = 0;
    let accepted = 0;
    await Promise.all(Array.from({ length: submitters }, async () => {
        while (next < jobs && now() < deadline) {
            const i = next++;
            expect(await post(pool, '/v1/jobs', { type, payload: { n: i } }), 202, 'submit');
            accepted++;
        }
    }));
    return accepted;
}

async function handoff(count) {
    const type = 'bench.handoff';
    const worker = new Client(url, { pipelining: 1, keepAliveTimeout: 60_000 });
    const submitter = new Client(process.env.BENCH_SUBMIT_URL || url, { pipelining: 1, keepAliveTimeout: 60_000 });
    const lat = [];
    const deadline = now() + LIMIT_MS;
    try {
        // Warm both connections (and nothing of this type may be queued before the first round).
        expect(await post(worker, '/v1/leases', { types: [type], max: 1, wait: 0 }), 204, 'warm-up lease');
        for (let i = 0; i < count && now() < deadline; i++) {
            let arrived = 0;
            const leased = (async () => {
                for (;;) {
                    const res = await post(worker, '/v1/leases', { types: [type], max: 1, wait: 30, leaseSeconds: 60, worker: 'bench' });
                    arrived = now();
                    if (res.status === 200) return res.json.leases[0];
                    expect(res, 204, 'lease'); // the daemon's maxWaitSeconds ran out: park again
                }
            })();
            await sleep(2); // let the lease request reach the daemon and park
            const t0 = now();
            const sub = post(submitter, '/v1/jobs', { type, payload: { i } });
            const l = await leased;
            lat.push(arrived - t0);
            const s = expect(await sub, 202, 'submit');
            if (l.job.id !== s.json.id) throw new Error(`leased ${l.job.id}, submitted ${s.json.id}`);
            expect(await post(worker, `/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId, result: {} }), 200, 'complete');
        }
    } finally {
        await Promise.all([worker.close(), submitter.close()]);
    }
    lat.sort((a, b) => a - b);
    if (lat.length < count) console.log(`partial handoff ${lat.length} of ${count} in ${LIMIT_MS / 1000} s`);
    console.log(`handoff-n ${lat.length}`);
    console.log(`handoff-p50 ${percentile(lat, 50).toFixed(3)}`);
    console.log(`handoff-p99 ${percentile(lat, 99).toFixed(3)}`);
    console.log(`handoff-max ${lat.at(-1).toFixed(3)}`);
}

async function submitOnly(jobs, submitters) {
    const pool = new Pool(url, { connections: submitters, pipelining: 1, keepAliveTimeout: 60_000 });
    try {
        const t0 = now();
        const n = await submitAll(pool, 'bench.submit', jobs, submitters, t0 + LIMIT_MS);
        const s = (now() - t0) / 1000;
        if (n < jobs) console.log(`partial submit ${n} of ${jobs}`);
        console.log(`submit-node ${Math.round(n / s)}`);
    } finally {
        await pool.close();
    }
}

async function e2e(jobs, submitters, workers) {
    const type = 'bench.e2e';
    const pool = new Pool(url, { connections: submitters, pipelining: 1, keepAliveTimeout: 60_000 });
    const clients = Array.from({ length: workers }, () => new Client(url, { pipelining: 1, keepAliveTimeout: 60_000 }));
    let completed = 0;
    let lastDone = 0;
    let stop = false;
    let finish;
    const allDone = new Promise((r) => (finish = r));
    const loops = clients.map(async (c, wi) => {
        const ask = { types: [type], max: 1, leaseSeconds: 60, worker: `bench-${wi}` };
        let held = []; // leases from the last complete's "next"
        while (!stop) {
            if (held.length === 0) {
                let res;
                try {
                    res = await post(c, '/v1/leases', { ...ask, wait: 5 });
                } catch (e) {
                    if (stop) return; // destroyed while parked at the end
                    throw e;
                }
                if (res.status === 204) continue;
                held = expect(res, 200, 'lease').json.leases;
            }
            const l = held[0];
            const res = await post(c, `/v1/jobs/${l.job.id}:complete`, { leaseId: l.leaseId, result: { ok: true }, next: ask });
            held = expect(res, 200, 'complete').json.leases;
            completed++;
            lastDone = now();
            if (completed === jobs) finish();
        }
    });
    const t0 = now();
    const deadline = t0 + LIMIT_MS;
    const timer = setTimeout(finish, LIMIT_MS);
    const failed = new Promise((_, reject) => loops.forEach((p) => p.catch(reject)));
    const n = await Promise.race([submitAll(pool, type, jobs, submitters, deadline), failed]);
    await Promise.race([allDone, failed]);
    clearTimeout(timer);
    stop = true;
    const done = completed;
    const s = ((done === jobs ? lastDone : now()) - t0) / 1000;
    await Promise.all(clients.map((c) => c.destroy()));
    await Promise.allSettled(loops);
    await pool.close();
    if (done < jobs) console.log(`partial e2e ${done} of ${jobs} completed (${n} submitted) in ${LIMIT_MS / 1000} s`);
    console.log(`e2e-n ${done}`);
    console.log(`e2e ${Math.round(done / s)}`);
}

async function e2eLib(jobs, submitters, workers) {
    const { Worker } = await import('../clients/node/src/index.mjs');
    const type = 'bench.e2e-lib';
    const pool = new Pool(url, { connections: submitters, pipelining: 1, keepAliveTimeout: 60_000 });
    let handled = 0;
    let finish;
    const allHandled = new Promise((r) => (finish = r));
    let failure = null;
    const ws = Array.from({ length: workers }, (_, wi) => new Worker(url, null, {
        types: [type],
        concurrency: 1,
        leaseSeconds: 60,
        waitSeconds: 5,
        name: `bench-lib-${wi}`,
        onError: (e) => {
            failure = e;
            finish();
        },
        handler: async () => {
            if (++handled === jobs) finish();
            return { ok: true };
        },
    }));
    const completed = () => ws.reduce((n, w) => n + w.stats.succeeded, 0);
    for (const w of ws) w.start();
    const t0 = now();
    const timer = setTimeout(finish, LIMIT_MS);
    const n = await submitAll(pool, type, jobs, submitters, t0 + LIMIT_MS);
    await allHandled;
    // The last handlers' reports: done when every job's complete was answered.
    while (!failure && completed() < jobs && now() - t0 < LIMIT_MS) await sleep(1);
    clearTimeout(timer);
    if (failure) throw failure;
    const done = completed();
    const s = (now() - t0) / 1000;
    await Promise.all(ws.map((w) => w.stop()));
    await pool.close();
    if (done < jobs) console.log(`partial e2e ${done} of ${jobs} completed (${n} submitted) in ${LIMIT_MS / 1000} s`);
    console.log(`e2e-n ${done}`);
    console.log(`e2e ${Math.round(done / s)}`);
}

try {
    if (mode === 'handoff') await handoff(nums[0] ?? 2000);
    else if (mode === 'submit') await submitOnly(nums[0] ?? 10000, nums[1] ?? 32);
    else if (mode === 'e2e-lib') await e2eLib(nums[0] ?? 10000, nums[1] ?? 32, nums[2] ?? 8);
    else await e2e(nums[0] ?? 10000, nums[1] ?? 32, nums[2] ?? 8);
} catch (e) {
    process.stderr.write(`bench/workers.mjs ${mode}: ${e.stack ?? e}\n`);
    process.exit(1);
}
process.exit(0);
