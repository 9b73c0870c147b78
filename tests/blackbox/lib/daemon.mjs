// Black-box harness: starts the real acceptd binary on an ephemeral port with a throwaway data
// directory, and talks HTTP to it. Nothing here knows how the daemon is built inside.
//
//   ACCEPTD_BIN        binary to run (default: <repo>/build/acceptd)
//   ACCEPTD_KEEP_TMP=1 keep the temp dirs (config + data) after the run, for post-mortems
//   ACCEPTD_TEST_PG    a postgresql:// URL of a database on a server the tests may create databases on
//                      (`make blackbox-pg` starts one with scripts/pg.sh): every daemon then gets the
//                      PostgreSQL store, in a fresh database of its own. Unset: the SQLite store in the data dir.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import * as nodeTest from 'node:test';
import * as openapi from './openapi.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BIN = process.env.ACCEPTD_BIN ? path.resolve(process.env.ACCEPTD_BIN) : path.join(REPO_ROOT, 'build', 'acceptd');
const LISTENING = /acceptd: listening on (https?:\/\/\S+)/;
const START_LIMIT_MS = 10_000;
const STOP_LIMIT_MS = 10_000;
const LOG_CAP = 1 << 20; // keep the last 1 MiB of each stream

const live = new Set(); // child processes still running
const daemons = new Set(); // every daemon object, for failure diagnostics
const tmpDirs = new Set();

function killAllSync() {
    for (const p of live) {
        try {
            p.kill('SIGKILL');
        } catch {
            /* already gone */
        }
    }
    live.clear();
}

process.on('exit', (code) => {
    killAllSync();
    if (process.env.ACCEPTD_KEEP_TMP || code !== 0) {
        for (const d of tmpDirs) process.stderr.write(`acceptd blackbox: kept ${d}\n`);
        return;
    }
    for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
        killAllSync();
        process.exit(130);
    });
}
// A daemon nobody stopped (a test failed between start and stop, or a start that should have failed did not)
// would keep this process, and so the whole run, alive forever. This hook runs before the file's own
// top-level after hooks, so it only arms a timer that does not itself hold the process: those hooks still
// stop their daemons cleanly, and whatever is left once they are done is killed.
nodeTest.after(() => {
    setTimeout(() => {
        if (live.size === 0) return;
        process.stderr.write(`acceptd blackbox: killing ${live.size} daemon(s) still running after the last test\n`);
        killAllSync();
    }, STOP_LIMIT_MS).unref();
});

function appendCapped(buf, chunk) {
    const s = buf + chunk;
    return s.length > LOG_CAP ? s.slice(s.length - LOG_CAP) : s;
}

// ---------------------------------------------------------------------------------------------
// Store backend

const PG_URL = process.env.ACCEPTD_TEST_PG || null;

/** The store backend the daemons of this run use: 'postgres' when ACCEPTD_TEST_PG is set, else 'sqlite'. */
export const backend = PG_URL ? 'postgres' : 'sqlite';

const PG_URL_RE = /^(postgres(?:ql)?:\/\/[^/?#]*)(\/[^?#]*)?(.*)$/s;

/** url with its database name replaced by db (libpq URLs do not all parse as WHATWG URLs). */
function withDatabase(url, db) {
    const m = PG_URL_RE.exec(url);
    if (!m) throw new Error(`ACCEPTD_TEST_PG is not a postgresql:// URL: ${url}`);
    return `${m[1]}/${encodeURIComponent(db)}${m[3]}`;
}

/** The database name in a postgresql:// URL. */
function databaseOf(url) {
    const m = PG_URL_RE.exec(url);
    return m && m[2] && m[2].length > 1 ? decodeURIComponent(m[2].slice(1)) : 'postgres';
}

/** A PostgreSQL client program: from the newest /usr/lib/postgresql/N/bin (Debian), else from PATH. */
function pgProgram(name) {
    let versions = [];
    try {
        versions = fs.readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    } catch {
        /* not Debian's layout */
    }
    for (const v of versions) {
        const p = `/usr/lib/postgresql/${v}/bin/${name}`;
        if (fs.existsSync(p)) return p;
    }
    return name;
}

function pg(program, args) {
    try {
        return execFileSync(pgProgram(program), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
        throw new Error(`${program} ${args.join(' ')} failed: ${e.stderr?.toString() || e.message}`);
    }
}

// Unique across the test files running at once and across runs on a long-lived server.
const dbPrefix = `acceptd_bb_${process.pid}_${Date.now().toString(36)}`;
let dbCount = 0;

/**
 * A new, empty store for startDaemon({store}), for several daemons that share one store (a cluster):
 * on PostgreSQL the URL of a fresh database; on SQLite null, as a SQLite store lives in one daemon's data
 * dir and cannot be shared (check `backend` first in a test that needs a shared store).
 */
export function freshStore() {
    if (!PG_URL) return null;
    const db = `${dbPrefix}_${++dbCount}`;
    pg('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', PG_URL, '-c', `CREATE DATABASE "${db}"`]);
    return withDatabase(PG_URL, db);
}

/**
 * Everything a daemon has at rest, for tests that look for what must not be stored in the clear:
 * [{name, bytes}] for each file in its data dir (the SQLite database among them) and, on PostgreSQL, a
 * pg_dump of its database (named "pg_dump <db>").
 */
export function storeContents(d) {
    const out = [];
    for (const f of fs.readdirSync(d.dataDir)) {
        const p = path.join(d.dataDir, f);
        if (fs.statSync(p).isFile()) out.push({ name: f, bytes: fs.readFileSync(p) });
    }
    if (d.store) out.push({ name: `pg_dump ${databaseOf(d.store)}`, bytes: pg('pg_dump', ['--no-owner', '-d', d.store]) });
    return out;
}

const storeOfDataDir = new Map(); // data dir -> the store its daemon used, so that reusing a dir reuses its state

// Spawn the binary and resolve once it prints its listening line. Rejects (with its output) if it
// exits first or takes longer than START_LIMIT_MS.
function spawnDaemon(state) {
    if (!fs.existsSync(BIN)) {
        return Promise.reject(new Error(`acceptd binary not found at ${BIN}: build it or set ACCEPTD_BIN`));
    }
    const args = ['serve', '--listen', '127.0.0.1:0', '--data', state.dataDir, '--config', state.configFile];
    if (state.store) args.push('--store', state.store);
    const proc = spawn(BIN, args, { env: { ...process.env, ...state.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(proc);
    state.proc = proc;
    state.exited = new Promise((resolve) => {
        proc.on('exit', (code, signal) => {
            live.delete(proc);
            resolve({ code, signal });
        });
    });
    proc.stderr.setEncoding('utf8');
    proc.stdout.setEncoding('utf8');
    proc.stderr.on('data', (c) => {
        state.stderrText = appendCapped(state.stderrText, c);
    });
    return new Promise((resolve, reject) => {
        let lineBuf = '';
        let done = false;
        const fail = (why) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            proc.kill('SIGKILL');
            reject(new Error(`${why}\n$ ${BIN} ${args.join(' ')}\n--- stdout ---\n${state.stdoutText}\n--- stderr ---\n${state.stderrText}`));
        };
        const timer = setTimeout(() => fail(`acceptd did not report listening within ${START_LIMIT_MS} ms`), START_LIMIT_MS);
        proc.stdout.on('data', (c) => {
            state.stdoutText = appendCapped(state.stdoutText, c);
            if (done) return;
            lineBuf += c;
            let nl;
            while ((nl = lineBuf.indexOf('\n')) >= 0) {
                const line = lineBuf.slice(0, nl);
                lineBuf = lineBuf.slice(nl + 1);
                const m = LISTENING.exec(line);
                if (m) {
                    done = true;
                    clearTimeout(timer);
                    resolve(m[1].replace(/\/+$/, ''));
                    return;
                }
            }
        });
        proc.on('error', (e) => fail(`spawn failed: ${e.message}`));
        proc.on('exit', (code, signal) => fail(`acceptd exited before listening (code ${code}, signal ${signal})`));
    });
}

/**
 * Start a daemon. config: the YAML text; env: extra environment; dataDir: reuse a data dir.
 * store: a postgresql:// URL (from freshStore() or another daemon's .store) to share a store with other
 * daemons; null for the SQLite store in the data dir whatever the run's backend; omitted, the run's
 * backend: SQLite in the data dir, or on PostgreSQL a fresh database of its own (the one of the daemon
 * that used dataDir before, when a data dir is reused).
 * Returns {url, proc, dataDir, store, configFile, stop(), kill9(), waitExit(), restart(), stderr, stdout,
 * alive}; store is the URL passed as --store, or null. restart() starts a new process on the same data dir,
 * store and config and updates url/proc in place.
 */
export async function startDaemon({ config = standardConfig(), env = {}, dataDir, store } = {}) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-bb-'));
    tmpDirs.add(tmp);
    const configFile = path.join(tmp, 'acceptd.yaml');
    fs.writeFileSync(configFile, config);
    const dir = dataDir ?? path.join(tmp, 'data');
    fs.mkdirSync(dir, { recursive: true });
    const key = path.resolve(dir);
    if (store === undefined) store = storeOfDataDir.has(key) ? storeOfDataDir.get(key) : freshStore();
    storeOfDataDir.set(key, store);

    const state = { tmp, configFile, dataDir: dir, store, env, proc: null, exited: null, stdoutText: '', stderrText: '' };
    const d = {
        url: '',
        get proc() {
            return state.proc;
        },
        dataDir: dir,
        store,
        configFile,
        get stderr() {
            return state.stderrText;
        },
        get stdout() {
            return state.stdoutText;
        },
        get alive() {
            return state.proc !== null && live.has(state.proc);
        },
        /** SIGTERM, then wait for the exit (SIGKILL after STOP_LIMIT_MS). Resolves {code, signal}. */
        async stop() {
            if (!d.alive) return state.exited ? state.exited : { code: null, signal: null };
            state.proc.kill('SIGTERM');
            const t = setTimeout(() => state.proc.kill('SIGKILL'), STOP_LIMIT_MS);
            const r = await state.exited;
            clearTimeout(t);
            return r;
        },
        /**
         * Wait for the current process to exit (after a signal sent through proc); SIGKILL it after
         * timeoutMs. Resolves {code, signal}.
         */
        async waitExit(timeoutMs = STOP_LIMIT_MS) {
            const t = setTimeout(() => state.proc.kill('SIGKILL'), timeoutMs);
            const r = await state.exited;
            clearTimeout(t);
            return r;
        },
        /** SIGKILL, wait for the exit. */
        async kill9() {
            if (!d.alive) return state.exited;
            state.proc.kill('SIGKILL');
            return state.exited;
        },
        /** Start again on the same data dir, store and config (stops a running one first). */
        async restart() {
            if (d.alive) await d.stop();
            d.url = await spawnDaemon(state);
            return d;
        },
    };
    daemons.add(d);
    d.url = await spawnDaemon(state);
    return d;
}

/**
 * Start the daemon with opts (as startDaemon) and assert that it refuses: it exits with status 1 before it
 * listens, and its stderr matches stderrPattern.
 */
export async function assertStartFails(opts, stderrPattern) {
    const e = await startDaemon(opts).then(
        async (d) => {
            await d.stop();
            return null;
        },
        (err) => err,
    );
    assert.ok(e !== null, `started with config:\n${opts.config}`);
    // The harness's error: why it failed, the command, then the daemon's stdout and stderr.
    assert.match(e.message, /^acceptd exited before listening \(code 1, signal null\)/, e.message);
    assert.match(e.message.slice(e.message.indexOf('--- stderr ---')), stderrPattern, e.message);
}

// ---------------------------------------------------------------------------------------------
// Configuration

/** How many generated tenants standardConfig() declares (t1..tN, keys ck-i / wk-i / ak-i). */
export const TENANTS = 64;

/**
 * The config most files use. Fixed keys ka/kb (clients of a/b), wa/wb (workers), adm (admin of a),
 * plus TENANTS generated tenants so that each test can have its own (see tenant()).
 * Override any section with a YAML fragment string.
 */
export function standardConfig({
    tenants = TENANTS,
    types = `
  video.transcode: { required: [sourceUrl], maxAttempts: 3 }
  report.export: {}
  image.resize: { maxAttempts: 7 }
  email.send: {}`,
    routes = `
  - { method: POST, path: /v1/videos, type: video.transcode, resource: "/v1/videos/{id}", onComplete: redirect }
  - { method: POST, path: /v1/reports, type: report.export, requireIdempotencyKey: true }`,
    retention = '{ succeeded: 30d, failed: 30d, cancelled: 30d, partialSuccess: 30d }',
    tombstone = '2s',
    sweepInterval = '200ms',
    limits = '{ maxBodyBytes: 4096, maxWaitSeconds: 5 }',
} = {}) {
    const keys = [
        '  - { key: "ka", tenant: a, role: client }',
        '  - { key: "kb", tenant: b, role: client }',
        '  - { key: "wa", tenant: a, role: worker }',
        '  - { key: "wb", tenant: b, role: worker }',
        '  - { key: "adm", tenant: a, role: admin }',
    ];
    for (let i = 1; i <= tenants; i++) {
        keys.push(`  - { key: "ck-${i}", tenant: t${i}, role: client }`);
        keys.push(`  - { key: "wk-${i}", tenant: t${i}, role: worker }`);
        keys.push(`  - { key: "ak-${i}", tenant: t${i}, role: admin }`);
    }
    return `keys:
${keys.join('\n')}
types:${types}
routes:${routes}
retention: ${retention}
tombstone: ${tombstone}
sweepInterval: ${sweepInterval}
limits: ${limits}
`;
}

const tenantCounters = new WeakMap();

/**
 * A tenant nobody else in this process has used on daemon d:
 * {name, c (client api), w (worker api), a (admin api), keys: {c, w, a}}.
 * Only for daemons started with standardConfig().
 */
export function tenant(d) {
    const i = (tenantCounters.get(d) ?? 0) + 1;
    if (i > TENANTS) throw new Error(`more than ${TENANTS} tenants used on one daemon: raise TENANTS`);
    tenantCounters.set(d, i);
    return { name: `t${i}`, c: api(d, `ck-${i}`), w: api(d, `wk-${i}`), a: api(d, `ak-${i}`), keys: { c: `ck-${i}`, w: `wk-${i}`, a: `ak-${i}` } };
}

// ---------------------------------------------------------------------------------------------
// HTTP

/**
 * A client bound to a daemon (or a base URL string) and a bearer key (omit for no Authorization).
 * req(method, path, {body, raw, headers, timeoutMs}) -> {status, headers, json, text, ms, method, path}.
 * body is sent as JSON; raw is sent as-is (content-type application/json unless headers say otherwise).
 * A header set to null in headers is not sent. Redirects are never followed. A request that gets no
 * complete answer within timeoutMs (default 20 s; the test configs cap waits at 5 s) throws, and so does an
 * answer that docs/openapi.json does not describe (lib/openapi.mjs; ACCEPTD_OPENAPI_VALIDATE=0 skips that).
 */
export function api(target, key) {
    const base = () => (typeof target === 'string' ? target : target.url);
    async function req(method, p, { body, raw, headers = {}, timeoutMs = 20_000 } = {}) {
        const h = {};
        if (key !== undefined && key !== null) h.authorization = `Bearer ${key}`;
        let payload;
        if (raw !== undefined) payload = raw;
        else if (body !== undefined) payload = JSON.stringify(body);
        if (payload !== undefined) h['content-type'] = 'application/json';
        for (const [k, v] of Object.entries(headers)) {
            const lk = k.toLowerCase();
            if (v === null || v === undefined) delete h[lk];
            else h[lk] = String(v);
        }
        const t0 = performance.now();
        let res;
        let text;
        try {
            res = await fetch(base() + p, { method, headers: h, body: payload, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
            text = await res.text();
        } catch (e) {
            if (e.name === 'TimeoutError') throw new Error(`${method} ${p}: no complete answer within ${timeoutMs} ms`);
            throw e;
        }
        const ms = performance.now() - t0;
        let json = null;
        const ct = res.headers.get('content-type') ?? '';
        if (text.length > 0 && /json/i.test(ct)) {
            try {
                json = JSON.parse(text);
            } catch {
                json = null;
            }
        }
        // Every answer must be one docs/openapi.json describes (lib/openapi.mjs).
        const violation = openapi.check({ method, target: p, status: res.status, headers: res.headers, text });
        if (violation) throw new Error(violation);
        return { status: res.status, headers: res.headers, json, text, ms, method, path: p };
    }
    return {
        key,
        req,
        get: (p, o) => req('GET', p, o),
        post: (p, body, o = {}) => req('POST', p, { ...o, body }),
        del: (p, o) => req('DELETE', p, o),
    };
}

/**
 * Send bytes on a fresh TCP connection and read one response. Resolves
 * {status, headers (lowercase names), body, json, raw}; status 0 when nothing parseable came back
 * before the server closed or timeoutMs passed. Write errors are ignored (the server may answer and
 * close before reading everything, which is what we are testing).
 */
export function rawRequest(target, data, { timeoutMs = 5000 } = {}) {
    const u = new URL(typeof target === 'string' ? target : target.url);
    return new Promise((resolve) => {
        const chunks = [];
        let finished = false;
        const sock = net.connect({ host: u.hostname, port: Number(u.port) });
        const finish = () => {
            if (finished) return;
            finished = true;
            clearTimeout(timer);
            sock.destroy();
            resolve(parseRawResponse(Buffer.concat(chunks)));
        };
        const timer = setTimeout(finish, timeoutMs);
        sock.on('connect', () => sock.write(data, () => {}));
        sock.on('data', (c) => {
            chunks.push(c);
            const r = parseRawResponse(Buffer.concat(chunks));
            if (r.complete) finish();
        });
        sock.on('error', () => finish());
        sock.on('close', finish);
    });
}

function parseRawResponse(buf) {
    const s = buf.toString('latin1');
    const end = s.indexOf('\r\n\r\n');
    const out = { status: 0, headers: {}, body: '', json: null, raw: s, complete: false };
    if (end < 0) return out;
    const lines = s.slice(0, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
    if (!m) return out;
    out.status = Number(m[1]);
    for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) out.headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const body = buf.subarray(Buffer.byteLength(s.slice(0, end + 4), 'latin1'));
    const len = out.headers['content-length'];
    if (/chunked/i.test(out.headers['transfer-encoding'] ?? '')) {
        const parts = [];
        let off = 0;
        for (;;) {
            const eol = body.indexOf('\r\n', off);
            if (eol < 0) break;
            const size = parseInt(body.subarray(off, eol).toString('latin1'), 16);
            if (Number.isNaN(size)) break;
            if (size === 0) {
                out.complete = true;
                break;
            }
            if (body.length < eol + 2 + size) break;
            parts.push(body.subarray(eol + 2, eol + 2 + size));
            off = eol + 2 + size + 2;
        }
        out.body = Buffer.concat(parts).toString('utf8');
    } else if (len !== undefined) {
        out.complete = body.length >= Number(len);
        out.body = body.subarray(0, Number(len)).toString('utf8');
    } else {
        out.body = body.toString('utf8');
    }
    if (/json/i.test(out.headers['content-type'] ?? '')) {
        try {
            out.json = JSON.parse(out.body);
        } catch {
            out.json = null;
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Tests

/**
 * node:test's it(), plus: when the test fails, the stderr every daemon wrote during the test is
 * attached to the report as a diagnostic.
 */
function logged(fn) {
    return async (t) => {
        const marks = new Map([...daemons].map((d) => [d, d.stderr.length]));
        try {
            return await fn(t);
        } catch (e) {
            for (const d of daemons) {
                const from = marks.get(d) ?? 0;
                const text = d.stderr.slice(Math.max(from, d.stderr.length - 8000));
                if (text.trim()) t.diagnostic(`acceptd stderr (${d.url}):\n${text}`);
            }
            throw e;
        }
    };
}

function wrapIt(itFn) {
    return (name, opts, fn) => (typeof opts === 'function' ? itFn(name, logged(opts)) : itFn(name, opts, logged(fn)));
}

export const it = wrapIt(nodeTest.it);
it.skip = wrapIt(nodeTest.it.skip);
it.only = wrapIt(nodeTest.it.only);
it.todo = nodeTest.it.todo;
