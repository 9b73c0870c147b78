#!/usr/bin/env node
// A client of acceptd in Node: submit a job, follow it over Server-Sent Events, read its result.
//
//   ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... node examples/node/client.mjs TYPE ['{"payload": ...}']
//
// A thin user of the `acceptd` library (clients/node; in your project, `npm install ./clients/node` and
// import from 'acceptd'): submit() sends an Idempotency-Key of its own, wait() follows the job's event stream
// and resumes it with Last-Event-ID when it breaks (or polls with Retry-After and If-None-Match when no stream
// can be had). Prints each step on stderr and the result on stdout; exits 0 when the job succeeded, 1 otherwise.

import { Client, ProblemError } from '../../clients/node/src/index.mjs';

const client = new Client((process.env.ACCEPTD_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, ''), process.env.ACCEPTD_KEY);
const [type, payloadText = '{}'] = process.argv.slice(2);
if (!type) {
    console.error('usage: node client.mjs TYPE [PAYLOAD_JSON]');
    process.exit(2);
}
const log = (...a) => console.error('client:', ...a);

try {
    // 1. Submit: 202 Accepted with the job.
    const job = await client.submit(type, JSON.parse(payloadText));
    log(`submitted ${job.id} (Idempotency-Key ${job.idempotencyKey})`);

    // 2. Follow it until it is final; each status and progress change on the way.
    const show = (name, id, d) => log(`event ${name} id=${id} status=${d.status} progress=${d.progress ?? '-'}${d.message ? ` message=${d.message}` : ''}`);
    const final = await job.wait({ onProgress: (d, { event, id }) => show(event, id, d) });
    show('done', job.lastEventId, final);

    // 3. Its result: the document for succeeded or partialSuccess; a failed job throws its stored problem.
    const result = await job.result();
    log(`job ${final.id} ended ${final.status}`);
    process.stdout.write(JSON.stringify(result) + '\n');
    process.exit(final.status === 'succeeded' ? 0 : 1);
} catch (e) {
    if (!(e instanceof ProblemError)) throw e;
    log(`refused: ${e.status} ${e.code}: ${e.detail ?? e.title}`);
    process.stdout.write(JSON.stringify(e.problem) + '\n');
    process.exit(1);
}
