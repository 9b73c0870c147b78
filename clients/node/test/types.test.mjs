// The types follow docs/openapi.json: openapi-typescript generates them from the document and `tsc --noEmit`
// checks index.d.ts and a typed user of the library (test/usage.ts) against them. The check passes on the
// document as it is, and fails on a document changed in ways the library does not follow (a member of Job
// renamed, a job status gone): the types cannot drift from the API.

import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PKG = path.resolve(HERE, '..');
const REPO = path.resolve(PKG, '..', '..');
const BIN = path.join(REPO, 'node_modules', '.bin');
const DOC = JSON.parse(fs.readFileSync(path.join(REPO, 'docs', 'openapi.json'), 'utf8'));

function run(tool, args, cwd) {
    return new Promise((resolve) => {
        execFile(path.join(BIN, tool), args, { cwd, timeout: 180_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, out: stdout + stderr }));
    });
}

const dirs = [];
after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** A copy of the package's typed files (inside the package, so that @types/node resolves) checked against doc. */
async function check(doc) {
    const dir = fs.mkdtempSync(path.join(PKG, '.typecheck-'));
    dirs.push(dir);
    fs.mkdirSync(path.join(dir, 'test'));
    fs.mkdirSync(path.join(dir, 'types'));
    for (const f of ['index.d.ts', 'tsconfig.json', 'package.json', 'test/usage.ts']) fs.copyFileSync(path.join(PKG, f), path.join(dir, f));
    fs.writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc));
    const gen = await run('openapi-typescript', ['openapi.json', '-o', 'types/openapi.d.ts'], dir);
    assert.equal(gen.code, 0, gen.out);
    return run('tsc', ['-p', 'tsconfig.json'], dir);
}

describe('types generated from docs/openapi.json', () => {
    it('type-check the library and a typed user of it', async () => {
        const r = await check(DOC);
        assert.equal(r.code, 0, r.out);
    });

    it('fail the check when the document changes under the library', async () => {
        const renamed = structuredClone(DOC);
        const job = renamed.components.schemas.Job;
        job.properties.attempts = job.properties.attempt;
        delete job.properties.attempt;
        job.required = job.required.map((n) => (n === 'attempt' ? 'attempts' : n));
        const r1 = await check(renamed);
        assert.notEqual(r1.code, 0, 'Job.attempt renamed: the check still passed');
        assert.match(r1.out, /attempt/);

        const fewer = structuredClone(DOC);
        fewer.components.schemas.JobStatus.enum = fewer.components.schemas.JobStatus.enum.filter((s) => s !== 'partialSuccess');
        const r2 = await check(fewer);
        assert.notEqual(r2.code, 0, 'a job status gone: the check still passed');
        assert.match(r2.out, /partialSuccess/);
    });
});
