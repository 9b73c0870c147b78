// Dependencies between jobs (CONTRACT §13): a job submitted with dependsOn stays queued, "waitingFor":
// "dependencies", and no lease takes it until every job it names has succeeded (partialSuccess counts); it becomes
// leasable in the commit that ends its last dependency, and a worker parked on its type gets it at once. A
// dependency that fails or is cancelled cancels it with the problem dependency-failed naming that dependency, down
// the chain, unless it said onDependencyFailure "run". On SQLite and, under `make blackbox-pg`, PostgreSQL.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { PROBLEM_BASE, assertProblem, complete, expectStatus, fail, getJob, lease, leaseOne, show, submit } from './lib/jobs.mjs';

const noLease = async (w, types) => expectStatus(await lease(w, types, { wait: 0 }), 204);

describe('dependencies', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('a chain runs in order: each job waits for the one before, and is leased once that one succeeded', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export', payload: { step: 'a' } })).json;
        const b = (await submit(c, { type: 'report.export', payload: { step: 'b' }, dependsOn: [a.id] })).json;
        const cc = (await submit(c, { type: 'email.send', payload: { step: 'c' }, dependsOn: [b.id] })).json;
        assert.equal(b.status, 'queued');
        assert.equal(b.waitingFor, 'dependencies', JSON.stringify(b));
        assert.deepEqual(b.dependsOn, [a.id]);
        assert.equal(b.onDependencyFailure, 'cancel');
        assert.equal((await getJob(c, cc.id)).waitingFor, 'dependencies');
        assert.equal(a.waitingFor, undefined, 'a job without dependencies does not wait');
        // Only a is leasable, however many leases ask.
        const la = await leaseOne(w, ['report.export', 'email.send'], { max: 5, expectId: a.id });
        await noLease(w, ['report.export', 'email.send']);
        await complete(w, a.id, la.leaseId, { result: { rows: 42 } });
        const bNow = await getJob(c, b.id);
        assert.equal(bNow.waitingFor, undefined, `b no longer waits once a succeeded: ${JSON.stringify(bNow)}`);
        assert.equal((await getJob(c, cc.id)).waitingFor, 'dependencies', 'c still waits for b');
        const lb = await leaseOne(w, ['report.export', 'email.send'], { max: 5, expectId: b.id });
        assert.deepEqual(lb.job.dependsOn, [a.id], 'the lease lists the job\'s dependencies');
        assert.equal(lb.job.waitingFor, undefined);
        // The worker key reads the dependency and its result.
        const dep = expectStatus(await w.get(`/v1/jobs/${a.id}`), 200).json;
        assert.equal(dep.status, 'succeeded');
        assert.deepEqual(expectStatus(await w.get(`/v1/jobs/${a.id}/result`), 200).json, { rows: 42 });
        await noLease(w, ['email.send']);
        await complete(w, b.id, lb.leaseId);
        const lc = await leaseOne(w, 'email.send', { expectId: cc.id });
        await complete(w, cc.id, lc.leaseId);
    });

    it('a lease parked on the type is handed the job in the commit that ends its last dependency', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export' })).json;
        const b = (await submit(c, { type: 'report.export' })).json;
        const j = (await submit(c, { type: 'email.send', dependsOn: [a.id, b.id] })).json;
        const la = await leaseOne(w, 'report.export', { expectId: a.id });
        const lb = await leaseOne(w, 'report.export', { expectId: b.id });
        await complete(w, a.id, la.leaseId);
        assert.equal((await getJob(c, j.id)).waitingFor, 'dependencies', 'one dependency is still running');
        // A worker parks on email.send (the wait outlasts the test's steps by far); ending b wakes it.
        const parked = lease(w, 'email.send', { wait: 5 });
        await new Promise((r) => setTimeout(r, 300));
        await complete(w, b.id, lb.leaseId, { result: null });
        const res = expectStatus(await parked, 200);
        assert.equal(res.json.leases[0].job.id, j.id, show(res));
        assert.deepEqual(res.json.leases[0].job.dependsOn, [a.id, b.id]);
    });

    it('partialSuccess counts as success; a lean lease lists dependsOn', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export' })).json;
        const j = (await submit(c, { type: 'email.send', dependsOn: [a.id] })).json;
        const la = await leaseOne(w, 'report.export', { expectId: a.id });
        expectStatus(await w.post(`/v1/jobs/${a.id}:complete`, { leaseId: la.leaseId, result: { some: 1 }, status: 'partialSuccess' }), 200);
        assert.equal((await getJob(c, a.id)).status, 'partialSuccess');
        const res = expectStatus(
            await w.req('POST', '/v1/leases', { body: { types: ['email.send'], wait: 0 }, headers: { prefer: 'return=minimal' } }),
            200,
        );
        assert.equal(res.json.leases[0].id, j.id, show(res));
        assert.deepEqual(res.json.leases[0].dependsOn, [a.id]);
    });

    it('a failed dependency cancels its dependents down the chain with dependency-failed; "run" runs anyway', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export', maxAttempts: 1 })).json;
        const b = (await submit(c, { type: 'report.export', dependsOn: [a.id] })).json;
        const cc = (await submit(c, { type: 'report.export', dependsOn: [b.id] })).json;
        const r = (await submit(c, { type: 'email.send', dependsOn: [a.id], onDependencyFailure: 'run' })).json;
        assert.equal(r.onDependencyFailure, 'run');
        const la = await leaseOne(w, 'report.export', { expectId: a.id });
        await fail(w, a.id, la.leaseId);
        const bNow = await getJob(c, b.id);
        assert.equal(bNow.status, 'cancelled', JSON.stringify(bNow));
        assert.equal(bNow.error.type, `${PROBLEM_BASE}dependency-failed`);
        assert.equal(bNow.error.code, 'dependency-failed');
        assert.equal(bNow.error.dependency, a.id, 'the error names the dependency that failed');
        assert.equal(bNow.waitingFor, undefined);
        const cNow = await getJob(c, cc.id);
        assert.equal(cNow.status, 'cancelled', 'the cancellation cascades');
        assert.equal(cNow.error.dependency, b.id, 'c names b, the dependency it waited for');
        await noLease(w, 'report.export');
        const lr = await leaseOne(w, 'email.send', { expectId: r.id });
        await complete(w, r.id, lr.leaseId);
    });

    it('a dependency cancelled by its client cancels the jobs waiting for it', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export' })).json;
        const b = (await submit(c, { type: 'report.export', dependsOn: [a.id] })).json;
        expectStatus(await c.del(`/v1/jobs/${a.id}`), 200);
        const bNow = await getJob(c, b.id);
        assert.equal(bNow.status, 'cancelled');
        assert.equal(bNow.error.dependency, a.id);
        await noLease(w, 'report.export');
        // A job waiting for dependencies can itself be cancelled, and its own dependents follow.
        const x = (await submit(c, { type: 'report.export' })).json;
        const y = (await submit(c, { type: 'report.export', dependsOn: [x.id] })).json;
        const z = (await submit(c, { type: 'report.export', dependsOn: [y.id] })).json;
        expectStatus(await c.del(`/v1/jobs/${y.id}`), 200);
        assert.equal((await getJob(c, z.id)).status, 'cancelled');
        // x still runs; its end changes nothing for y.
        const lx = await leaseOne(w, 'report.export', { expectId: x.id });
        await complete(w, x.id, lx.leaseId);
        assert.equal((await getJob(c, y.id)).status, 'cancelled');
        await noLease(w, 'report.export');
    });

    it('dependencies that have already ended: succeeded ones count at once, a failed one cancels at submit', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export' })).json;
        const la = await leaseOne(w, 'report.export', { expectId: a.id });
        await complete(w, a.id, la.leaseId);
        const b = (await submit(c, { type: 'report.export', dependsOn: [a.id] })).json;
        assert.equal(b.waitingFor, undefined, JSON.stringify(b));
        await leaseOne(w, 'report.export', { expectId: b.id });
        const f = (await submit(c, { type: 'report.export' })).json;
        expectStatus(await c.del(`/v1/jobs/${f.id}`), 200);
        const g = (await submit(c, { type: 'report.export', dependsOn: [a.id, f.id] })).json;
        assert.equal(g.status, 'cancelled', JSON.stringify(g));
        assert.equal(g.error.dependency, f.id);
        const h = (await submit(c, { type: 'report.export', dependsOn: [f.id], onDependencyFailure: 'run' })).json;
        assert.equal(h.status, 'queued');
        assert.equal(h.waitingFor, undefined);
    });

    it('refuses what is no dependency: bad shapes, unknown ids and another tenant\'s jobs (422 with a pointer)', async () => {
        const { c, w } = tenant(d);
        const { c: other } = tenant(d);
        const mine = (await submit(c, { type: 'report.export' })).json;
        const theirs = (await submit(other, { type: 'report.export' })).json;
        for (const [dependsOn, pointer] of [
            [[], '/dependsOn'],
            ['job_x', '/dependsOn'],
            [Array.from({ length: 101 }, (_, i) => `job_${i}`), '/dependsOn'],
            [[mine.id, 7], '/dependsOn/1'],
            [[mine.id, mine.id], '/dependsOn/1'],
        ]) {
            const res = await c.post('/v1/jobs', { type: 'report.export', dependsOn });
            assertProblem(res, 422, 'validation-failed');
            assert.ok(res.json.errors.some((e) => e.pointer === pointer), `${pointer}: ${show(res)}`);
        }
        assertProblem(await c.post('/v1/jobs', { type: 'report.export', dependsOn: [mine.id], onDependencyFailure: 'skip' }), 422, 'validation-failed');
        for (const id of ['job_doesnotexist0000000000000000', theirs.id]) {
            const res = await c.post('/v1/jobs', { type: 'report.export', dependsOn: [mine.id, id] });
            assertProblem(res, 422, 'dependency-unknown');
            assert.deepEqual(res.json.errors.map((e) => e.pointer), ['/dependsOn/1'], show(res));
        }
        // In a bulk submit the item is refused alone.
        const res = expectStatus(
            await c.post('/v1/jobs:batch', { jobs: [{ type: 'report.export', dependsOn: [theirs.id] }, { type: 'report.export', dependsOn: [mine.id] }] }),
            207,
        );
        assert.equal(res.json.results[0].status, 422, show(res));
        assert.equal(res.json.results[0].problem.code, 'dependency-unknown');
        assert.equal(res.json.results[1].status, 202, show(res));
        assert.equal((await getJob(c, res.json.results[1].job.id)).waitingFor, 'dependencies');
        // Nothing refused was stored: the only leasable job is mine.
        await leaseOne(w, 'report.export', { expectId: mine.id });
        await noLease(w, 'report.export');
    });
});

describe('dependencies across a kill -9', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('the count and edges are durable: after a restart the last dependency still releases the job, once', async () => {
        const { c, w } = tenant(d);
        const a = (await submit(c, { type: 'report.export' })).json;
        const b = (await submit(c, { type: 'report.export' })).json;
        const j = (await submit(c, { type: 'email.send', dependsOn: [a.id, b.id] })).json;
        const la = await leaseOne(w, 'report.export', { expectId: a.id });
        await complete(w, a.id, la.leaseId);
        await d.kill9();
        await d.restart();
        assert.equal((await getJob(c, j.id)).waitingFor, 'dependencies', 'b has not ended');
        await noLease(w, 'email.send');
        const lb = await leaseOne(w, 'report.export', { expectId: b.id });
        // The completion's 202 means its commit, which released j with it: kill -9 right after it changes nothing.
        await complete(w, b.id, lb.leaseId);
        await d.kill9();
        await d.restart();
        const lj = await leaseOne(w, 'email.send', { expectId: j.id });
        await complete(w, j.id, lj.leaseId);
        await noLease(w, ['email.send', 'report.export']);
    });
});
