// docs/tour.md, run: every ```console block of the tour is played in one bash session against a real
// daemon, so that the tour cannot go stale. A block is a terminal session as a reader would see it:
// lines starting with `$ ` are commands (continued on the next lines while a line ends with `\`, `|` or
// `&&`, or the shell says the command is unfinished), every other line is what the command printed.
//
// What is checked, command by command:
//   - the statuses: each line of the doc's output that is an HTTP status line (`HTTP/1.1 202 Accepted`) or
//     starts with a bare status code (`304 after 3.003891s`, from curl's -w '%{http_code}') must match the
//     real output's, in order;
//   - every line of JSON, with timestamps and request ids masked, must equal the real one;
//   - the ids (job_..., lse_...) and ETags in the doc's output are mapped to the real ones at the same place
//     in the real output, and later commands run with the real ones in their place: the doc keeps the ids
//     of the run that was pasted, so a reader can follow it, and the test follows along with its own;
//     so are page tokens and change-feed cursors (they count the store's sequence numbers, which differ
//     between SQLite and PostgreSQL), in later commands' `pageToken=` and `since=`.
// Also substituted: the daemon's address for http://127.0.0.1:8080 and ACCEPTD_BIN for build/acceptd.
// Blocks fenced otherwise (```sh, plain ```) are not run. ACCEPTD_TOUR_PRINT=1 prints each command's
// real output, for pasting into the doc after a change.

import { describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { it, startDaemon } from './lib/daemon.mjs';
import { BIN } from './lib/worker.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const TOUR = process.env.ACCEPTD_TOUR_DOC ?? path.join(REPO_ROOT, 'docs', 'tour.md');
const DOC_URL = 'http://127.0.0.1:8080';
const COMMAND_LIMIT_MS = (process.env.ACCEPTD_SANITIZED ? 3 : 1) * 40_000;

const TOKEN = /\b(?:job|lse)_[A-Za-z0-9_-]{20,}|"[A-Za-z0-9_-]{22}"/g; // ids and ETags
// Page tokens and change-feed cursors: they count the store's sequence numbers, which differ by store.
const CURSOR = /"(cursor|nextPageToken)":"([^"]+)"/g;
const CURSOR_ARG = /\b(since=|pageToken=)([A-Za-z0-9_-]+)/g;
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z/g;
const STATUS = /^(?:HTTP\/[\d.]+ (\d{3})\b|(\d{3})(?: |$))/;

/** The tour's console blocks: [{line (1-based, of the fence), commands: [{text, line, expected: [lines]}]}]. */
function parseTour(text) {
    const lines = text.split('\n');
    const blocks = [];
    for (let i = 0; i < lines.length; i++) {
        if (!/^```console\s*$/.test(lines[i])) continue;
        const block = { line: i + 1, commands: [] };
        let j = i + 1;
        for (; j < lines.length && !/^```\s*$/.test(lines[j]); j++) {
            const l = lines[j];
            if (l.startsWith('$ ')) {
                let cmd = l.slice(2);
                while (j + 1 < lines.length && !/^```/.test(lines[j + 1]) && unfinished(cmd)) cmd += '\n' + lines[++j];
                block.commands.push({ text: cmd, line: j + 1, expected: [] });
            } else if (block.commands.length > 0) {
                block.commands.at(-1).expected.push(l);
            } else if (l.trim() !== '') {
                throw new Error(`${TOUR}:${j + 1}: output before the block's first command`);
            }
        }
        if (j >= lines.length) throw new Error(`${TOUR}:${i + 1}: console block not closed`);
        for (const c of block.commands) while (c.expected.length > 0 && c.expected.at(-1) === '') c.expected.pop();
        blocks.push(block);
        i = j;
    }
    return blocks;
}

function unfinished(cmd) {
    if (/(\\|\||&&)\s*$/.test(cmd)) return true;
    const r = spawnSync('bash', ['-n', '-c', cmd], { encoding: 'utf8' });
    return r.status !== 0 && /unexpected end of file/.test(r.stderr);
}

/**
 * One bash process, fed one command at a time; each command's output (stdout and stderr together) is
 * read up to a marker line the shell prints after it. Its own process group, killed as a whole at the end
 * (background commands of the tour, such as a worker, go with it).
 */
function shell(env) {
    const proc = spawn('bash', ['--norc', '--noprofile'], { cwd: REPO_ROOT, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let buf = '';
    let waiting = null;
    proc.stdout.setEncoding('utf8');
    proc.stderr.setEncoding('utf8');
    const onData = (c) => {
        buf += c;
        if (waiting) waiting();
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.stdin.write('exec 2>&1\n');
    let n = 0;
    return {
        run(cmd) {
            const mark = `@@tour-${process.pid}-${++n}@@`;
            proc.stdin.write(`${cmd}\nprintf '\\n${mark} %s\\n' "$?"\n`);
            return new Promise((resolve, reject) => {
                const timer = setTimeout(() => reject(new Error(`no end of command within ${COMMAND_LIMIT_MS} ms; output so far:\n${buf}`)), COMMAND_LIMIT_MS);
                waiting = () => {
                    const at = buf.indexOf(`\n${mark} `);
                    if (at < 0) return;
                    const eol = buf.indexOf('\n', at + 1 + mark.length);
                    if (eol < 0) return;
                    const out = buf.slice(0, at);
                    const rc = Number(buf.slice(at + 1 + mark.length, eol));
                    buf = buf.slice(eol + 1);
                    waiting = null;
                    clearTimeout(timer);
                    resolve({ out, rc });
                };
                waiting();
            });
        },
        kill() {
            try {
                process.kill(-proc.pid, 'SIGKILL');
            } catch {
                /* gone */
            }
        },
    };
}

const statuses = (lines) => lines.map((l) => STATUS.exec(l)).filter(Boolean).map((m) => m[1] ?? m[2]);
const jsonLines = (lines) => lines.filter((l) => /^[[{]/.test(l));
// A request id is made afresh for every request (unless the client sends one).
const masked = (s) => s.replace(TIME, '<time>').replace(/"requestId":"[A-Za-z0-9._-]+"/g, '"requestId":"<id>"');

describe('docs/tour.md', () => {
    const blocks = parseTour(fs.readFileSync(TOUR, 'utf8'));
    let sh = null;
    // The tour's `mktemp -d` lands in here (TMPDIR), removed with whatever the tour left in it.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-tour-'));
    after(() => {
        sh?.kill();
        if (!process.env.ACCEPTD_KEEP_TMP) fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('has console blocks to run', () => {
        assert.ok(blocks.length >= 5, `only ${blocks.length} console blocks in ${TOUR}`);
    });

    it('runs as written: each command answers the statuses and JSON the tour shows', async (t) => {
        // The tour's daemon: no configuration at all (loopback only, no keys, any job type).
        const d = await startDaemon({ config: '' });
        sh = shell({ ...process.env, TMPDIR: tmp, ACCEPTD_URL: '', ACCEPTD_KEY: '' });
        const ids = new Map(); // id or ETag in the doc -> the real one
        const cursors = new Map(); // page token or cursor in the doc -> the real one
        const subst = (s) => {
            let r = s.replaceAll(DOC_URL, d.url).replace(/(^|[\s;&|(])build\/acceptd\b/g, `$1${BIN}`);
            for (const [from, to] of ids) r = r.replaceAll(from, to);
            r = r.replace(CURSOR_ARG, (m, k, v) => k + (cursors.get(v) ?? v));
            return r.replace(CURSOR, (m, k, v) => `"${k}":"${cursors.get(v) ?? v}"`);
        };
        const map = (m, want, have, why) => {
            assert.equal(have.length, want.length, `ids, ETags, cursors: ${want.length} in the tour, ${have.length} printed\n${why}`);
            want.forEach((w, k) => {
                if (m.has(w)) assert.equal(have[k], m.get(w), `${w} stands for ${m.get(w)} earlier, here for ${have[k]}\n${why}`);
                else m.set(w, have[k]);
            });
        };
        let ran = 0;
        try {
            for (const block of blocks) {
                for (const c of block.commands) {
                    const where = `${path.relative(REPO_ROOT, TOUR)}:${c.line}`;
                    const { out, rc } = await sh.run(subst(c.text));
                    const got = out.split('\n');
                    while (got.length > 0 && got.at(-1) === '') got.pop();
                    if (process.env.ACCEPTD_TOUR_PRINT) t.diagnostic(`${where}\n$ ${c.text}\n${out}`);
                    const why = `${where}: $ ${c.text}\n--- the tour shows ---\n${c.expected.join('\n')}\n--- it printed ---\n${out}`;
                    assert.equal(rc, 0, `exit status ${rc}\n${why}`);

                    // Map the doc's ids, ETags and cursors to this run's, in the order they appear.
                    const doc = c.expected.join('\n');
                    map(ids, doc.match(TOKEN) ?? [], out.match(TOKEN) ?? [], why);
                    map(cursors, [...doc.matchAll(CURSOR)].map((m) => m[2]), [...out.matchAll(CURSOR)].map((m) => m[2]), why);

                    assert.deepEqual(statuses(got), statuses(c.expected), `statuses\n${why}`);
                    assert.deepEqual(jsonLines(got).map(masked), jsonLines(c.expected).map((l) => masked(subst(l))), `JSON\n${why}`);
                    ran++;
                }
            }
        } finally {
            sh.kill();
            await d.stop();
        }
        assert.ok(ran >= 30, `only ${ran} commands run`);
    });
});
