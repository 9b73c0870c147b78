// bench/batches.mjs - batches against the requests they stand beside, for bench/batches.sh.
//   node batches.mjs ORIGIN create ROUNDS   ROUNDS rounds, each a POST /v1/batches of 1,000 jobs and a POST
//                                           /v1/jobs:batch of 1,000 (the order alternating), one at a time: jobs/s
//                                           of each over all rounds, and their ratio, one line each ("name value")
//   node batches.mjs ORIGIN poll            a running 1,000-job batch and a queued job: prints "<batch path>
//                                           <its ETag> <job path> <its ETag>", for wrk to poll both with a 304
//   node batches.mjs ORIGIN webhooks N      a receiver (node:http on 127.0.0.1, in this process) and N rounds, one at
//                                           a time, each a batch of 4 jobs with a callbackUrl and a job with one (the
//                                           order alternating): every job leased and completed, then the time from
//                                           sending the last :complete to the arrival of the batch.* delivery, and
//                                           from sending the job's :complete to its job.succeeded delivery: p50 and
//                                           p99 of each (ms), the ratio of the p50s, and how often the delivery
//                                           came before the :complete's answer (timed from the answer, the
//                                           latency is then negative)
// Every create must be 202 (207 with no refused item).
import http from 'node:http';
import { Pool } from 'undici';

const [origin, mode, roundsArg] = process.argv.slice(2);
const ROUNDS = Number(roundsArg);
const pool = new Pool(origin, { connections: 2, pipelining: 1 });

async function req(method, path, body, headers = {}) {
    const res = await pool.request({ path, method, headers: { 'content-type': 'application/json', ...headers }, body });
    const text = await res.body.text();
    return { status: res.statusCode, text, headers: res.headers };
}

const jobs = (tag) => Array.from({ length: 1000 }, (_, i) => ({ type: `bench.${tag}`, payload: { i } }));

async function create() {
    let batchMs = 0, bulkMs = 0;
    const batchBody = JSON.stringify({ jobs: jobs('batch') });
    const bulkBody = JSON.stringify({ jobs: jobs('bulk') });
    for (let r = 0; r < ROUNDS; r++) {
        const order = r % 2 === 0 ? ['batch', 'bulk'] : ['bulk', 'batch'];
        for (const which of order) {
            const t = performance.now();
            const res = which === 'batch'
                ? await req('POST', '/v1/batches', batchBody)
                : await req('POST', '/v1/jobs:batch', bulkBody, { prefer: 'return=minimal' });
            const ms = performance.now() - t;
            if (which === 'batch' ? res.status !== 202 : res.status !== 207 || res.text.includes('"problem"'))
                throw new Error(`${which}: ${res.status} ${res.text.slice(0, 300)}`);
            if (which === 'batch') batchMs += ms;
            else bulkMs += ms;
        }
    }
    const batchRate = (ROUNDS * 1000) / (batchMs / 1000), bulkRate = (ROUNDS * 1000) / (bulkMs / 1000);
    console.log(`create-batch-jobs/s ${batchRate.toFixed(0)}`);
    console.log(`create-jobs:batch-jobs/s ${bulkRate.toFixed(0)}`);
    console.log(`create-ratio ${(batchRate / bulkRate).toFixed(2)}`);
}

async function poll() {
    const b = JSON.parse((await req('POST', '/v1/batches', JSON.stringify({ jobs: jobs('poll') }))).text);
    const j = JSON.parse((await req('POST', '/v1/jobs', JSON.stringify({ type: 'bench.pollone' }))).text);
    const out = [];
    for (const path of [`/v1/batches/${b.id}`, `/v1/jobs/${j.id}`]) {
        const r = await req('GET', path);
        if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
        out.push(path, r.headers.etag);
    }
    console.log(out.join(' '));
}

const pct = (xs, p) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

async function ok(method, path, body, want) {
    const r = await req(method, path, body === undefined ? undefined : JSON.stringify(body));
    if (r.status !== want) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 300)}`);
    return r.status === 204 ? null : JSON.parse(r.text);
}

// Lease the n queued jobs of type and complete each; returns performance.now() when the last :complete was sent and
// when it was answered.
async function leaseAndComplete(type, n) {
    const got = [];
    while (got.length < n) {
        const l = await ok('POST', '/v1/leases', { types: [type], max: n - got.length, wait: 5, leaseSeconds: 60, worker: 'bench' }, 200);
        got.push(...l.leases);
    }
    let sent = 0;
    for (const { job, leaseId } of got) {
        sent = performance.now();
        await ok('POST', `/v1/jobs/${job.id}:complete`, { leaseId, result: { ok: true } }, 200);
    }
    return { sent, answered: performance.now() };
}

async function webhooks() {
    const N = ROUNDS;
    const arrived = new Map(); // path -> {at, type}
    const waiting = new Map(); // path -> resolve
    const server = http.createServer((q, res) => {
        const chunks = [];
        q.on('data', (c) => chunks.push(c));
        q.on('end', () => {
            const at = performance.now();
            res.writeHead(204);
            res.end();
            if (arrived.has(q.url)) return; // a retry of an event already counted
            const rec = { at, type: JSON.parse(Buffer.concat(chunks).toString('utf8')).type };
            arrived.set(q.url, rec);
            waiting.get(q.url)?.(rec);
        });
    });
    server.keepAliveTimeout = 60_000;
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const rx = `http://127.0.0.1:${server.address().port}`;
    const delivery = (path) =>
        arrived.get(path) ??
        new Promise((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`no delivery to ${path} within 30 s`)), 30_000);
            waiting.set(path, (rec) => {
                clearTimeout(t);
                resolve(rec);
            });
        });
    await ok('POST', '/v1/webhooks/callback:rotate', {}, 200);
    const batchMs = [], jobMs = [];
    let early = { batch: 0, job: 0 };
    for (let r = 0; r < N; r++) {
        for (const which of r % 2 === 0 ? ['batch', 'job'] : ['job', 'batch']) {
            const path = `/${which}/${r}`;
            if (which === 'batch') {
                const jobs = Array.from({ length: 4 }, (_, i) => ({ type: 'bench.whbatch', payload: { i } }));
                await ok('POST', '/v1/batches', { jobs, callbackUrl: rx + path }, 202);
                const t = await leaseAndComplete('bench.whbatch', 4);
                const d = await delivery(path);
                if (d.type !== 'batch.succeeded') throw new Error(`${path}: ${d.type}`);
                batchMs.push(d.at - t.sent);
                if (d.at < t.answered) early.batch++;
            } else {
                await ok('POST', '/v1/jobs', { type: 'bench.whjob', callbackUrl: rx + path }, 202);
                const t = await leaseAndComplete('bench.whjob', 1);
                const d = await delivery(path);
                if (d.type !== 'job.succeeded') throw new Error(`${path}: ${d.type}`);
                jobMs.push(d.at - t.sent);
                if (d.at < t.answered) early.job++;
            }
        }
    }
    server.close();
    server.closeAllConnections();
    const b50 = pct(batchMs, 50), j50 = pct(jobMs, 50);
    console.log(`webhook-batch-p50-ms ${b50.toFixed(2)}`);
    console.log(`webhook-batch-p99-ms ${pct(batchMs, 99).toFixed(2)}`);
    console.log(`webhook-job-p50-ms ${j50.toFixed(2)}`);
    console.log(`webhook-job-p99-ms ${pct(jobMs, 99).toFixed(2)}`);
    console.log(`webhook-p50-ratio ${(b50 / j50).toFixed(2)}`);
    // The delivery leaves once the completion's commit is durable, as the :complete answer does: often first.
    console.log(`webhook-before-answer batch ${((100 * early.batch) / N).toFixed(0)}% job ${((100 * early.job) / N).toFixed(0)}%`);
}

if (mode === 'create') await create();
else if (mode === 'webhooks') await webhooks();
else await poll();
await pool.close();
