// `acceptd submit` and `acceptd jobs`: the client commands, run as a user would against the real daemon.
// The test plays the worker through the HTTP API (lease, heartbeat, complete/fail), so each outcome and its
// exit status is chosen here. The progress bar is read through a pseudo-terminal (`script`), and the fallback
// from SSE to polling through a small proxy in this file that refuses the event stream and records the polls.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { it, startDaemon, tenant } from './lib/daemon.mjs';
import { BIN } from './lib/worker.mjs';
import { JOB_ID, complete, expectStatus, fail, heartbeat, lease, listAll, runToSuccess, submit, waitUntil } from './lib/jobs.mjs';

const SLOW = process.env.ACCEPTD_SANITIZED ? 3 : 1;
const TYPE = 'report.export';
const EXIT = { ok: 0, failed: 1, usage: 2, cancelled: 3, partial: 4, timeout: 5, connect: 6, problem: 7 };

const live = new Set();
process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
});

/**
 * Start `acceptd ARGS` (or another program with its arguments in args when cmd is given), its environment
 * without ACCEPTD_*; returns {proc, done (promise of {code, signal, stdout, stderr}), out() (output so far)}.
 * Killed after limitMs.
 */
function start(args, { env = {}, cmd = BIN, limitMs = 30_000 * SLOW } = {}) {
    const e = { ...process.env };
    for (const k of Object.keys(e)) if (k.startsWith('ACCEPTD_') && k !== 'ACCEPTD_SANITIZED') delete e[k];
    const proc = spawn(cmd, args, { env: { ...e, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    live.add(proc);
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (c) => (stdout += c));
    proc.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    const timer = setTimeout(() => proc.kill('SIGKILL'), limitMs);
    const done = new Promise((resolve) => {
        proc.on('close', (code, signal) => {
            clearTimeout(timer);
            live.delete(proc);
            resolve({ code, signal, stdout, stderr, what: `${cmd === BIN ? 'acceptd' : cmd} ${args.join(' ')}` });
        });
    });
    return { proc, done, out: () => ({ stdout, stderr }) };
}

const run = (args, opts) => start(args, opts).done;

function shown(r) {
    return `${r.what}: exit ${r.code} (signal ${r.signal})\n--- stdout ---\n${r.stdout}\n--- stderr ---\n${r.stderr}`;
}

/** Lease the next job of the tenant, waiting for the CLI to submit it. Returns {job, leaseId}. */
async function leaseNext(w) {
    let got = null;
    await waitUntil(
        async () => {
            const res = await lease(w, TYPE, { wait: 1 });
            if (res.status === 200) got = res.json.leases[0];
            return got;
        },
        (x) => x !== null,
        { timeoutMs: 15_000 * SLOW, what: 'a job to lease' },
    );
    return got;
}

let d;
after(async () => {
    if (d) await d.stop();
});

async function daemon() {
    if (!d) d = await startDaemon();
    return d;
}

/** A tenant and the flags that point the CLI at it. */
async function setup() {
    const dd = await daemon();
    const t = tenant(dd);
    return { t, flags: ['--url', dd.url, '--key', t.keys.c] };
}

describe('acceptd submit --wait', () => {
    it('prints the result on stdout and exits 0 when the job succeeds', async () => {
        const { t, flags } = await setup();
        const cli = start(['submit', TYPE, '--payload', '{"rows": 3}', '--wait', ...flags]);
        const l = await leaseNext(t.w);
        assert.deepEqual(l.job.payload, { rows: 3 });
        await complete(t.w, l.job.id, l.leaseId, { result: { url: 'https://x/r.csv', rows: 3 } });
        const r = await cli.done;
        assert.equal(r.code, EXIT.ok, shown(r));
        assert.deepEqual(JSON.parse(r.stdout), { url: 'https://x/r.csv', rows: 3 }, shown(r));
        // Not a terminal: plain lines on stderr, no bar and no escape sequences.
        assert.match(r.stderr, new RegExp(`${l.job.id}: succeeded`), shown(r));
        assert.ok(!r.stderr.includes('\x1b[') && !r.stderr.includes('\r'), shown(r));
    });

    it('exits 1 with the problem on stderr when the job fails', async () => {
        const { t, flags } = await setup();
        const cli = start(['submit', TYPE, '--wait', ...flags]);
        const l = await leaseNext(t.w);
        await fail(t.w, l.job.id, l.leaseId, { error: { title: 'Export broke', status: 500, detail: 'disk full', code: 'no-space' }, retryable: false });
        const r = await cli.done;
        assert.equal(r.code, EXIT.failed, shown(r));
        assert.equal(r.stdout, '', shown(r));
        assert.match(r.stderr, /failed: 500 Export broke: disk full \(no-space\)/, shown(r));
    });

    it('exits 3 when the job is cancelled', async () => {
        const { t, flags } = await setup();
        const cli = start(['submit', TYPE, '--wait', ...flags]);
        const items = await waitUntil(() => listAll(t.c), (x) => x.length === 1, { timeoutMs: 15_000 * SLOW, what: 'the job' });
        expectStatus(await t.c.del(`/v1/jobs/${items[0].id}`), 200);
        const r = await cli.done;
        assert.equal(r.code, EXIT.cancelled, shown(r));
        assert.match(r.stderr, /was cancelled/, shown(r));
    });

    it('exits 4 with the result when the job ends partialSuccess', async () => {
        const { t, flags } = await setup();
        const cli = start(['submit', TYPE, '--wait', ...flags]);
        const l = await leaseNext(t.w);
        await complete(t.w, l.job.id, l.leaseId, { result: { done: 2, of: 3 }, status: 'partialSuccess' });
        const r = await cli.done;
        assert.equal(r.code, EXIT.partial, shown(r));
        assert.deepEqual(JSON.parse(r.stdout), { done: 2, of: 3 }, shown(r));
    });

    it('exits 5 when --timeout passes first, and the job is left as it is', async () => {
        const { t, flags } = await setup();
        const r = await run(['submit', TYPE, '--wait', '--timeout', '1', ...flags]);
        assert.equal(r.code, EXIT.timeout, shown(r));
        assert.match(r.stderr, /timed out after 1 s; job job_\S+ has not ended/, shown(r));
        const items = await listAll(t.c);
        assert.equal(items.length, 1);
        assert.equal(items[0].status, 'queued');
    });

    it('sends the options: idempotency key, priority, runAt, callbackUrl, payload from a file and stdin', async () => {
        const { t, flags } = await setup();
        expectStatus(await t.c.post('/v1/webhooks/callback:rotate', {}), 200); // a callbackUrl needs the secret
        const args = ['submit', TYPE, '--idempotency-key', 'k-1', '--priority', 'high', '--run-at', '2030-01-01T00:00:00Z',
            '--callback-url', 'https://example.com/hook', '--payload', '-', ...flags];
        const a = start(args);
        a.proc.stdin.end('{"from": "stdin"}');
        const ra = await a.done;
        assert.equal(ra.code, EXIT.ok, shown(ra));
        const job = JSON.parse(ra.stdout);
        assert.match(job.id, JOB_ID);
        assert.equal(job.priority, 'high');
        assert.equal(job.runAt, '2030-01-01T00:00:00.000Z');
        assert.deepEqual(job.payload, { from: 'stdin' });
        // The same key again: the same job.
        const b = start(args);
        b.proc.stdin.end('{"from": "stdin"}');
        const rb = await b.done;
        assert.equal(rb.code, EXIT.ok, shown(rb));
        assert.equal(JSON.parse(rb.stdout).id, job.id, shown(rb));
        const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-cli-')), 'p.json');
        fs.writeFileSync(file, '{"from": "file"}');
        const rc = await run(['submit', TYPE, '--payload', `@${file}`, ...flags]);
        fs.rmSync(path.dirname(file), { recursive: true });
        assert.equal(rc.code, EXIT.ok, shown(rc));
        assert.deepEqual(JSON.parse(rc.stdout).payload, { from: 'file' });
    });

    it('exits 2 on usage errors, 6 without a server, 7 with the problem when the server refuses', async () => {
        const { t } = await setup();
        for (const args of [['submit'], ['submit', TYPE, '--payload', '{bad'], ['submit', TYPE, '--timeout', '3'], ['submit', TYPE, '--bogus'], ['submit', TYPE, '--url', 'ftp://x']]) {
            const r = await run(args);
            assert.equal(r.code, EXIT.usage, shown(r));
            assert.match(r.stderr, /acceptd submit: /, shown(r));
        }
        const r6 = await run(['submit', TYPE, '--url', 'http://127.0.0.1:9']);
        assert.equal(r6.code, EXIT.connect, shown(r6));
        assert.match(r6.stderr, /no answer from http:\/\/127\.0\.0\.1:9/, shown(r6));
        // ACCEPTD_URL and ACCEPTD_KEY stand for the flags; a worker key may not submit: 403.
        const r7 = await run(['submit', TYPE], { env: { ACCEPTD_URL: d.url, ACCEPTD_KEY: t.keys.w } });
        assert.equal(r7.code, EXIT.problem, shown(r7));
        assert.match(r7.stderr, /^acceptd submit: 403 [^:]+ \(forbidden\)\n$/, shown(r7));
        const r422 = await run(['submit', 'video.transcode', '--payload', '{}'], { env: { ACCEPTD_URL: d.url, ACCEPTD_KEY: t.keys.c } });
        assert.equal(r422.code, EXIT.problem, shown(r422));
        assert.match(r422.stderr, /422 .*\(validation-failed\)\n  \/payload\/sourceUrl: /, shown(r422));
    });
});

describe('the progress bar', () => {
    it('is drawn on a terminal with the progress and message of each heartbeat', async () => {
        const { t } = await setup();
        // script(1) gives the CLI a pseudo-terminal for stdout and stderr; its output is what the terminal shows.
        const cli = start(['-q', '-e', '-c', `${BIN} submit ${TYPE} --wait`, '/dev/null'], {
            cmd: 'script',
            env: { ACCEPTD_URL: d.url, ACCEPTD_KEY: t.keys.c },
        });
        const l = await leaseNext(t.w);
        for (const [p, m] of [[30, 'reading rows'], [70, 'writing csv']]) {
            expectStatus(await heartbeat(t.w, l.job.id, l.leaseId, { progress: p, message: m }), 200);
            await waitUntil(async () => cli.out().stdout, (s) => s.includes(`${p}% ${m}`), { timeoutMs: 10_000 * SLOW, what: `the bar at ${p}%` });
        }
        await complete(t.w, l.job.id, l.leaseId, { result: { ok: 1 } });
        cli.proc.stdin.end();
        const r = await cli.done;
        assert.equal(r.code, EXIT.ok, shown(r));
        const screen = r.stdout;
        // Redrawn in place: carriage return, erase the line, the bar with 30 cells.
        assert.match(screen, /\r\x1b\[K\S+ running +\[#########\.{21}\]  30% reading rows/, JSON.stringify(screen));
        assert.match(screen, /\r\x1b\[K\S+ running +\[#####################\.{9}\]  70% writing csv/, JSON.stringify(screen));
        assert.match(screen, /\[#{30}\] 100%|succeeded/, JSON.stringify(screen));
        assert.ok(screen.indexOf(' 30% ') < screen.indexOf(' 70% '), JSON.stringify(screen));
        assert.match(screen, /\{\s*"ok": 1\s*\}/, JSON.stringify(screen));
    });
});

/**
 * A proxy to the daemon that answers `refuse` (a status) to every event stream and records the job polls:
 * {url, polls: [{at, ifNoneMatch, status}], close()}. rewrite(n, headers) may change the headers of the
 * n-th poll's answer (0-based).
 */
async function refusingProxy(target, { refuse, rewrite = () => {} }) {
    const polls = [];
    const server = http.createServer((req, res) => {
        if (req.url.endsWith('/events')) {
            res.writeHead(refuse, { 'content-type': 'application/problem+json' });
            res.end(JSON.stringify({ type: 'about:blank', title: 'No streams here', status: refuse }));
            return;
        }
        const poll = req.method === 'GET' && /^\/v1\/jobs\/job_[^/?]+$/.test(req.url);
        const rec = poll ? { at: performance.now(), ifNoneMatch: req.headers['if-none-match'] ?? null, status: 0 } : null;
        const n = polls.length;
        if (rec) polls.push(rec);
        const up = http.request(new URL(req.url, target), { method: req.method, headers: req.headers }, (ur) => {
            const headers = { ...ur.headers };
            if (rec) {
                rec.status = ur.statusCode;
                rewrite(n, headers);
            }
            res.writeHead(ur.statusCode, headers);
            ur.pipe(res);
        });
        req.pipe(up);
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return {
        url: `http://127.0.0.1:${server.address().port}`,
        polls,
        close: () => new Promise((r) => server.close(r)),
    };
}

/**
 * A proxy to the daemon that passes event streams through but cuts each one right after its first event,
 * recording the Last-Event-ID of every stream request: {url, streams: [lastEventId|null], close()}.
 */
async function cuttingProxy(target) {
    const streams = [];
    const server = http.createServer((req, res) => {
        const sse = req.url.endsWith('/events');
        if (sse) streams.push(req.headers['last-event-id'] ?? null);
        const up = http.request(new URL(req.url, target), { method: req.method, headers: req.headers }, (ur) => {
            res.writeHead(ur.statusCode, ur.headers);
            let cut = false;
            ur.on('data', (chunk) => {
                if (cut) return;
                res.write(chunk);
                if (sse && chunk.toString().includes('data:')) {
                    cut = true;
                    ur.destroy();
                    res.end(); // what was written goes out first; the client sees the stream end early
                }
            });
            ur.on('end', () => res.end());
            ur.on('error', () => {});
        });
        req.pipe(up);
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return {
        url: `http://127.0.0.1:${server.address().port}`,
        streams,
        close: () => new Promise((r) => server.close(r)),
    };
}

describe('--wait when the stream breaks', () => {
    it('resumes the stream with Last-Event-ID and sees every change', async () => {
        const { t } = await setup();
        const proxy = await cuttingProxy(d.url);
        try {
            const cli = start(['submit', TYPE, '--wait', '--url', proxy.url, '--key', t.keys.c]);
            const l = await leaseNext(t.w);
            await waitUntil(async () => proxy.streams.length, (n) => n >= 2, { timeoutMs: 20_000 * SLOW, what: 'a resumed stream' });
            expectStatus(await heartbeat(t.w, l.job.id, l.leaseId, { progress: 40, message: 'midway' }), 200);
            await waitUntil(async () => cli.out().stderr, (e) => e.includes('40% midway'), { timeoutMs: 20_000 * SLOW, what: 'the progress' });
            await complete(t.w, l.job.id, l.leaseId, { result: { resumed: true } });
            const r = await cli.done;
            assert.equal(r.code, EXIT.ok, shown(r));
            assert.deepEqual(JSON.parse(r.stdout), { resumed: true });
            assert.doesNotMatch(r.stderr, /polling/, shown(r));
            const ids = proxy.streams;
            assert.equal(ids[0], null, JSON.stringify(ids));
            for (let i = 1; i < ids.length; i++) {
                assert.match(String(ids[i]), /^\d+$/, JSON.stringify(ids));
                if (i > 1) assert.ok(Number(ids[i]) > Number(ids[i - 1]), JSON.stringify(ids));
            }
            assert.ok(ids.length <= 4, `at most 3 reconnects: ${JSON.stringify(ids)}`);
        } finally {
            await proxy.close();
        }
    });
});

describe('--wait without SSE', () => {
    it('falls back to polling with If-None-Match, obeying Retry-After and backing off when there is none', async () => {
        const { t } = await setup();
        // Polls 0 and 1 come back without Retry-After (backoff: about 1 s, then 2 s), poll 2 says 3 s, later ones 1 s.
        const proxy = await refusingProxy(d.url, {
            refuse: 406,
            rewrite: (n, h) => {
                delete h['retry-after'];
                if (n === 2) h['retry-after'] = '3';
                if (n > 2) h['retry-after'] = '1'; // the job ends after these: no need to wait long
            },
        });
        try {
            const cli = start(['submit', TYPE, '--wait', '--url', proxy.url, '--key', t.keys.c]);
            const l = await leaseNext(t.w);
            await waitUntil(async () => proxy.polls.length, (n) => n >= 4, { timeoutMs: 30_000 * SLOW, what: 'four polls' });
            await complete(t.w, l.job.id, l.leaseId, { result: { polled: true } });
            const r = await cli.done;
            assert.equal(r.code, EXIT.ok, shown(r));
            assert.deepEqual(JSON.parse(r.stdout), { polled: true });
            assert.match(r.stderr, /the event stream was refused \(HTTP 406\); polling the job instead/, shown(r));
            const p = proxy.polls;
            const gaps = p.slice(1).map((x, i) => x.at - p[i].at);
            const why = JSON.stringify({ gaps, polls: p });
            // The first poll has no tag; every later one sends the tag it was given, and the unchanged job is a 304.
            assert.equal(p[0].ifNoneMatch, null, why);
            for (const x of p.slice(1)) assert.match(String(x.ifNoneMatch), /^"/, why);
            assert.ok(p.slice(1, 4).some((x) => x.status === 304), why);
            // Backoff from 1 s, doubling; then Retry-After 3 s obeyed; never shrinking.
            assert.ok(gaps[0] >= 1000, why);
            assert.ok(gaps[1] >= 2000, why);
            assert.ok(gaps[2] >= 3000, why);
            for (let i = 1; i < 3; i++) assert.ok(gaps[i] >= gaps[i - 1], why);
        } finally {
            await proxy.close();
        }
    });

    it('falls back the same when the stream answers 503', async () => {
        const { t } = await setup();
        const proxy = await refusingProxy(d.url, { refuse: 503, rewrite: (n, h) => (h['retry-after'] = '1') });
        try {
            const cli = start(['submit', TYPE, '--wait', '--url', proxy.url, '--key', t.keys.c]);
            const l = await leaseNext(t.w);
            await waitUntil(async () => proxy.polls.length, (n) => n >= 2, { timeoutMs: 30_000 * SLOW, what: 'two polls' });
            await complete(t.w, l.job.id, l.leaseId, { result: 7 });
            const r = await cli.done;
            assert.equal(r.code, EXIT.ok, shown(r));
            assert.equal(r.stdout.trim(), '7', shown(r));
            assert.match(r.stderr, /refused \(HTTP 503\)/, shown(r));
            const p = proxy.polls;
            for (let i = 1; i < p.length; i++) assert.ok(p[i].at - p[i - 1].at >= 1000, JSON.stringify(p));
        } finally {
            await proxy.close();
        }
    });
});

describe('acceptd jobs', () => {
    it('list, get, result, cancel, retry, attempts and events, as JSON and as a table', async () => {
        const { t, flags } = await setup();
        const ok = await runToSuccess(t.c, t.w, { type: TYPE, payload: {} }, { result: { answer: 42 } });
        const queued = (await submit(t.c, { type: TYPE, payload: { n: 2 } })).json;
        const jobs = async (args, code = EXIT.ok) => {
            const r = await run(['jobs', ...args, ...flags]);
            assert.equal(r.code, code, shown(r));
            return r;
        };

        // list: a page as the server answers it; --limit and --page-token page; --all follows the pages.
        let r = await jobs(['list']);
        assert.deepEqual(JSON.parse(r.stdout).items.map((j) => j.id), [queued.id, ok.id]);
        r = await jobs(['list', '--status', 'succeeded', '--type', TYPE]);
        assert.deepEqual(JSON.parse(r.stdout).items.map((j) => j.id), [ok.id]);
        r = await jobs(['list', '--limit', '1']);
        const page1 = JSON.parse(r.stdout);
        assert.deepEqual(page1.items.map((j) => j.id), [queued.id]);
        assert.ok(page1.nextPageToken, r.stdout);
        r = await jobs(['list', '--limit', '1', '--page-token', page1.nextPageToken]);
        assert.deepEqual(JSON.parse(r.stdout).items.map((j) => j.id), [ok.id]);
        r = await jobs(['list', '--limit', '1', '--all']);
        assert.deepEqual(JSON.parse(r.stdout), { items: JSON.parse((await jobs(['list'])).stdout).items, nextPageToken: null });
        r = await jobs(['list', '--output', 'table', '--limit', '1']);
        assert.match(r.stderr, /^more: --page-token \S+\n$/, shown(r));
        r = await jobs(['list', '-o', 'table']);
        const lines = r.stdout.trimEnd().split('\n');
        assert.equal(lines.length, 3, shown(r));
        assert.match(lines[0], /^ID +TYPE +STATUS +PROGRESS +CREATED$/, shown(r));
        assert.match(lines[1], new RegExp(`^${queued.id}  ${TYPE.replace('.', '\\.')}  queued +- +${queued.createdAt.replace(/\./g, '\\.')}$`), shown(r));
        assert.match(lines[2], new RegExp(`^${ok.id}  ${TYPE.replace('.', '\\.')}  succeeded +100% +\\S+$`), shown(r));
        // Aligned: each column starts at the same place on every line.
        for (const word of ['TYPE', 'STATUS', 'CREATED']) {
            const col = lines[0].indexOf(word);
            for (const l of lines.slice(1)) assert.match(l.slice(col - 2, col), /^  $/, `${word}\n${r.stdout}`);
            assert.notEqual(lines[1][col], ' ', `${word}\n${r.stdout}`);
        }

        // get
        r = await jobs(['get', ok.id]);
        assert.equal(JSON.parse(r.stdout).id, ok.id);
        assert.deepEqual(JSON.parse(r.stdout).result, { answer: 42 });
        r = await jobs(['get', ok.id, '--output', 'table']);
        assert.match(r.stdout, new RegExp(`^ID .*\\n${ok.id} +${TYPE.replace('.', '\\.')} +succeeded +100% `), shown(r));

        // result
        r = await jobs(['result', ok.id]);
        assert.deepEqual(JSON.parse(r.stdout), { answer: 42 });
        r = await jobs(['result', ok.id, '-o', 'table']);
        assert.deepEqual(JSON.parse(r.stdout), { answer: 42 });
        r = await jobs(['result', queued.id], EXIT.problem);
        assert.match(r.stderr, /^acceptd jobs: 404 .*\(result-not-ready\)\n$/, shown(r));

        // cancel, then retry the cancelled job: a new job that says what it retried.
        r = await jobs(['cancel', queued.id]);
        assert.equal(JSON.parse(r.stdout).status, 'cancelled');
        r = await jobs(['cancel', queued.id, '-o', 'table'], EXIT.problem);
        assert.match(r.stderr, /409 .*\(illegal-transition\)/, shown(r));
        r = await jobs(['retry', queued.id]);
        const retried = JSON.parse(r.stdout);
        assert.equal(retried.retryOf, queued.id);
        assert.equal(retried.status, 'queued');
        r = await jobs(['cancel', retried.id, '--output', 'table']);
        assert.match(r.stdout, new RegExp(`^ID .*\\n${retried.id} +\\S+ +cancelled `), shown(r));
        r = await jobs(['retry', retried.id, '--output', 'table']);
        assert.match(r.stdout, /^ID .*\njob_\S+ +\S+ +queued +- +\S+\n$/, shown(r));

        // attempts
        r = await jobs(['attempts', ok.id]);
        const att = JSON.parse(r.stdout).attempts;
        assert.equal(att.length, 1);
        assert.equal(att[0].outcome, 'succeeded');
        r = await jobs(['attempts', ok.id, '-o', 'table']);
        assert.match(r.stdout, /^ATTEMPT +WORKER +STARTED +ENDED +OUTCOME\n +1 +blackbox +\S+ +\S+ +succeeded\n$/, shown(r));

        // events: the whole stream of a finished job, up to done, then the command ends.
        r = await jobs(['events', ok.id]);
        const evs = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
        assert.deepEqual(evs.map((e) => e.event), ['status', 'status', 'done'], shown(r));
        assert.equal(evs[2].data.status, 'succeeded');
        assert.ok(evs.every((e) => /^\d+$/.test(e.id)), shown(r));
        r = await jobs(['events', ok.id, '-o', 'table']);
        assert.match(r.stdout, /^EVENT-ID +EVENT +STATUS +PROGRESS +MESSAGE\n\d+ +status +queued .*\n\d+ +status +running .*\n\d+ +done +succeeded +100%/, shown(r));

        // Refusals and usage errors.
        r = await jobs(['get', 'job_nope'], EXIT.problem);
        assert.match(r.stderr, /404 /, shown(r));
        for (const args of [[], ['bogus'], ['get'], ['get', 'a/b'], ['list', 'x'], ['get', ok.id, '--watch'], ['list', '--output', 'yaml']]) {
            const u = await run(['jobs', ...args, ...flags]);
            assert.equal(u.code, EXIT.usage, shown(u));
        }
    });

    it('events tails a running job live until done', async () => {
        const { t, flags } = await setup();
        const job = (await submit(t.c, { type: TYPE, payload: {} })).json;
        const cli = start(['jobs', 'events', job.id, ...flags]);
        await waitUntil(async () => cli.out().stdout, (s) => s.includes('"queued"'), { what: 'the first event' });
        const l = await leaseNext(t.w);
        expectStatus(await heartbeat(t.w, job.id, l.leaseId, { progress: 50, message: 'half' }), 200);
        await waitUntil(async () => cli.out().stdout, (s) => s.includes('"half"'), { what: 'the progress event' });
        await complete(t.w, job.id, l.leaseId, { result: {} });
        const r = await cli.done;
        assert.equal(r.code, EXIT.ok, shown(r));
        assert.deepEqual(r.stdout.trimEnd().split('\n').map((x) => JSON.parse(x).event), ['status', 'status', 'progress', 'done']);
    });

    it('list --watch prints every job, then each change, until interrupted', async () => {
        const { t, flags } = await setup();
        const first = (await submit(t.c, { type: TYPE, payload: {} })).json;
        const cli = start(['jobs', 'list', '--watch', ...flags]);
        await waitUntil(async () => cli.out().stdout, (s) => s.includes(first.id), { what: 'the existing job' });
        const second = (await submit(t.c, { type: TYPE, payload: {} })).json;
        await waitUntil(async () => cli.out().stdout, (s) => s.includes(second.id), { what: 'the new job' });
        expectStatus(await t.c.del(`/v1/jobs/${first.id}`), 200);
        await waitUntil(async () => cli.out().stdout, (s) => s.includes('"cancelled"'), { what: 'the cancel' });
        cli.proc.kill('SIGINT');
        const r = await cli.done;
        assert.equal(r.code, EXIT.ok, shown(r));
        const seen = r.stdout.trimEnd().split('\n').map((x) => JSON.parse(x));
        assert.deepEqual(seen.map((j) => [j.id, j.status]), [[first.id, 'queued'], [second.id, 'queued'], [first.id, 'cancelled']]);

        const tab = start(['jobs', 'list', '--watch', '--status', 'cancelled', '-o', 'table', ...flags]);
        await waitUntil(async () => tab.out().stdout, (s) => s.includes(first.id), { what: 'the table' });
        tab.proc.kill('SIGTERM');
        const rt = await tab.done;
        assert.equal(rt.code, EXIT.ok, shown(rt));
        assert.match(rt.stdout, new RegExp(`^ID +TYPE +STATUS +PROGRESS +CREATED\\n${first.id} +\\S+ +cancelled +- +\\S+\\n$`), shown(rt));
    });
});
