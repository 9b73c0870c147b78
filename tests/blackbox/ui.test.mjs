// The dashboard at /ui/ in a real browser: headless Chromium (Debian's, driven by playwright-core) against the
// real daemon. The files are served with a strict CSP and validators; a key signs in; every view shows real
// data; the jobs list follows the change stream (a new job appears, its progress bar moves after a heartbeat,
// with no reload); cancel, retry and the signed URL work from a job's page; redeliver from the webhooks view
// reaches a local receiver; the queues view shows each type, refuses a client key's change and lets an admin pause,
// resume and limit a type; the schedules view pauses, resumes and runs a schedule now, its run linking to its job;
// another tenant's key sees none of these jobs. Throughout, the console must stay
// free of errors and the CSP must report no violation; axe-core finds no serious or critical accessibility
// violation on any view; every view is photographed light and dark, wide and narrow, into build/ui-shots/.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { it, startDaemon, api } from './lib/daemon.mjs';
import { webhookConfig, startReceiver, createEndpoint, deliveries, stopClean } from './lib/webhooks.mjs';
import { complete, expectStatus, fail, heartbeat, lease, leaseOne, submit, waitUntil } from './lib/jobs.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SHOTS = path.join(ROOT, 'build/ui-shots');
const AXE = fs.readFileSync(path.join(ROOT, 'node_modules/axe-core/axe.min.js'), 'utf8');
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const WIDE = { width: 1280, height: 800 };
const NARROW = { width: 390, height: 844 };

describe('the dashboard at /ui/', { timeout: 120_000 }, () => {
    let d;
    let receiver;
    let browser;
    let profile;
    const problems = []; // console errors, page errors and CSP violations, from every page

    before(async () => {
        receiver = await startReceiver();
        d = await startDaemon({ config: webhookConfig() });
        fs.mkdirSync(SHOTS, { recursive: true });
        profile = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-ui-'));
        browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
    });
    after(async () => {
        try {
            await browser?.close();
        } finally {
            await receiver?.close();
            if (d) await stopClean(d); // a clean exit, and no sanitizer report under ACCEPTD_SANITIZED
            if (profile) fs.rmSync(profile, { recursive: true, force: true });
        }
    });

    it('serves its files with a strict CSP, nosniff, no referrer and strong ETags', async () => {
        const anon = api(d);
        const page = expectStatus(await anon.get('/ui/'), 200);
        assert.match(page.headers.get('content-type'), /^text\/html/);
        assert.equal(page.headers.get('content-security-policy'), CSP);
        assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
        assert.equal(page.headers.get('referrer-policy'), 'no-referrer');
        assert.match(page.text, /<script type="module" src="\/ui\/app.js"><\/script>/);
        const js = expectStatus(await anon.get('/ui/app.js'), 200);
        assert.match(js.headers.get('content-type'), /^text\/javascript/);
        const css = expectStatus(await anon.get('/ui/style.css'), 200);
        assert.match(css.headers.get('content-type'), /^text\/css/);
        const etag = js.headers.get('etag');
        assert.match(etag, /^"[0-9a-f]{16}"$/);
        const again = await anon.get('/ui/app.js', { headers: { 'if-none-match': etag } });
        assert.equal(again.status, 304);
        assert.equal(again.text, '');
        assert.equal((await anon.get('/ui')).status, 308);
        assert.equal((await anon.get('/ui/nope.js')).status, 404);
    });

    it('shows every view with live data, acts on jobs and webhooks, and keeps tenants apart', async () => {
        const ka = api(d, 'ka');
        const wa = api(d, 'wa');
        const kb = api(d, 'kb');
        // Data of tenant a: one succeeded, one failed, one running with progress, one queued; a webhook endpoint
        // whose deliveries reach the receiver.
        const hook = await createEndpoint(ka, receiver.url);
        const ok = (await submit(ka, { type: 'report.export', payload: { month: '2026-11' } })).json.id;
        let l = await leaseOne(wa, 'report.export', { expectId: ok });
        await complete(wa, ok, l.leaseId, { result: { rows: 1234 } });
        const bad = (await submit(ka, { type: 'image.resize', payload: { w: 640 }, maxAttempts: 1 })).json.id;
        l = await leaseOne(wa, 'image.resize', { expectId: bad });
        await fail(wa, bad, l.leaseId, { retryable: false });
        const run = (await submit(ka, { type: 'video.transcode', payload: { sourceUrl: 'https://example.test/a.mp4' } })).json.id;
        const runLease = await leaseOne(wa, 'video.transcode', { expectId: run, worker: 'gpu-worker-1' });
        expectStatus(await heartbeat(wa, run, runLease.leaseId, { progress: 30, message: 'transcoding' }), 200);
        const queued = (await submit(ka, { type: 'email.send', payload: { to: 'ops@example.test' } })).json.id;
        await receiver.waitFor((rs) => rs.length >= 3, { what: 'the first deliveries' });
        const bJob = (await submit(kb, { type: 'report.export', payload: {} })).json.id;
        // The dashboard's own reads, through the client that checks answers against docs/openapi.json (the
        // browser's are not): a tenant's leases name its running job, another tenant's do not.
        const stats = await ka.get('/v1/stats');
        assert.equal(stats.status, 200, stats.text);
        const leasesA = await ka.get('/v1/leases');
        assert.equal(leasesA.status, 200, leasesA.text);
        assert.ok(leasesA.text.includes(run), leasesA.text);
        const leasesB = await kb.get('/v1/leases');
        assert.equal(leasesB.status, 200, leasesB.text);
        assert.ok(!leasesB.text.includes(run), leasesB.text);

        const context = await browser.newContext({ viewport: WIDE, colorScheme: 'light' });
        const page = await context.newPage();
        page.on('console', (m) => {
            if (m.type() === 'error') problems.push(`console: ${m.text()}`);
        });
        page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
        await page.exposeFunction('reportCsp', (v) => problems.push(`csp: ${v}`));
        await page.addInitScript(() => {
            document.addEventListener('securitypolicyviolation', (e) => window.reportCsp(`${e.violatedDirective} ${e.blockedURI}`));
        });
        const expectNoProblems = () => assert.deepEqual(problems, [], 'console errors or CSP violations');

        const axe = async (view) => {
            if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE);
            const r = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
            const bad = r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
            assert.deepEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join('; ')})`), [],
                `axe on ${view}`);
        };
        const shots = async (view) => {
            for (const [size, vp] of [['wide', WIDE], ['narrow', NARROW]]) {
                await page.setViewportSize(vp);
                for (const scheme of ['light', 'dark']) {
                    await page.emulateMedia({ colorScheme: scheme });
                    await page.waitForFunction((s) => document.documentElement.dataset.theme === s, scheme);
                    await page.screenshot({ path: path.join(SHOTS, `${view}-${scheme}-${size}.png`), fullPage: true });
                }
            }
            await page.setViewportSize(WIDE);
            await page.emulateMedia({ colorScheme: 'light' });
        };

        try {
            // Sign in.
            await page.goto(`${d.url}/ui/`);
            await page.getByLabel('API key').fill('ka');
            await page.getByRole('button', { name: 'Sign in' }).click();
            await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
            assert.equal(await page.evaluate(() => sessionStorage.getItem('acceptd.key')), 'ka');
            assert.ok(!page.url().includes('ka'), 'the key is not in the URL');
            assert.deepEqual(await context.cookies(), [], 'no cookie is set');

            // Overview: counts by state and type, from GET /v1/stats.
            const byType = page.getByRole('table', { name: /Jobs by type/ });
            await byType.getByRole('row', { name: /video\.transcode/ }).waitFor();
            assert.match(await byType.getByRole('row', { name: /report\.export/ }).innerText(), /report\.export\s+0\s+0\s+1\b/);
            await page.locator('svg.chart polyline').first().waitFor();
            await axe('overview');
            await shots('overview');

            // Jobs: the seeded jobs are listed; a job submitted now appears, and its bar follows its heartbeats.
            await page.getByRole('link', { name: 'Jobs' }).click();
            await page.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
            for (const id of [ok, bad, run, queued]) await page.locator(`tr[data-job-id="${id}"]`).waitFor();
            await page.locator('#live.on').waitFor();
            const fresh = (await submit(ka, { type: 'report.export', payload: { fresh: true } })).json.id;
            const row = page.locator(`tr[data-job-id="${fresh}"]`);
            await row.waitFor({ timeout: 5000 });
            assert.equal(await row.getAttribute('data-state'), 'queued');
            // Its times show the date and the time to the second (one formatter kept for every row: app.js).
            const created = await row.locator('time').first();
            assert.match(await created.textContent(), /\d{4}.*\d{1,2}:\d{2}:\d{2}|\d{1,2}:\d{2}:\d{2}.*\d{4}/);
            assert.equal(new Date(await created.getAttribute('datetime')).getTime() > 0, true);
            const fl = await leaseOne(wa, 'report.export', { expectId: fresh, worker: 'blackbox' });
            await page.locator(`tr[data-job-id="${fresh}"][data-state="running"]`).waitFor({ timeout: 5000 });
            expectStatus(await heartbeat(wa, fresh, fl.leaseId, { progress: 40 }), 200);
            await page.locator(`tr[data-job-id="${fresh}"] progress[value="40"]`).waitFor({ timeout: 1000 });
            expectStatus(await heartbeat(wa, fresh, fl.leaseId, { progress: 75 }), 200);
            await page.locator(`tr[data-job-id="${fresh}"] progress[value="75"]`).waitFor({ timeout: 1000 });
            assert.equal(await page.locator(`tr[data-job-id="${bJob}"]`).count(), 0, "tenant b's job is not listed");
            // Filters: state, and the id search.
            await page.getByLabel('State').selectOption('failed');
            await page.locator(`tr[data-job-id="${bad}"]`).waitFor();
            assert.equal(await page.locator('#jobs-table tbody tr[data-job-id]').count(), 1);
            await axe('jobs');
            await page.getByLabel('State').selectOption('');
            await page.locator(`tr[data-job-id="${ok}"]`).waitFor();
            await shots('jobs');

            // A job's page: payload, progress, message, attempts, timeline; cancel, then retry; a signed URL.
            await page.locator(`a[href="#/jobs/${run}"]`).click();
            await page.locator('#job-message', { hasText: 'transcoding' }).waitFor();
            await page.locator('#job-progress progress[value="30"]').waitFor();
            await page.getByRole('table', { name: /Attempts/ }).getByRole('cell', { name: 'gpu-worker-1' }).waitFor();
            await page.locator('#timeline li').first().waitFor();
            await page.getByRole('button', { name: 'Copy signed status URL' }).click();
            const signed = await waitUntil(() => page.locator('#signed-url').inputValue(), (v) => /sig=/.test(v), { what: 'the signed URL' });
            const su = new URL(signed);
            const viaSigned = await api(d).get(su.pathname + su.search);
            assert.equal(expectStatus(viaSigned, 200).json.id, run);
            await axe('job');
            await shots('job');

            await page.goto(`${d.url}/ui/#/jobs/${queued}`);
            await page.locator('#job-state', { hasText: 'queued' }).waitFor();
            await page.getByRole('button', { name: 'Cancel' }).click();
            await page.locator('#job-state', { hasText: 'cancelled' }).waitFor();
            assert.equal(expectStatus(await ka.get(`/v1/jobs/${queued}`), 200).json.status, 'cancelled');
            await page.getByRole('button', { name: 'Retry' }).click();
            await page.waitForFunction((id) => /^#\/jobs\/job_/.test(location.hash) && !location.hash.includes(id), queued);
            const retried = decodeURIComponent(new URL(page.url()).hash.replace('#/jobs/', ''));
            const rj = expectStatus(await ka.get(`/v1/jobs/${retried}`), 200).json;
            assert.equal(rj.retryOf, queued);
            assert.equal(rj.status, 'queued');
            await page.locator('#job-state', { hasText: 'queued' }).waitFor();

            // Workers: the running jobs' leases, and a worker parked on email.send... after its job was taken.
            const parkedTypes = ['email.send', 'report.export', 'image.resize'];
            const drain = await lease(wa, parkedTypes, { wait: 0, max: 10, worker: 'drainer' });
            assert.ok(drain.status === 200 || drain.status === 204);
            const parked = lease(wa, parkedTypes, { wait: 5, worker: 'idle-worker-7' });
            await page.getByRole('link', { name: 'Workers' }).click();
            await page.getByRole('heading', { level: 1, name: 'Workers' }).waitFor();
            await page.locator(`#main tr[data-job-id="${run}"]`, { hasText: 'gpu-worker-1' }).waitFor();
            await page.getByRole('table', { name: /Workers waiting/ }).getByText(/idle-worker-7/).first().waitFor({ timeout: 5000 });
            await axe('workers');
            await shots('workers');
            assert.equal((await parked).status, 204);

            // Webhooks: the endpoint and its deliveries; redeliver sends one again to the receiver.
            await page.getByRole('link', { name: 'Webhooks' }).click();
            await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
            const section = page.locator(`section[data-webhook-id="${hook.id}"]`);
            await section.getByRole('table', { name: /Recent deliveries/ }).getByText('delivered').first().waitFor();
            const delivered = (await deliveries(ka, hook.id, 'delivered'))[0];
            const before = receiver.requests.length;
            await section.locator(`tr[data-delivery-id="${delivered.id}"]`).first().getByRole('button', { name: /Redeliver/ }).click();
            await receiver.waitFor((rs) => rs.length > before && rs.slice(before).some((q) => q.headers['webhook-id'] === delivered.eventId ||
                q.body.includes(delivered.jobId)), { what: 'the redelivery' });
            await page.getByRole('status').filter({ hasText: 'queued again' }).waitFor();
            await axe('webhooks');
            await shots('webhooks');

            // Queues: a client key sees its types' queues but may not change one, and the view says so.
            await page.getByRole('link', { name: 'Queues' }).click();
            await page.getByRole('heading', { level: 1, name: 'Queues' }).waitFor();
            const queues = page.getByRole('table', { name: /Queues by type/ });
            await queues.locator('tr[data-queue="video.transcode"]').waitFor();
            assert.match(await queues.locator('tr[data-queue="video.transcode"]').innerText(), /video\.transcode\s+active\s+0\s+1\b/);
            const seen = problems.length;
            await page.getByRole('button', { name: 'Pause report.export' }).click();
            await page.getByRole('status').filter({ hasText: /may not change queues/ }).waitFor();
            // Chromium logs the refused PATCH itself; that one line is the answer the step expects, nothing else.
            assert.deepEqual(problems.splice(seen), ['console: Failed to load resource: the server responded with a status of 403 (Forbidden)']);
            assert.equal(expectStatus(await ka.get('/v1/queues/report.export'), 200).json.paused, false);
            await axe('queues');

            // An admin pauses a type: a job submitted meanwhile waits, and says why; resumes it; sets a limit.
            await page.getByRole('button', { name: 'Sign out' }).click();
            await page.getByLabel('API key').fill('adm');
            await page.getByRole('button', { name: 'Sign in' }).click();
            await page.goto(`${d.url}/ui/#/queues`);
            await page.getByRole('button', { name: 'Pause report.export' }).click();
            await page.getByRole('button', { name: 'Resume report.export' }).waitFor();
            assert.equal(expectStatus(await ka.get('/v1/queues/report.export'), 200).json.paused, true);
            const held = (await submit(ka, { type: 'report.export', payload: { held: true } })).json.id;
            assert.equal((await lease(wa, ['report.export'], { wait: 0 })).status, 204, 'a paused type leases nothing');
            await queues.locator('tr[data-queue="report.export"]', { hasText: /1 \(paused\)/ }).waitFor({ timeout: 10_000 });
            assert.match(await queues.locator('tr[data-queue="report.export"]').innerText(), /report\.export\s+paused/);
            await shots('queues');
            await page.getByRole('button', { name: 'Resume report.export' }).click();
            await page.getByRole('button', { name: 'Pause report.export' }).waitFor();
            assert.equal(expectStatus(await ka.get('/v1/queues/report.export'), 200).json.paused, false);
            await leaseOne(wa, 'report.export', { expectId: held });
            await page.getByText('Limits of report.export').click();
            const limits = page.getByRole('form', { name: 'Limits of report.export' });
            await limits.getByLabel('Concurrency').fill('2');
            await limits.getByRole('group', { name: 'Rate limit', exact: true }).getByLabel('Leases').fill('20');
            await limits.getByRole('group', { name: 'Rate limit', exact: true }).getByLabel('per').selectOption('1m');
            await limits.getByRole('button', { name: 'Save limits' }).click();
            await page.getByRole('status').filter({ hasText: 'Save limits of report.export: done.' }).waitFor();
            const q = expectStatus(await ka.get('/v1/queues/report.export'), 200).json;
            assert.equal(q.concurrency, 2);
            assert.deepEqual(q.rateLimit, { limit: 20, period: '1m' });
            assert.equal(q.groupConcurrency, null);
            await queues.locator('tr[data-queue="report.export"]', { hasText: '20 per 1m' }).waitFor();
            await axe('queues (admin)');

            // Schedules: the rule, state and next run; pause, resume and run now; the run links to its job.
            expectStatus(await ka.post('/v1/schedules', { id: 'ui-nightly', cron: '0 2 * * *', timezone: 'Europe/Berlin',
                job: { type: 'email.send', payload: {} } }), 201);
            await page.getByRole('link', { name: 'Schedules' }).click();
            await page.getByRole('heading', { level: 1, name: 'Schedules' }).waitFor();
            const schedRow = page.getByRole('table', { name: /^Schedules:/ }).locator('tr[data-schedule="ui-nightly"]');
            await schedRow.waitFor();
            assert.match(await schedRow.innerText(), /ui-nightly\s+cron 0 2 \* \* \* \(Europe\/Berlin\)\s+active\s+in /);
            await page.getByRole('button', { name: 'Pause ui-nightly' }).click();
            await page.getByRole('button', { name: 'Resume ui-nightly' }).waitFor();
            assert.equal(expectStatus(await ka.get('/v1/schedules/ui-nightly'), 200).json.paused, true);
            await page.getByRole('button', { name: 'Resume ui-nightly' }).click();
            await page.getByRole('button', { name: 'Pause ui-nightly' }).waitFor();
            await page.getByRole('button', { name: 'Run now ui-nightly' }).click();
            await page.getByRole('status').filter({ hasText: 'Run now ui-nightly: done.' }).waitFor();
            const schedRun = expectStatus(await ka.get('/v1/schedules/ui-nightly'), 200).json.recentRuns[0].jobId;
            await schedRow.getByRole('link', { name: schedRun }).waitFor();
            await axe('schedules');
            await schedRow.getByRole('link', { name: schedRun }).click();
            await page.waitForFunction((id) => location.hash === `#/jobs/${id}`, schedRun);
            // Leave tenant a's job before signing in as b: b reading it would be a (right) 404 in the console.
            await page.goto(`${d.url}/ui/#/overview`);

            // The theme toggle overrides the system's preference.
            await page.getByRole('button', { name: 'Dark theme' }).click();
            assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
            await page.getByRole('button', { name: 'Light theme' }).click();

            // Another tenant's key: none of tenant a's jobs, anywhere.
            await page.getByRole('button', { name: 'Sign out' }).click();
            await page.getByLabel('API key').fill('kb');
            await page.getByRole('button', { name: 'Sign in' }).click();
            await page.goto(`${d.url}/ui/#/jobs`);
            await page.locator(`tr[data-job-id="${bJob}"]`).waitFor();
            const shown = await page.locator('#jobs-table tbody tr[data-job-id]').evaluateAll((rs) => rs.map((r) => r.dataset.jobId));
            for (const id of [ok, bad, run, queued, fresh, retried]) assert.ok(!shown.includes(id), `tenant b sees ${id}`);
            await page.goto(`${d.url}/ui/#/overview`);
            await page.getByRole('table', { name: /Jobs by type/ }).getByRole('row', { name: /report\.export/ }).waitFor();
            assert.equal(await page.getByRole('table', { name: /Jobs by type/ }).getByRole('row', { name: /video\.transcode/ }).count(), 0);
            await page.goto(`${d.url}/ui/#/workers`);
            await page.getByRole('table', { name: /Running jobs/ }).getByText('No job is running.').waitFor();

            expectNoProblems();
        } finally {
            await context.close();
        }
    });
});

describe('the dashboard of a daemon without API keys', { timeout: 60_000 }, () => {
    let d;
    let browser;
    before(async () => {
        d = await startDaemon({ config: 'types:\n  report.export: {}\n' });
        browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
    });
    after(async () => {
        await browser?.close();
        if (d) await stopClean(d);
    });

    it('opens without asking for a key, says why, and shows the jobs', async () => {
        const id = (await submit(api(d), { type: 'report.export', payload: { keyless: true } })).json.id;
        const page = await browser.newPage();
        const problems = [];
        page.on('console', (m) => {
            if (m.type() === 'error') problems.push(`console: ${m.text()}`);
        });
        page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
        try {
            await page.goto(`${d.url}/ui/`);
            await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
            assert.equal(await page.locator('#signin').isHidden(), true, 'no sign-in form');
            assert.equal(await page.getByRole('button', { name: 'Sign out' }).isHidden(), true);
            assert.match(await page.locator('#who').textContent(), /no API keys configured/);
            await page.getByRole('link', { name: 'Jobs' }).click();
            await page.locator(`tr[data-job-id="${id}"]`).waitFor();
            assert.deepEqual(problems, [], 'console errors');
        } finally {
            await page.close();
        }
    });

    it('shows a batch: its counts and progress as its jobs end, its jobs, and cancels the rest', async () => {
        const c = api(d);
        // The jobs an earlier test left queued are ended first: the lease below must take a job of the batch.
        for (;;) {
            const res = await lease(c, 'report.export', { wait: 0, max: 10 });
            if (res.status === 204) break;
            for (const x of expectStatus(res, 200).json.leases) await complete(c, x.job.id, x.leaseId);
        }
        const b = expectStatus(await c.post('/v1/batches', { jobs: [{ type: 'report.export' }, { type: 'report.export' }] }), 202).json;
        const page = await browser.newPage();
        const problems = [];
        page.on('console', (m) => {
            if (m.type() === 'error') problems.push(`console: ${m.text()}`);
        });
        page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
        try {
            await page.goto(`${d.url}/ui/#/batches/${b.id}`);
            await page.locator('#batch-state', { hasText: 'running' }).waitFor();
            await page.locator('#batch-counts', { hasText: '2 queued' }).waitFor();
            // The jobs come in a request of their own, after the counts: wait for the second row, then count.
            const batchJobs = page.getByRole('table', { name: /Jobs of the batch/ }).locator('tbody tr');
            await batchJobs.nth(1).waitFor();
            assert.equal(await batchJobs.count(), 2);
            const l = await leaseOne(api(d), 'report.export');
            await complete(api(d), l.job.id, l.leaseId);
            await page.locator('#batch-progress progress[value="50"]').waitFor();
            await page.locator('#batch-counts', { hasText: '1 succeeded' }).waitFor();
            await page.getByRole('button', { name: 'Cancel batch' }).click();
            await page.locator('#batch-state', { hasText: 'partialSuccess' }).waitFor();
            assert.equal(await page.getByRole('button', { name: 'Cancel batch' }).isDisabled(), true);
            await page.locator(`a[href="#/jobs/${l.job.id}"]`).click();
            await page.locator(`a[href="#/batches/${b.id}"]`).waitFor(); // a job of a batch links to it
            await page.goto(`${d.url}/ui/#/batches/${b.id}`);
            await page.locator('#batch-state', { hasText: 'partialSuccess' }).waitFor();
            await page.evaluate(AXE);
            const r = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
            assert.deepEqual(r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id), [], 'axe on batch');
            assert.deepEqual(problems, []);
        } finally {
            await page.close();
        }
    });
});
