// The command line itself: `--help` on each subcommand prints its usage on stdout and exits 0, an unknown
// or incomplete option is named on stderr with the usage and exits 2, and neither starts anything. Each run
// is in a temp directory, bounded in time, with a --data there, so a daemon started by mistake would neither
// touch the checkout nor hang the test (it is killed and the exit status is then not 0 or 2).

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN } from './lib/worker.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-cli-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function run(args) {
    const env = { ...process.env };
    for (const k of ['ACCEPTD_URL', 'ACCEPTD_KEY', 'ACCEPTD_CONFIG', 'ACCEPTD_LISTEN', 'ACCEPTD_DATA', 'ACCEPTD_STORE']) delete env[k];
    const r = spawnSync(BIN, args, { cwd: tmp, env, encoding: 'utf8', timeout: 10_000, killSignal: 'SIGKILL' });
    return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, what: `acceptd ${args.join(' ')}` };
}

function show(r) {
    return `${r.what}: exit ${r.code} (signal ${r.signal})\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

const SERVE_FLAGS = ['--listen', '--data', '--store', '--config', '--public-url', '--help'];
const WORKER_FLAGS = ['--url', '--key', '--type', '--concurrency', '--lease-seconds', '--lease-wait', '--grace', '--name'];
const data = () => path.join(tmp, 'data');

describe('acceptd command line', () => {
    it('serve --help and serve -h print the serve usage with every flag on stdout and exit 0', () => {
        for (const args of [['serve', '--help'], ['serve', '-h'], ['serve', '--listen', '127.0.0.1:0', '--data', data(), '--help']]) {
            const r = run(args);
            assert.equal(r.code, 0, show(r));
            assert.match(r.stdout, /^usage: acceptd serve /, show(r));
            for (const f of SERVE_FLAGS) assert.ok(r.stdout.includes(f), `${f} missing\n${show(r)}`);
            assert.equal(r.stderr, '', show(r));
        }
        assert.ok(!fs.existsSync(data()), 'serve --help created the data directory');
    });

    it('worker --help and worker -h print the worker usage with every flag on stdout and exit 0', () => {
        for (const args of [['worker', '--help'], ['worker', '-h'], ['worker', '--type', 't', '--help', '--', 'true']]) {
            const r = run(args);
            assert.equal(r.code, 0, show(r));
            assert.match(r.stdout, /^usage: acceptd worker /, show(r));
            for (const f of WORKER_FLAGS) assert.ok(r.stdout.includes(f), `${f} missing\n${show(r)}`);
            assert.equal(r.stderr, '', show(r));
        }
    });

    it('an unknown option to serve is named on stderr with the usage, and exits 2', () => {
        for (const [args, msg] of [
            [['serve', '--data', data(), '--listen', '127.0.0.1:0', '--bogus'], /^acceptd serve: unknown option --bogus\n/],
            [['serve', '--data', data(), '--listen', '127.0.0.1:0', '-x'], /^acceptd serve: unknown option -x\n/],
            [['serve', '--data', data(), '--listen'], /^acceptd serve: --listen needs a value\n/],
        ]) {
            const r = run(args);
            assert.equal(r.code, 2, show(r));
            assert.match(r.stderr, msg, show(r));
            assert.match(r.stderr, /\nusage: acceptd serve /, show(r));
            assert.equal(r.stdout, '', show(r));
        }
        assert.ok(!fs.existsSync(data()), 'serve with a bad option created the data directory');
    });

    it('an unknown option to worker is named on stderr with the usage, and exits 2', () => {
        for (const [args, msg] of [
            [['worker', '--url', 'http://127.0.0.1:9', '--type', 't', '--bogus', '--', 'true'], /^acceptd worker: unknown option --bogus\n/],
            [['worker', '--url', 'http://127.0.0.1:9', '--type', 't', '-x', '--', 'true'], /^acceptd worker: unknown option -x\n/],
            [['worker', '--url', 'http://127.0.0.1:9', '--type'], /^acceptd worker: --type needs a value\n/],
        ]) {
            const r = run(args);
            assert.equal(r.code, 2, show(r));
            assert.match(r.stderr, msg, show(r));
            assert.match(r.stderr, /\nusage: acceptd worker /, show(r));
            assert.equal(r.stdout, '', show(r));
        }
    });

    it('submit --help and jobs --help print their usage with every flag on stdout and exit 0', () => {
        const flags = {
            submit: ['--payload', '--idempotency-key', '--priority', '--run-at', '--callback-url', '--wait', '--timeout', '--url', '--key', '--help'],
            jobs: ['list', 'get', 'result', 'cancel', 'retry', 'events', 'attempts', '--status', '--type', '--updated-after', '--limit',
                '--page-token', '--all', '--watch', '--url', '--key', '--output', '--help'],
        };
        for (const args of [['submit', '--help'], ['submit', '-h'], ['jobs', '--help'], ['jobs', 'list', '-h']]) {
            const r = run(args);
            assert.equal(r.code, 0, show(r));
            assert.match(r.stdout, new RegExp(`^usage: acceptd ${args[0]} `), show(r));
            for (const f of flags[args[0]]) assert.ok(r.stdout.includes(f), `${f} missing\n${show(r)}`);
            assert.equal(r.stderr, '', show(r));
        }
    });

    it('an unknown option or a missing argument to submit or jobs is named on stderr with the usage, and exits 2', () => {
        for (const [args, msg] of [
            [['submit', 't', '--bogus'], /^acceptd submit: unknown option --bogus\n/],
            [['submit', 't', '--payload'], /^acceptd submit: --payload needs a value\n/],
            [['submit'], /^acceptd submit: no job type given\n/],
            [['jobs', 'list', '--bogus'], /^acceptd jobs: unknown option --bogus\n/],
            [['jobs'], /^acceptd jobs: no verb given\n/],
            [['jobs', 'frobnicate'], /^acceptd jobs: unknown verb frobnicate\n/],
        ]) {
            const r = run(args);
            assert.equal(r.code, 2, show(r));
            assert.match(r.stderr, msg, show(r));
            assert.match(r.stderr, new RegExp(`\nusage: acceptd ${args[0]} `), show(r));
            assert.equal(r.stdout, '', show(r));
        }
    });

    it('acceptd --version and acceptd version print the version and commit on stdout and exit 0', () => {
        for (const args of [['--version'], ['version']]) {
            const r = run(args);
            assert.equal(r.code, 0, show(r));
            assert.match(r.stdout, /^acceptd \d+\.\d+\.\d+ \(commit \S+\)\n$/, show(r));
        }
    });
});
