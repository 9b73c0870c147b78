#!/usr/bin/env node
// A client of acceptd in Node: submit a job, follow it over Server-Sent Events, read its result.
//
//   ACCEPTD_URL=http://127.0.0.1:8080 ACCEPTD_KEY=... node examples/node/client.mjs TYPE ['{"payload": ...}']
//
// Uses fetch (Node 18+) and EventSource from the `eventsource` npm package (Node has none of its own before
// 22), which reconnects by itself with Last-Event-ID: acceptd answers a resumed stream with the events after
// that id, so nothing is missed or seen twice. Prints each step on stderr and the result on stdout; exits 0
// when the job succeeded, 1 otherwise.

import { EventSource } from 'eventsource';

const base = (process.env.ACCEPTD_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
const key = process.env.ACCEPTD_KEY;
const [type, payloadText = '{}'] = process.argv.slice(2);
if (!type) {
    console.error('usage: node client.mjs TYPE [PAYLOAD_JSON]');
    process.exit(2);
}
const auth = key ? { authorization: `Bearer ${key}` } : {};
const log = (...a) => console.error('client:', ...a);

// 1. Submit. 202 Accepted with the job, and Location naming it.
const submit = await fetch(`${base}/v1/jobs`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ type, payload: JSON.parse(payloadText) }),
});
const job = await submit.json();
if (submit.status !== 202) {
    log(`submit refused: ${submit.status}`, job);
    process.exit(1);
}
log(`submitted ${job.id} (${submit.status}), Location: ${submit.headers.get('location')}`);

// 2. Follow its events until `done`, the job's final representation; the server then ends the stream.
const final = await new Promise((resolve, reject) => {
    const es = new EventSource(`${base}${job.links.events}`, {
        // EventSource cannot set headers by itself: the package lets fetch add the key.
        fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, ...auth } }),
    });
    const show = (e) => {
        const d = JSON.parse(e.data);
        log(`event ${e.type} id=${e.lastEventId} status=${d.status} progress=${d.progress ?? '-'}${d.message ? ` message=${d.message}` : ''}`);
    };
    es.addEventListener('status', show);
    es.addEventListener('progress', show);
    es.addEventListener('done', (e) => {
        show(e);
        es.close();
        resolve(JSON.parse(e.data));
    });
    es.onerror = (err) => {
        // A dropped connection is retried by EventSource; a refusal (401, 404) closes it.
        if (es.readyState === EventSource.CLOSED) reject(new Error(`event stream closed: ${err.message ?? err.code ?? 'error'}`));
        else log('event stream interrupted, reconnecting with Last-Event-ID');
    };
});

// 3. Read the result: the result document for succeeded or partialSuccess, else the stored problem.
const res = await fetch(`${base}${final.links.result}`, { headers: auth });
const body = await res.text();
log(`job ${final.id} ended ${final.status}; GET ${final.links.result} -> ${res.status}`);
process.stdout.write(body + '\n');
process.exit(final.status === 'succeeded' ? 0 : 1);
