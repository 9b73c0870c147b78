// The daemon names its threads (docs/operations.md, "Threads"), so that top -H and ps -L tell an operator
// which one is busy: the event loop keeps the process's name, the others say what they do.

import { after, before, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { backend, it, startDaemon } from './lib/daemon.mjs';

describe('thread names', () => {
    let d;
    before(async () => {
        d = await startDaemon();
    });
    after(() => d?.stop());

    it('the event loop, the writer, the webhook and the artifact threads are named in /proc', () => {
        const dir = `/proc/${d.proc.pid}/task`;
        const names = fs.readdirSync(dir).map((t) => fs.readFileSync(`${dir}/${t}/comm`, 'utf8').trim());
        const want = ['acceptd', 'acceptd-writer', 'acceptd-webhook', 'acceptd-resolve', 'acceptd-results'];
        if (backend === 'postgres') want.push('acceptd-cluster');
        for (const name of want) assert.ok(names.includes(name), `no thread named ${name} among ${names.join(', ')}`);
    });
});
