// bench/batches.mjs - batches against the requests they stand beside, for bench/batches.sh.
//   node batches.mjs ORIGIN create ROUNDS   ROUNDS rounds, each a POST /v1/batches of 1,000 jobs and a POST
//                                           /v1/jobs:batch of 1,000 (the order alternating), one at a time: jobs/s
//                                           of each over all rounds, and their ratio, one line each ("name value")
//   node batches.mjs ORIGIN poll            a running 1,000-job batch and a queued job: prints "<batch path>
//                                           <its ETag> <job path> <its ETag>", for wrk to poll both with a 304
// Every create must be 202 (207 with no refused item).
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

if (mode === 'create') await create();
else await poll();
await pool.close();
