// bench/submit_clients.mjs - a real Node client POSTing job submits as fast as it can, for bench/submit_clients.sh.
//   node submit_clients.mjs undici ORIGIN PATH SECONDS CONNS [PREFER [replay]]   undici Pool, CONNS connections,
//                                                                                pipelining 1
//   node submit_clients.mjs h2 ORIGIN PATH SECONDS STREAMS [PREFER [replay]]     node:http2, one connection,
//                                                                                STREAMS at once
// Every request is POST PATH with the submit body of bench/submit.lua (and `Prefer: PREFER` if given); the
// client reads each answer's whole body, as a real client would. With `replay`, each of the CONNS (STREAMS)
// request loops sends an Idempotency-Key of its own: its first request submits a job, every later one replays
// it. After a 0.5 s warm-up the client counts SECONDS of answers and prints one line:
//   requests N rps R bad B total T cpu_us C
// N answers in the window (R per second), B of them not 202, T answers in all (warm-up included, to divide
// the server's CPU by), C this process's CPU (user + system, /proc/self/stat) per answer in the window, in us.
import http2 from 'node:http2';
import { readFileSync } from 'node:fs';
import { Pool } from 'undici';

const [mode, origin, path, seconds, width, prefer, replay] = process.argv.slice(2);
const BODY = '{"type":"bench","payload":{"n":1}}';
const WARMUP_MS = 500;
const HZ = 100; // clock ticks per second (getconf CLK_TCK on Linux)

// ticks: this process's user + system CPU so far, in clock ticks (fields 14 and 15, counted after the name).
function ticks()
{
    const f = readFileSync('/proc/self/stat', 'utf8');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return Number(rest[11]) + Number(rest[12]);
}

let counting = false;
let stopping = false;
let requests = 0;
let bad = 0;
let total = 0;

function answered(status)
{
    total++;
    if (!counting)
        return;
    requests++;
    if (status !== 202)
        bad++;
}

// The header fields of loop i's requests: PREFER, and with `replay` the loop's own key.
function fields(i, headers)
{
    if (prefer)
        headers.prefer = prefer;
    if (replay === 'replay')
        headers['idempotency-key'] = `"bench-${process.pid}-${i}"`;
    else if (replay)
        throw new Error(`unknown argument ${replay}`);
    return headers;
}

async function undiciLoop(pool, i)
{
    const headers = fields(i, { 'content-type': 'application/json' });
    while (!stopping) {
        const res = await pool.request({ path, method: 'POST', headers, body: BODY });
        await res.body.text();
        answered(res.statusCode);
    }
}

function h2One(session, headers)
{
    return new Promise((resolve, reject) => {
        const req = session.request(headers);
        let status = 0;
        req.on('response', (h) => { status = h[':status']; });
        req.setEncoding('utf8');
        req.on('data', () => {});
        req.on('end', () => resolve(status));
        req.on('error', reject);
        req.end(BODY);
    });
}

async function h2Loop(session, i)
{
    const headers = fields(i, { ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    while (!stopping)
        answered(await h2One(session, headers));
}

async function main()
{
    const n = Number(width);
    let loops;
    let close;
    if (mode === 'undici') {
        const pool = new Pool(origin, { connections: n, pipelining: 1 });
        loops = Array.from({ length: n }, (_, i) => undiciLoop(pool, i));
        close = () => pool.close();
    } else if (mode === 'h2') {
        const session = http2.connect(origin);
        session.on('error', (e) => { console.error(e); process.exit(1); });
        loops = Array.from({ length: n }, (_, i) => h2Loop(session, i));
        close = () => new Promise((r) => session.close(r));
    } else {
        throw new Error(`unknown mode ${mode}`);
    }
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const t0 = ticks();
    const start = process.hrtime.bigint();
    counting = true;
    await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
    counting = false;
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    const t1 = ticks();
    stopping = true;
    await Promise.all(loops);
    await close();
    const cpu = requests ? ((t1 - t0) * 1e6) / HZ / requests : 0;
    console.log(`requests ${requests} rps ${Math.round(requests / elapsed)} bad ${bad} total ${total} ` +
        `cpu_us ${cpu.toFixed(1)}`);
}

main().catch((e) => {
    console.error(e);
    process.exit(1);
});
