// A real browser: headless Chromium (Debian's, driven by playwright-core) loads a page from another origin
// (a server this test runs on another loopback port) that follows a job with EventSource on a signed URL
// (EventSource cannot send Authorization) across CORS. A worker reports progress; the page must show every
// progress value, then done, and EventSource must stop after the 204 that answers its reconnect.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { it, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { complete, expectStatus, heartbeat, leaseOne, sleep, submit } from './lib/jobs.mjs';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'];

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>job</title></head>
<body>
<ol id="progress"></ol>
<p id="state">waiting</p>
<script>
  window.seen = [];
  const url = new URLSearchParams(location.search).get('events');
  const es = new EventSource(url);
  window.es = es;
  const show = (text) => {
    const li = document.createElement('li');
    li.textContent = text;
    document.getElementById('progress').appendChild(li);
  };
  es.addEventListener('status', (e) => window.seen.push(['status', JSON.parse(e.data).status, e.lastEventId]));
  es.addEventListener('progress', (e) => {
    const d = JSON.parse(e.data);
    window.seen.push(['progress', d.progress, e.lastEventId]);
    show(String(d.progress));
  });
  es.addEventListener('done', (e) => {
    const d = JSON.parse(e.data);
    window.seen.push(['done', d.status, e.lastEventId]);
    document.getElementById('state').textContent = 'done: ' + d.status;
  });
</script>
</body></html>`;

describe('EventSource in headless Chromium', () => {
    let d;
    let site;
    let browser;
    let profile;
    before(async () => {
        d = await startDaemon({ config: standardConfig() + 'sse: { heartbeat: 2s, retry: 300ms }\n' });
        site = http.createServer((req, res) => {
            res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
            res.end(PAGE);
        });
        await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
        profile = fs.mkdtempSync(path.join(os.tmpdir(), 'acceptd-chromium-'));
        browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
    });
    after(async () => {
        await browser?.close();
        site?.close();
        await d?.stop();
        if (profile) fs.rmSync(profile, { recursive: true, force: true });
    });

    it('shows every progress value, then done, and stops after the reconnect answered 204', async () => {
        const { c, w } = tenant(d);
        const id = (await submit(c)).json.id;
        const { events } = expectStatus(await c.post(`/v1/jobs/${id}:sign`, { ttlSeconds: 300 }), 200).json;
        const page = await browser.newPage();
        const consoleLines = [];
        page.on('console', (m) => consoleLines.push(m.text()));
        const answers = [];
        page.on('response', (r) => {
            if (r.url().startsWith(d.url)) answers.push(r.status());
        });
        const pageUrl = `http://127.0.0.1:${site.address().port}/?events=${encodeURIComponent(events)}`;
        assert.notEqual(new URL(pageUrl).origin, new URL(events).origin, 'the page must be cross-origin');
        await page.goto(pageUrl);
        await page.waitForFunction(() => window.seen.length >= 1, null, { timeout: 10_000 });

        const l = await leaseOne(w, 'report.export', { expectId: id });
        const values = [5, 20, 35, 50, 65, 80, 95];
        for (const p of values) {
            expectStatus(await heartbeat(w, id, l.leaseId, { progress: p }), 200);
            await sleep(30);
        }
        await complete(w, id, l.leaseId, { result: { ok: true } });

        // After done the server closes; EventSource reconnects with Last-Event-ID, gets 204 and gives up (CLOSED).
        await page.waitForFunction(() => window.es.readyState === EventSource.CLOSED, null, { timeout: 15_000 }).catch(async (e) => {
            throw new Error(`${e.message}\nseen: ${JSON.stringify(await page.evaluate(() => window.seen))}\nconsole: ${consoleLines.join('\n')}`);
        });
        const seen = await page.evaluate(() => window.seen);
        assert.deepEqual(seen.map((x) => x.slice(0, 2)), [
            ['status', 'queued'], ['status', 'running'], ...values.map((p) => ['progress', p]), ['done', 'succeeded'],
        ]);
        const ids = seen.map((x) => Number(x[2]));
        for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `ids ${ids}`);
        const shown = await page.$$eval('#progress li', (lis) => lis.map((li) => Number(li.textContent)));
        assert.deepEqual(shown, values);
        assert.equal(await page.textContent('#state'), 'done: succeeded');
        assert.deepEqual(answers, [200, 204], 'one stream, then the reconnect after done answered 204');
        await page.close();
    });
});
