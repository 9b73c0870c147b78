// Packaging: `make install` into a DESTDIR puts the binary, the man page, the example configuration and the
// systemd unit where PREFIX says, with the unit's paths filled in; `systemd-analyze verify` accepts the unit;
// `acceptd --version` names the commit; and the man page covers every command and flag the binary's own
// --help lists and every configuration section the daemon's parser accepts.
//
// make runs from the repository root with INSTALL_BIN set to the binary under test, so nothing is compiled.
// The man page's coverage is derived, not listed here: the commands from `acceptd --help`, their flags from
// `acceptd CMD --help`, the configuration's top-level keys from docs/configuration.md, checked against the
// daemon (each is accepted, an unknown one is refused) and against the parser's table in src/core/config.c.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN } from './lib/worker.mjs';
import { startDaemon } from './lib/daemon.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-pack-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function run(cmd, args, { cwd = tmp, env = {} } = {}) {
    const e = { ...process.env, ...env };
    // A make above this one (`make blackbox`) must not hand its jobserver to the make run here.
    for (const k of ['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'ACCEPTD_CONFIG', 'ACCEPTD_LISTEN', 'ACCEPTD_DATA', 'ACCEPTD_STORE']) delete e[k];
    const r = spawnSync(cmd, args, { cwd, env: e, encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' });
    return { code: r.status, signal: r.signal, stdout: r.stdout ?? '', stderr: r.stderr ?? '', what: `${cmd} ${args.join(' ')}`, error: r.error };
}

function show(r) {
    return `${r.what}: exit ${r.code} (signal ${r.signal}${r.error ? `, ${r.error.message}` : ''})\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
}

/** Every regular file under dir, as paths relative to it, sorted. */
function listFiles(dir) {
    const out = [];
    const walk = (d) => {
        for (const e of fs.readdirSync(d, { withFileTypes: true })) {
            const p = path.join(d, e.name);
            if (e.isDirectory()) walk(p);
            else out.push(path.relative(dir, p));
        }
    };
    if (fs.existsSync(dir)) walk(dir);
    return out.sort();
}

function install(dest, vars) {
    const r = run('make', ['install', `DESTDIR=${dest}`, `INSTALL_BIN=${BIN}`, ...vars], { cwd: REPO_ROOT });
    assert.equal(r.code, 0, show(r));
    assert.doesNotMatch(r.stdout, /\bCC\b|\bLINK\b/, `make install compiled something\n${show(r)}`);
    return r;
}

/** The unit's directives as [section, key, value] triples. */
function unitDirectives(text) {
    const out = [];
    let section = '';
    for (const line of text.split('\n')) {
        const l = line.trim();
        if (l === '' || l.startsWith('#') || l.startsWith(';')) continue;
        const s = /^\[(.+)\]$/.exec(l);
        if (s) section = s[1];
        else {
            const i = l.indexOf('=');
            out.push([section, l.slice(0, i), l.slice(i + 1)]);
        }
    }
    return out;
}

/**
 * systemd-analyze verify on a unit file. It exits 0 after only warning about an unknown directive or a
 * value it cannot parse (and ignoring them), so anything it says counts as a failure too.
 */
function verifyUnit(file) {
    const r = run('systemd-analyze', ['verify', '--man=no', '--generators=no', file], { env: { SYSTEMD_LOG_LEVEL: 'notice', SYSTEMD_LOG_COLOR: '0' } });
    return { ok: r.code === 0 && r.stderr.trim() === '' && r.stdout.trim() === '', r };
}

const manText = () => fs.readFileSync(path.join(REPO_ROOT, 'docs', 'acceptd.1'), 'utf8');

/** roff source to the words a reader sees: escapes of '-' undone, font changes dropped. */
function plainMan(roff) {
    return roff
        .replace(/\\-/g, '-')
        .replace(/\\f[BIRP]/g, '')
        .replace(/\\\(en/g, '-')
        .replace(/\\e/g, '\\');
}

/** The CONFIGURATION section of the man page: {key: text of its entry}. */
function manConfigEntries(roff) {
    const m = /^\.SH CONFIGURATION\n([\s\S]*?)^\.SH /m.exec(roff);
    assert.ok(m, 'docs/acceptd.1 has no CONFIGURATION section');
    const entries = {};
    const parts = m[1].split(/^\.TP\n/m).slice(1);
    for (const p of parts) {
        const head = /^\.B ([A-Za-z]+)\n/.exec(p);
        if (head) entries[head[1]] = plainMan(p.slice(head[0].length));
    }
    return entries;
}

/** docs/configuration.md: the top-level keys (its table) and, per `### ` heading, the fields of its table. */
function docConfig() {
    const md = fs.readFileSync(path.join(REPO_ROOT, 'docs', 'configuration.md'), 'utf8');
    const sections = {};
    const chunks = md.split(/^### /m).slice(1);
    for (const c of chunks) {
        const title = c.slice(0, c.indexOf('\n')).trim();
        const body = c.split(/^## /m)[0];
        const fields = [...body.matchAll(/^\| `([A-Za-z]+)` \|/gm)].map((x) => x[1]);
        sections[title] = fields;
    }
    const top = sections['Top-level keys'];
    assert.ok(top && top.length > 10, `docs/configuration.md: no "Top-level keys" table\n${Object.keys(sections)}`);
    delete sections['Top-level keys'];
    delete sections.Durations;
    return { top, sections };
}

/** The names in the parser's table of top-level keys (src/core/config.c, top_fields). */
function parserTopKeys() {
    const src = fs.readFileSync(path.join(REPO_ROOT, 'src', 'core', 'config.c'), 'utf8');
    const m = /static const struct field top_fields\[\] = \{([\s\S]*?)\{NULL\},/.exec(src);
    assert.ok(m, 'src/core/config.c: top_fields not found');
    return [...m[1].matchAll(/\{"([A-Za-z]+)",/g)].map((x) => x[1]);
}

function serveWithConfig(name, yaml) {
    const file = path.join(tmp, `${name}.yaml`);
    fs.writeFileSync(file, yaml);
    const r = run(BIN, ['serve', '--config', file, '--listen', '127.0.0.1:0', '--data', path.join(tmp, `data-${name}`)], {});
    return r;
}

describe('make install', () => {
    const dest = path.join(tmp, 'dest');

    it('installs the binary, the man page, the example configuration and the unit under PREFIX, and uninstall removes all but the configuration', () => {
        install(dest, ['PREFIX=/usr']);
        assert.deepEqual(listFiles(dest), ['etc/acceptd/acceptd.yaml', 'usr/bin/acceptd', 'usr/lib/systemd/system/acceptd.service', 'usr/share/man/man1/acceptd.1']);
        assert.deepEqual(fs.readFileSync(path.join(dest, 'usr/bin/acceptd')), fs.readFileSync(BIN), 'the installed binary is not INSTALL_BIN');
        assert.equal(fs.statSync(path.join(dest, 'usr/bin/acceptd')).mode & 0o777, 0o755);
        assert.equal(fs.statSync(path.join(dest, 'etc/acceptd/acceptd.yaml')).mode & 0o777, 0o600, 'the configuration holds keys: root only');
        assert.equal(fs.readFileSync(path.join(dest, 'usr/share/man/man1/acceptd.1'), 'utf8'), manText());

        const unit = fs.readFileSync(path.join(dest, 'usr/lib/systemd/system/acceptd.service'), 'utf8');
        assert.doesNotMatch(unit, /@[A-Z]+@/, unit);
        const d = unitDirectives(unit);
        const get = (k) => d.filter(([s, key]) => s === 'Service' && key === k).map(([, , v]) => v);
        assert.match(get('ExecStart')[0] ?? '', /^\/usr\/bin\/acceptd serve /, unit);
        assert.deepEqual(get('LoadCredential'), ['acceptd.yaml:/etc/acceptd/acceptd.yaml'], unit);

        // A second install keeps an edited configuration.
        fs.appendFileSync(path.join(dest, 'etc/acceptd/acceptd.yaml'), '# edited\n');
        install(dest, ['PREFIX=/usr']);
        assert.match(fs.readFileSync(path.join(dest, 'etc/acceptd/acceptd.yaml'), 'utf8'), /# edited\n$/);

        const u = run('make', ['uninstall', `DESTDIR=${dest}`, 'PREFIX=/usr'], { cwd: REPO_ROOT });
        assert.equal(u.code, 0, show(u));
        assert.deepEqual(listFiles(dest), ['etc/acceptd/acceptd.yaml']);
    });

    it('defaults to PREFIX=/usr/local, and each directory can be moved on its own', () => {
        const d1 = path.join(tmp, 'dest-local');
        install(d1, []);
        assert.deepEqual(listFiles(d1), [
            'usr/local/bin/acceptd',
            'usr/local/etc/acceptd/acceptd.yaml',
            'usr/local/lib/systemd/system/acceptd.service',
            'usr/local/share/man/man1/acceptd.1',
        ]);
        assert.match(fs.readFileSync(path.join(d1, 'usr/local/lib/systemd/system/acceptd.service'), 'utf8'), /^ExecStart=\/usr\/local\/bin\/acceptd /m);

        const d2 = path.join(tmp, 'dest-dirs');
        install(d2, ['PREFIX=/usr', 'BINDIR=/opt/ad/sbin', 'MANDIR=/opt/ad/man', 'SYSCONFDIR=/opt/ad/etc', 'UNITDIR=/opt/ad/units']);
        assert.deepEqual(listFiles(d2), ['opt/ad/etc/acceptd/acceptd.yaml', 'opt/ad/man/man1/acceptd.1', 'opt/ad/sbin/acceptd', 'opt/ad/units/acceptd.service']);
        const unit = fs.readFileSync(path.join(d2, 'opt/ad/units/acceptd.service'), 'utf8');
        assert.match(unit, /^ExecStart=\/opt\/ad\/sbin\/acceptd /m, unit);
        assert.match(unit, /^LoadCredential=acceptd\.yaml:\/opt\/ad\/etc\/acceptd\/acceptd\.yaml$/m, unit);
    });

    it('the installed unit passes systemd-analyze verify, is hardened, and a broken unit fails the check', () => {
        const d = path.join(tmp, 'dest-verify');
        install(d, ['PREFIX=/usr']);
        const unit = fs.readFileSync(path.join(d, 'usr/lib/systemd/system/acceptd.service'), 'utf8');
        // verify checks that ExecStart's binary exists: point the paths into the DESTDIR.
        const vdir = path.join(tmp, 'verify');
        fs.mkdirSync(vdir);
        const write = (name, text) => {
            const p = path.join(vdir, name);
            fs.writeFileSync(p, text);
            return p;
        };
        const moved = unit.replaceAll('/usr/bin/acceptd', path.join(d, 'usr/bin/acceptd')).replaceAll('/etc/acceptd/', path.join(d, 'etc/acceptd') + '/');
        assert.notEqual(moved, unit);
        const good = verifyUnit(write('acceptd.service', moved));
        assert.ok(good.ok, show(good.r));

        const bad = verifyUnit(write('acceptd-bad.service', moved.replace('\nRestart=on-failure\n', '\nRestart=on-failure\nFrobnicate=yes\n')));
        assert.ok(!bad.ok, `an unknown directive passed\n${show(bad.r)}`);
        const badType = verifyUnit(write('acceptd-type.service', moved.replace('\nType=exec\n', '\nType=bogus\n')));
        assert.ok(!badType.ok, `a bad Type= passed\n${show(badType.r)}`);
        const noBin = verifyUnit(write('acceptd-nobin.service', unit.replaceAll('/usr/bin/acceptd', path.join(d, 'missing/acceptd'))));
        assert.ok(!noBin.ok, `a missing binary passed\n${show(noBin.r)}`);

        const service = Object.fromEntries(unitDirectives(unit).filter(([s]) => s === 'Service').map(([, k, v]) => [k, v]));
        const want = {
            Type: 'exec',
            KillSignal: 'SIGTERM',
            Restart: 'on-failure',
            DynamicUser: 'yes',
            StateDirectory: 'acceptd',
            ProtectSystem: 'strict',
            ProtectHome: 'yes',
            NoNewPrivileges: 'yes',
            PrivateTmp: 'yes',
            PrivateDevices: 'yes',
            ProtectKernelTunables: 'yes',
            ProtectKernelModules: 'yes',
            ProtectKernelLogs: 'yes',
            ProtectControlGroups: 'yes',
            RestrictAddressFamilies: 'AF_INET AF_INET6 AF_UNIX',
            RestrictNamespaces: 'yes',
            LockPersonality: 'yes',
            MemoryDenyWriteExecute: 'yes',
            SystemCallArchitectures: 'native',
            CapabilityBoundingSet: '',
        };
        for (const [k, v] of Object.entries(want)) assert.equal(service[k], v, `${k}=\n${unit}`);
        assert.match(service.SystemCallFilter ?? '', /^@system-service\b/, unit);
        assert.ok(Number(service.LimitNOFILE) >= 65536, `LimitNOFILE=${service.LimitNOFILE}`);
        assert.match(service.ExecStart, / --data %S\/acceptd\b/, 'the store goes in the StateDirectory');
    });

    it('the installed example configuration starts the daemon', async () => {
        const d = path.join(tmp, 'dest-run');
        install(d, ['PREFIX=/usr']);
        const daemon = await startDaemon({ config: fs.readFileSync(path.join(d, 'etc/acceptd/acceptd.yaml'), 'utf8') });
        const res = await fetch(`${daemon.url}/v1/jobs`, { method: 'POST', headers: { authorization: 'Bearer CHANGE-ME-client-key', 'content-type': 'application/json' }, body: '{"type":"demo.sleep"}' });
        await res.text();
        assert.equal(res.status, 202);
        await daemon.stop();
    });
});

describe('acceptd --version', () => {
    it('prints the version and the commit the binary was built from', () => {
        for (const args of [['--version'], ['version']]) {
            const r = run(BIN, args);
            assert.equal(r.code, 0, show(r));
            const m = /^acceptd (\d+\.\d+\.\d+\S*) \(commit ([0-9A-Za-z._-]+)\)\n$/.exec(r.stdout);
            assert.ok(m, `expected "acceptd VERSION (commit COMMIT)"\n${show(r)}`);
            assert.notEqual(m[2], '');
            // In a git checkout the commit names one of its commits (`git describe --always --dirty`).
            if (fs.existsSync(path.join(REPO_ROOT, '.git'))) {
                const hash = /(?:^|-g)([0-9a-f]{7,40})(?:-dirty)?$/.exec(m[2]);
                assert.ok(hash, `commit ${m[2]} names no object`);
                const g = run('git', ['cat-file', '-e', `${hash[1]}^{commit}`], { cwd: REPO_ROOT });
                assert.equal(g.code, 0, `commit ${m[2]} is not in this repository\n${show(g)}`);
            }
        }
    });
});

describe('the man page', () => {
    it('covers every command of `acceptd --help` and every flag of each command\'s --help', () => {
        const top = run(BIN, ['--help']);
        assert.equal(top.code, 0, show(top));
        const commands = [...new Set([...top.stdout.matchAll(/^\s*(?:usage:\s*)?acceptd ([a-z][a-z-]*)/gm)].map((m) => m[1]))];
        assert.ok(commands.includes('serve') && commands.includes('worker'), `commands: ${commands}\n${show(top)}`);
        const roff = manText();
        const man = plainMan(roff);
        const flagsOf = (text) => [...new Set([...text.matchAll(/(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)/g)].map((m) => m[1]))];
        const missing = [];
        const has = (flag) => new RegExp(`(?<![\\w-])${flag}(?![\\w-])`).test(man);
        for (const f of flagsOf(top.stdout)) if (!has(f)) missing.push(`acceptd ${f}`);
        for (const c of commands) {
            if (!new RegExp(`^\\.B acceptd ${c}\\b`, 'm').test(roff)) missing.push(`command ${c} (no ".B acceptd ${c}" line)`);
            if (c === 'help' || c === 'version') continue;
            const r = run(BIN, [c, '--help']);
            assert.equal(r.code, 0, show(r));
            const flags = flagsOf(r.stdout);
            assert.ok(flags.includes('--help') || flags.length > 1, `no flags found\n${show(r)}`);
            for (const f of flags) if (!has(f)) missing.push(`acceptd ${c} ${f}`);
        }
        assert.deepEqual(missing, [], 'missing from docs/acceptd.1');
    });

    it('has an entry for every top-level configuration key with every field of its section', () => {
        const { top, sections } = docConfig();
        const entries = manConfigEntries(manText());
        assert.deepEqual(Object.keys(entries).sort(), [...top].sort(), 'CONFIGURATION entries vs the Top-level keys of docs/configuration.md');
        const missing = [];
        for (const [title, fields] of Object.entries(sections)) {
            assert.ok(top.includes(title), `docs/configuration.md: section "### ${title}" is not a top-level key`);
            for (const f of fields) if (!new RegExp(`\\b${f}\\b`).test(entries[title])) missing.push(`${title}.${f}`);
        }
        assert.deepEqual(missing, [], 'fields missing from their entry in docs/acceptd.1');
    });

    it('documents exactly the top-level keys the daemon accepts', () => {
        const { top } = docConfig();
        assert.deepEqual([...top].sort(), parserTopKeys().sort(), 'docs/configuration.md vs top_fields in src/core/config.c');
        // Each documented key is known to the daemon: a value of the wrong shape is refused for its value,
        // never as an unknown key.
        for (const k of top) {
            const r = serveWithConfig(`key-${k}`, `${k}: [[[]]]\n`);
            assert.equal(r.code, 2, show(r));
            assert.doesNotMatch(r.stderr, /unknown key/, show(r));
            assert.match(r.stderr, /key-[A-Za-z]+\.yaml:1: /, show(r));
        }
        const r = serveWithConfig('unknown', 'listen: 127.0.0.1:0\nmaxAtempts: 3\n');
        assert.equal(r.code, 2, show(r));
        assert.match(r.stderr, /unknown\.yaml:2: unknown key 'maxAtempts' in the top level/, show(r));
    });
});
