// bench/dashboard.mjs - the two clients of bench/dashboard.sh, each run until it is killed:
//
//   node bench/dashboard.mjs URL load RATE WORKERS
//       A steady job load at a fixed rate, over keep-alive HTTP/1.1 (undici): RATE jobs a second submitted
//       (type bench.dash, on a schedule, not as fast as possible), and WORKERS loops that lease one job
//       (wait 5), report progress 50 with a message (:heartbeat) and complete it. Each job thus makes four
//       changes (queued, running, progress, succeeded) that the dashboard's live views receive. Prints
//       "load ready" once the first job went round, then every 10 s "load submitted N completed N".
//   node bench/dashboard.mjs URL browser KEY
//       The dashboard in headless Chromium (Debian's, driven by playwright-core): one tab signs in with KEY and
//       stays on the Overview (it polls /v1/stats every 5 s), a second signs in, passes through the Overview to
//       the Jobs list and stays there (it follows /v1/events). Prints "browser ready STREAMS" once the jobs
//       list is live, STREAMS being the event streams the dashboard opened (requests for text/event-stream),
//       which bench/dashboard.sh opens as plain streams in the comparison phase. Console errors go to stderr.

import { Client, Pool } from 'undici';

const [url, mode, ...rest] = process.argv.slice(2);
const HEADERS = { 'content-type': 'application/json' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function usage() {
    process.stderr.write('usage: node bench/dashboard.mjs URL load RATE WORKERS | URL browser KEY\n');
    process.exit(2);
}

async function post(dispatcher, path, body) {
    const res = await dispatcher.request({ method: 'POST', path, headers: HEADERS, body: JSON.stringify(body) });
    const text = await res.body.text();
    if (res.statusCode >= 300 && res.statusCode !== 204) throw new Error(`${path}: ${res.statusCode} ${text.slice(0, 300)}`);
    return { status: res.statusCode, json: text.length > 0 ? JSON.parse(text) : null };
}

async function load(rate, workers) {
    const type = 'bench.dash';
    const submitter = new Pool(url, { connections: 4, pipelining: 1, keepAliveTimeout: 60_000 });
    let submitted = 0;
    let completed = 0;
    let ready = false;
    const t0 = Date.now();
    // Submits on a schedule: at each tick, catch up to rate x elapsed, with at most 4 in flight, so that a slow
    // moment of the daemon does not turn into a burst bigger than a second's worth afterwards.
    let inFlight = 0;
    setInterval(() => {
        const due = Math.floor(((Date.now() - t0) / 1000) * rate);
        if (due - submitted > rate) submitted = due - rate; // more than a second behind: drop, do not burst
        while (submitted < due && inFlight < 4) {
            submitted++;
            inFlight++;
            post(submitter, '/v1/jobs', { type, payload: { n: submitted } })
                .catch((e) => process.stderr.write(`load: submit: ${e.message}\n`))
                .finally(() => inFlight--);
        }
    }, 10).unref();
    setInterval(() => console.log(`load submitted ${submitted} completed ${completed}`), 10_000);
    await Promise.all(Array.from({ length: workers }, async (_, w) => {
        const c = new Client(url, { pipelining: 1, keepAliveTimeout: 60_000 });
        for (;;) {
            try {
                const l = await post(c, '/v1/leases', { types: [type], max: 1, wait: 5, leaseSeconds: 60, worker: `bench-${w}` });
                if (l.status === 204) continue;
                const { job, leaseId } = l.json.leases[0];
                await post(c, `/v1/jobs/${job.id}:heartbeat`, { leaseId, progress: 50, message: 'half way' });
                await post(c, `/v1/jobs/${job.id}:complete`, { leaseId, result: { ok: true } });
                completed++;
                if (!ready) {
                    ready = true;
                    console.log('load ready');
                }
            } catch (e) {
                process.stderr.write(`load: worker ${w}: ${e.message}\n`);
                await sleep(100);
            }
        }
    }));
}

async function browser(key) {
    const { chromium } = await import('playwright-core');
    const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
    const stop = () => b.close().finally(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    let streams = 0;
    const open = async () => {
        const page = await (await b.newContext()).newPage();
        page.on('console', (m) => { if (m.type() === 'error') process.stderr.write(`browser: console: ${m.text()}\n`); });
        page.on('pageerror', (e) => process.stderr.write(`browser: ${e.message}\n`));
        page.on('request', (r) => { if (/text\/event-stream/.test(r.headers().accept ?? '')) streams++; });
        await page.goto(`${url}/ui/`);
        await page.getByLabel('API key').fill(key);
        await page.getByLabel('API key').press('Enter');
        await page.locator('h1', { hasText: 'Overview' }).waitFor({ timeout: 10_000 });
        return page;
    };
    await open(); // stays on the Overview
    const jobs = await open();
    await jobs.locator('#nav a[data-view="jobs"]').click();
    await jobs.locator('h1', { hasText: 'Jobs' }).waitFor({ timeout: 10_000 });
    await jobs.locator('tr[data-job-id]').first().waitFor({ timeout: 10_000 });
    await jobs.locator('#live.on').waitFor({ timeout: 10_000 });
    await sleep(500);
    console.log(`browser ready ${streams}`);
    await new Promise(() => {}); // until killed
}

if (mode === 'load' && rest.length === 2 && rest.every((n) => Number(n) > 0)) await load(Number(rest[0]), Number(rest[1]));
else if (mode === 'browser' && rest.length === 1) await browser(rest[0]);
else usage();
