// acceptd dashboard: a JavaScript module with no dependencies, served by the daemon at /ui/ (src/api/api_ui.c).
//
// Every datum comes from the API with the operator's key, which lives in sessionStorage and travels only in the
// Authorization header. EventSource cannot send headers, so the live streams (/v1/events, /v1/jobs/{id}/events)
// are read with fetch() and a streaming body reader. Nothing received is ever inserted as HTML: the DOM is
// built with createElement and textContent only (the CSP forbids inline script anyway).

const KEY = 'acceptd.key';
const THEME = 'acceptd.theme';
const STATES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'partialSuccess'];
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'partialSuccess']);
const SVG = 'http://www.w3.org/2000/svg';
const LIVE_MS = 250; // how long the jobs list gathers live changes before it shows them

// ---- DOM helpers ----

/** An element: attrs (class, data-*, aria-*, on* handlers, hidden...) and children (nodes or text). */
function h(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else if (k === 'class') e.className = v;
        else if (k === 'value') e.value = v;
        else e.setAttribute(k, v === true ? '' : String(v));
    }
    append(e, children);
    return e;
}

function append(e, children) {
    for (const c of children.flat()) {
        if (c === undefined || c === null || c === false) continue;
        e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
}

function svg(tag, attrs = {}) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
}

const $ = (id) => document.getElementById(id);

// Date.toLocaleString with options builds a new formatter on each call (about 0.15 ms in V8): one, kept.
const TIME_FORMAT = new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', hour12: false,
});

function fmtTime(iso) {
    if (!iso) return '—';
    return TIME_FORMAT.format(new Date(iso));
}

function fmtAgo(iso, now = Date.now()) {
    if (!iso) return '—';
    return fmtDuration(now - Date.parse(iso)) + ' ago';
}

function fmtIn(iso, now = Date.now()) {
    if (!iso) return '—';
    const ms = Date.parse(iso) - now;
    return ms >= 0 ? 'in ' + fmtDuration(ms) : fmtDuration(-ms) + ' ago';
}

function fmtDuration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
    ms = Math.max(0, ms);
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = ms / 1000;
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

function json(v) {
    return v === undefined ? '' : JSON.stringify(v, null, 2);
}

function badge(state) {
    return h('span', { class: `badge s-${state}` }, state);
}

function progressBar(job) {
    if (job.progress === null || job.progress === undefined) {
        if (job.status !== 'running') return h('span', { class: 'muted' }, '—');
        return h('progress', { 'aria-label': `progress of ${job.id}: unknown`, class: 'bar' });
    }
    return h('span', { class: 'prog' },
        h('progress', { max: 100, value: job.progress, 'aria-label': `progress of ${job.id}`, class: 'bar' }),
        h('span', { class: 'pct' }, `${job.progress}%`));
}

function table(caption, head, rows, { empty = 'Nothing to show.', cls = '' } = {}) {
    const t = h('table', { class: cls },
        h('caption', {}, caption),
        h('thead', {}, h('tr', {}, head.map((c) => h('th', { scope: 'col' }, c)))));
    const body = h('tbody');
    if (rows.length === 0) body.append(h('tr', {}, h('td', { colspan: head.length, class: 'muted' }, empty)));
    for (const r of rows) body.append(r instanceof Node ? r : h('tr', {}, r.map((c) => h('td', {}, c))));
    t.append(body);
    return h('div', { class: 'scroll' }, t);
}

function card(label, value, sub) {
    return h('div', { class: 'card' }, h('div', { class: 'card-label' }, label), h('div', { class: 'card-value' }, value),
        sub ? h('div', { class: 'card-sub' }, sub) : null);
}

// ---- the API ----

// A daemon without API keys serves loopback clients with none (GET /healthz says "auth": "none"): the dashboard
// then opens at once and sends no Authorization header.
let keyless = false;
// tracing.viewerUrl (GET /healthz "traceViewer"): a trace viewer's URL with {traceId}, or null.
let traceViewer = null;

/** A job's trace id: a link to the trace viewer when one is configured. */
function traceLink(traceId) {
    if (!traceViewer) return h('span', { class: 'mono' }, traceId);
    return h('a', { href: traceViewer.replaceAll('{traceId}', traceId), class: 'mono', rel: 'noopener noreferrer', target: '_blank' }, traceId);
}

function authorization() {
    return keyless ? {} : { authorization: `Bearer ${sessionStorage.getItem(KEY) ?? ''}` };
}

class ApiError extends Error {
    constructor(status, problem) {
        super(problem?.detail || problem?.title || `HTTP ${status}`);
        this.status = status;
        this.problem = problem;
    }
}

async function api(method, path, body, signal, type = 'application/json') {
    const headers = { ...authorization(), accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = type;
    const res = await fetch(path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal,
        credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer',
    });
    const text = await res.text();
    let data = null;
    if (text && /json/.test(res.headers.get('content-type') ?? '')) data = JSON.parse(text);
    if (res.status === 401) signOut('That key was refused (401). Sign in again.');
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
}

/**
 * Follow a Server-Sent Events stream with fetch() (the key stays in a header). onEvent(name, data, id) for each
 * event; reconnects after the server's retry with Last-Event-ID until signal aborts or onEvent returns 'stop'.
 */
async function stream(path, onEvent, signal, { onOpen, since } = {}) {
    let last = since ?? null;
    let retry = 2000;
    while (!signal.aborted) {
        try {
            const headers = { ...authorization(), accept: 'text/event-stream' };
            if (last !== null) headers['last-event-id'] = last;
            const res = await fetch(path, { headers, signal, credentials: 'omit', cache: 'no-store' });
            if (res.status === 204) return;
            if (res.status === 401) {
                signOut('That key was refused (401). Sign in again.');
                return;
            }
            if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
            onOpen?.();
            const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
            let buf = '';
            let ev = { name: 'message', data: [], id: null };
            for (;;) {
                const { value, done } = await reader.read();
                if (done) break;
                buf += value;
                let nl;
                while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
                    const line = buf.slice(0, nl);
                    buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
                    if (line === '') {
                        if (ev.data.length > 0) {
                            if (ev.id !== null) last = ev.id;
                            let data = ev.data.join('\n');
                            try {
                                data = JSON.parse(data);
                            } catch {
                                /* not JSON: passed on as text */
                            }
                            if (onEvent(ev.name, data, ev.id) === 'stop') {
                                reader.cancel().catch(() => {});
                                return;
                            }
                        }
                        ev = { name: 'message', data: [], id: null };
                        continue;
                    }
                    if (line.startsWith(':')) continue;
                    const c = line.indexOf(':');
                    const field = c < 0 ? line : line.slice(0, c);
                    const val = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
                    if (field === 'event') ev.name = val;
                    else if (field === 'data') ev.data.push(val);
                    else if (field === 'id') ev.id = val;
                    else if (field === 'retry' && /^\d+$/.test(val)) retry = Number(val);
                }
            }
        } catch (e) {
            if (signal.aborted) return;
            setLive(false, `stream interrupted: ${e.message}`);
        }
        await new Promise((r) => setTimeout(r, Math.max(retry, 500)));
    }
}

// ---- shell: sign-in, theme, routing ----

let viewAbort = null;
let signOutNote = '';
let routed = false; // the first view of a load leaves the focus where the browser put it

function setLive(ok, text) {
    const l = $('live');
    l.textContent = text ?? (ok ? 'live' : 'offline');
    l.className = `live ${ok ? 'on' : 'off'}`;
}

function signOut(note = '') {
    sessionStorage.removeItem(KEY);
    signOutNote = note;
    if (viewAbort) viewAbort.abort();
    route();
}

function applyTheme() {
    const t = localStorage.getItem(THEME) ?? 'system';
    const dark = t === 'dark' || (t === 'system' && matchMedia('(prefers-color-scheme: dark)').matches);
    document.documentElement.dataset.theme = dark ? 'dark' : 'light';
    const b = $('theme');
    b.textContent = dark ? 'Light theme' : 'Dark theme';
    b.setAttribute('aria-pressed', dark ? 'true' : 'false');
}

async function signIn(key) {
    sessionStorage.setItem(KEY, key);
    try {
        const s = await api('GET', '/v1/stats');
        $('who').textContent = s.tenant === null ? 'admin: every tenant' : `tenant ${s.tenant}`;
        return null;
    } catch (e) {
        sessionStorage.removeItem(KEY);
        return e.status === 401 ? 'That key was refused.' : `Could not sign in: ${e.message}`;
    }
}

const views = {
    overview: overviewView, jobs: jobsView, job: jobView, queues: queuesView, schedules: schedulesView, workers: workersView,
    webhooks: webhooksView, batch: batchView,
};

function route() {
    if (viewAbort) viewAbort.abort();
    viewAbort = new AbortController();
    const signed = keyless || sessionStorage.getItem(KEY) !== null;
    $('signin').hidden = signed;
    $('nav').hidden = !signed;
    $('signout').hidden = !signed || keyless;
    const root = $('view');
    // Keyboard users keep their place: a control that re-rendered the view (a filter) gets the focus back,
    // otherwise the new view's heading takes it, so that a screen reader announces where it is.
    const focused = root.contains(document.activeElement) ? document.activeElement.id : '';
    root.replaceChildren();
    if (!signed) {
        $('who').textContent = '';
        $('live').textContent = '';
        $('signin-error').textContent = signOutNote;
        document.title = 'Sign in · acceptd';
        $('key').focus();
        routed = true;
        return;
    }
    const parts = location.hash.replace(/^#\/?/, '').split('?')[0].split('/');
    let name = parts[0] || 'overview';
    let arg = parts[1] ? decodeURIComponent(parts[1]) : null;
    if (name === 'jobs' && arg) name = 'job';
    if (name === 'batches') name = arg ? 'batch' : 'overview';
    if (!views[name]) name = 'overview';
    for (const a of document.querySelectorAll('#nav a')) {
        if (a.dataset.view === (name === 'job' || name === 'batch' ? 'jobs' : name)) a.setAttribute('aria-current', 'page');
        else a.removeAttribute('aria-current');
    }
    const signal = viewAbort.signal;
    views[name](root, signal, arg).catch((e) => {
        if (signal.aborted) return;
        root.append(h('p', { class: 'error', role: 'alert' }, `Could not load this view: ${e.message}`));
    });
    const again = focused ? document.getElementById(focused) : null;
    if (again) again.focus();
    else if (routed) root.querySelector('h1')?.focus();
    routed = true;
}

function every(ms, fn, signal) {
    let timer = null;
    const tick = async () => {
        if (signal.aborted) return;
        try {
            await fn();
            setLive(true);
        } catch (e) {
            if (!signal.aborted) setLive(false, `offline: ${e.message}`);
        }
        if (!signal.aborted) timer = setTimeout(tick, ms);
    };
    signal.addEventListener('abort', () => clearTimeout(timer));
    return tick();
}

function heading(root, text) {
    document.title = `${text} · acceptd`;
    const h1 = h('h1', { tabindex: '-1' }, text);
    root.append(h1);
    return h1;
}

// ---- Overview ----

async function overviewView(root, signal) {
    heading(root, 'Overview');
    const body = h('div', { class: 'overview' });
    root.append(body);
    let last = null;
    // The chart is drawn for the screen's width: redraw it when the layout changes (a phone turned, say).
    const mq = matchMedia('(max-width: 700px)');
    const redraw = () => last && renderOverview(body, last);
    mq.addEventListener('change', redraw);
    signal.addEventListener('abort', () => mq.removeEventListener('change', redraw));
    await every(5000, async () => {
        last = await api('GET', '/v1/stats', undefined, signal);
        renderOverview(body, last);
    }, signal);
}

function renderOverview(body, s) {
    const totals = Object.fromEntries(STATES.map((k) => [k, 0]));
    const types = new Map();
    for (const c of s.counts) {
        totals[c.state] = (totals[c.state] ?? 0) + c.count;
        if (!types.has(c.type)) types.set(c.type, { counts: {}, oldestQueued: null });
        const t = types.get(c.type);
        t.counts[c.state] = c.count;
        if (c.state === 'queued') t.oldestQueued = c.oldestCreatedAt;
    }
    const now = Date.parse(s.now);
    const r = s.ratesPerSecond;
    const lat = s.latencyMs;
    const ms = (v) => (v === null ? '—' : fmtDuration(v));
    const queueDepth = totals.queued;
    body.replaceChildren(
        h('section', { 'aria-labelledby': 'ov-states' },
            h('h2', { id: 'ov-states' }, 'Jobs by state'),
            h('div', { class: 'cards' }, STATES.map((k) => card(k, totals[k].toLocaleString())))),
        h('section', { 'aria-labelledby': 'ov-rates' },
            h('h2', { id: 'ov-rates' }, 'Throughput and latency'),
            h('div', { class: 'cards' },
                card('Submits /s', r.submitted.toFixed(2), 'last minute'),
                card('Completions /s', r.completed.toFixed(2), 'last minute'),
                card('Failures /s', r.failed.toFixed(2), 'last minute'),
                card('Queue depth', queueDepth.toLocaleString(), 'queued jobs'),
                card('Pickup p50 / p99', `${ms(lat.pickup.p50)} / ${ms(lat.pickup.p99)}`, `queued → running, ${lat.pickup.samples} jobs`),
                card('Turnaround p50 / p99', `${ms(lat.turnaround.p50)} / ${ms(lat.turnaround.p99)}`,
                    `submit → succeeded, ${lat.turnaround.samples} jobs`))),
        h('section', { 'aria-labelledby': 'ov-chart' },
            h('h2', { id: 'ov-chart' }, 'The last hour'),
            chart(s),
            h('p', { class: 'muted small' },
                `Per ${s.bucketSeconds} s, counted in memory since ${fmtTime(s.collectingSince)} (the daemon's start).`)),
        h('section', { 'aria-labelledby': 'ov-types' },
            h('h2', { id: 'ov-types' }, 'By type'),
            table('Jobs by type and state, with the oldest queued job of each type',
                ['Type', ...STATES, 'Oldest queued'],
                [...types.entries()].map(([type, t]) => h('tr', {},
                    h('th', { scope: 'row' }, h('a', { href: `#/jobs?type=${encodeURIComponent(type)}` }, type)),
                    STATES.map((k) => h('td', { class: 'num' }, (t.counts[k] ?? 0).toLocaleString())),
                    h('td', {}, t.oldestQueued ? fmtAgo(t.oldestQueued, now) : '—'))),
                { empty: 'No jobs yet.' })),
    );
}

/** A line chart of the activity buckets, built as SVG elements (no markup strings). */
function chart(s) {
    // Drawn for the width it will have, so that its text stays readable on a phone.
    const narrow = matchMedia('(max-width: 700px)').matches;
    const W = narrow ? 360 : 720, H = narrow ? 200 : 180, PAD = 28;
    const series = [
        { key: 1, name: 'submitted', cls: 'l-sub' },
        { key: 2, name: 'completed', cls: 'l-ok' },
        { key: 3, name: 'failed', cls: 'l-fail' },
    ];
    const rows = s.activity;
    let max = 1;
    for (const row of rows) for (const se of series) max = Math.max(max, row[se.key]);
    const x = (i) => PAD + (i * (W - PAD * 2)) / Math.max(1, rows.length - 1);
    const y = (v) => H - PAD - (v * (H - PAD * 2)) / max;
    const totals = series.map((se) => rows.reduce((a, row) => a + row[se.key], 0));
    const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-labelledby': 'chart-title chart-desc' });
    const title = svg('title', { id: 'chart-title' });
    title.textContent = 'Jobs per bucket over the last hour';
    const desc = svg('desc', { id: 'chart-desc' });
    desc.textContent = series.map((se, i) => `${totals[i]} ${se.name}`).join(', ') + ` in the last hour; peak ${max} per ${s.bucketSeconds} s.`;
    root.append(title, desc);
    root.append(svg('line', { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, class: 'axis' }));
    root.append(svg('line', { x1: PAD, y1: PAD, x2: PAD, y2: H - PAD, class: 'axis' }));
    const lbl = (tx, ty, text, anchor = 'start') => {
        const t = svg('text', { x: tx, y: ty, class: 'tick', 'text-anchor': anchor });
        t.textContent = text;
        return t;
    };
    root.append(lbl(PAD - 4, PAD + 4, String(max), 'end'), lbl(PAD - 4, H - PAD + 4, '0', 'end'));
    root.append(lbl(PAD, H - 8, '−60 min'), lbl(W / 2, H - 8, '−30 min', 'middle'), lbl(W - PAD, H - 8, 'now', 'end'));
    for (const f of [0.25, 0.5, 0.75]) root.append(svg('line', { x1: PAD, y1: y(max * f), x2: W - PAD, y2: y(max * f), class: 'grid' }));
    for (const se of series) {
        const pts = rows.map((row, i) => `${x(i).toFixed(1)},${y(row[se.key]).toFixed(1)}`).join(' ');
        root.append(svg('polyline', { points: pts, class: `line ${se.cls}` }));
    }
    const legend = h('ul', { class: 'legend' }, series.map((se, i) => h('li', {}, h('span', { class: `swatch ${se.cls}`, 'aria-hidden': 'true' }), `${se.name} (${totals[i]})`)));
    return h('figure', { class: 'chart-box' }, root, legend);
}

// ---- Jobs ----

function jobsQuery() {
    const q = new URLSearchParams(location.hash.split('?')[1] ?? '');
    return { status: q.get('status') ?? '', type: q.get('type') ?? '', range: q.get('range') ?? '', id: q.get('id') ?? '' };
}

const RANGES = [['', 'Any time'], ['300', 'Last 5 minutes'], ['3600', 'Last hour'], ['86400', 'Last 24 hours'], ['604800', 'Last 7 days']];

async function jobsView(root, signal) {
    heading(root, 'Jobs');
    const f = jobsQuery();
    const status = h('select', { id: 'f-status', name: 'status' }, h('option', { value: '' }, 'Any state'), STATES.map((s) => h('option', { value: s }, s)));
    status.value = f.status;
    const type = h('input', { id: 'f-type', name: 'type', value: f.type, spellcheck: 'false', autocomplete: 'off' });
    const range = h('select', { id: 'f-range', name: 'range' }, RANGES.map(([v, t]) => h('option', { value: v }, t)));
    range.value = f.range;
    const id = h('input', { id: 'f-id', name: 'id', value: f.id, type: 'search', spellcheck: 'false', autocomplete: 'off', placeholder: 'job_…' });
    const apply = () => {
        const q = new URLSearchParams();
        if (status.value) q.set('status', status.value);
        if (type.value.trim()) q.set('type', type.value.trim());
        if (range.value) q.set('range', range.value);
        if (id.value.trim()) q.set('id', id.value.trim());
        const s = q.toString();
        location.hash = '#/jobs' + (s ? '?' + s : '');
    };
    const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter jobs', onsubmit: (e) => { e.preventDefault(); apply(); } },
        h('div', { class: 'field' }, h('label', { for: 'f-status' }, 'State'), status),
        h('div', { class: 'field' }, h('label', { for: 'f-type' }, 'Type'), type),
        h('div', { class: 'field' }, h('label', { for: 'f-range' }, 'Updated'), range),
        h('div', { class: 'field' }, h('label', { for: 'f-id' }, 'Id contains'), id),
        h('button', { type: 'submit' }, 'Apply'));
    status.addEventListener('change', apply);
    range.addEventListener('change', apply);
    const note = h('p', { class: 'muted small', 'aria-live': 'polite' });
    const tbody = h('tbody');
    const tbl = h('table', { id: 'jobs-table' },
        h('caption', {}, 'Jobs, newest first; rows update live'),
        h('thead', {}, h('tr', {}, ['Id', 'Type', 'State', 'Progress', 'Attempt', 'Created', 'Updated'].map((c) => h('th', { scope: 'col' }, c)))),
        tbody);
    const prev = h('button', { type: 'button', class: 'ghost', disabled: true }, '← Newer');
    const next = h('button', { type: 'button', class: 'ghost', disabled: true }, 'Older →');
    const pager = h('div', { class: 'pager' }, prev, next);
    root.append(form, note, h('div', { class: 'scroll' }, tbl), pager);

    const limit = 50;
    const tokens = [null]; // the pageToken of each page shown so far
    let page = 0;
    const rows = new Map(); // job id -> tr
    const since = f.range ? new Date(Date.now() - Number(f.range) * 1000).toISOString() : null;
    const matches = (j) => (!f.status || j.status === f.status) && (!f.type || j.type === f.type) &&
        (!f.id || j.id.includes(f.id)) && (!since || j.lastUpdatedAt >= since);

    const rowOf = (j) => {
        const tr = h('tr', { 'data-job-id': j.id, 'data-state': j.status },
            h('td', {}, h('a', { href: `#/jobs/${encodeURIComponent(j.id)}`, class: 'mono' }, j.id)),
            h('td', {}, j.type),
            h('td', {}, badge(j.status)),
            h('td', {}, progressBar(j)),
            h('td', { class: 'num' }, `${j.attempt}/${j.maxAttempts}`),
            h('td', {}, h('time', { datetime: j.createdAt }, fmtTime(j.createdAt))),
            h('td', {}, h('time', { datetime: j.lastUpdatedAt }, fmtTime(j.lastUpdatedAt))));
        return tr;
    };
    const showEmpty = () => {
        if (rows.size === 0 && !tbody.querySelector('.empty'))
            tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: 7, class: 'muted' }, 'No jobs match.')));
        if (rows.size > 0) tbody.querySelector('.empty')?.remove();
    };

    const load = async () => {
        tbody.replaceChildren();
        rows.clear();
        let items = [];
        let nextToken = null;
        if (/^job_[A-Za-z0-9_-]{28}$/.test(f.id)) {
            try {
                items = [await api('GET', `/v1/jobs/${encodeURIComponent(f.id)}`, undefined, signal)];
            } catch (e) {
                if (e.status !== 404 && e.status !== 410) throw e;
            }
        } else {
            const q = new URLSearchParams({ limit: String(f.id ? 500 : limit) });
            if (f.status) q.set('status', f.status);
            if (f.type) q.set('type', f.type);
            if (since) q.set('updatedAfter', since);
            if (tokens[page]) q.set('pageToken', tokens[page]);
            const res = await api('GET', `/v1/jobs?${q}`, undefined, signal);
            items = res.items.filter(matches);
            nextToken = res.nextPageToken ?? null;
        }
        for (const j of items) {
            const tr = rowOf(j);
            rows.set(j.id, tr);
            tbody.append(tr);
        }
        showEmpty();
        tokens[page + 1] = nextToken;
        prev.disabled = page === 0;
        next.disabled = !nextToken;
        note.textContent = `Page ${page + 1}: ${items.length} job${items.length === 1 ? '' : 's'}` +
            (f.id && !/^job_/.test(f.id) ? ' (id search looks at the newest 500 per page)' : '') + '.';
    };
    prev.addEventListener('click', () => { page--; load().catch(showErr); });
    next.addEventListener('click', () => { page++; load().catch(showErr); });
    const showErr = (e) => { if (!signal.aborted) note.textContent = `Could not load jobs: ${e.message}`; };

    // A job's newest state, applied to the table: its row on screen is replaced in place; a new matching job is
    // put on top of the first page.
    const show = (j) => {
        const tr = rows.get(j.id);
        if (tr) {
            const fresh = rowOf(j);
            tr.replaceWith(fresh);
            rows.set(j.id, fresh);
        } else if (page === 0 && matches(j)) {
            const fresh = rowOf(j);
            rows.set(j.id, fresh);
            tbody.prepend(fresh);
            if (rows.size > limit) {
                const lastRow = tbody.lastElementChild;
                rows.delete(lastRow.dataset.jobId);
                lastRow.remove();
            }
        }
    };

    await load();
    // Live: every change of the tenant's jobs, gathered for LIVE_MS and applied at once, each job's newest only.
    // Applied one by one, a busy queue's hundreds of changes a second each laid the table out again.
    const pending = new Map(); // job id -> its newest state not shown yet
    const flush = () => {
        for (const j of pending.values()) show(j);
        pending.clear();
        showEmpty();
    };
    stream('/v1/events', (name, j) => {
        if (name !== 'job' || typeof j !== 'object') return;
        if (pending.size === 0) setTimeout(() => { if (!signal.aborted) flush(); }, LIVE_MS);
        pending.set(j.id, j); // (a job seen again keeps its place: new rows go on top in the order they came)
    }, signal, { onOpen: () => setLive(true) });
}

// ---- one batch ----

// A batch (POST /v1/batches): its counts and progress, polled with its ETag while it runs, its jobs, and cancel.
async function batchView(root, signal, id) {
    const h1 = heading(root, 'Batch');
    h1.append(' ', h('span', { class: 'mono small' }, id));
    const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    const head = h('div', { class: 'job-head' });
    const jobs = h('section', { 'aria-labelledby': 'h-batch-jobs' });
    let batch = null;
    let shownJobs = '';
    const cancelBtn = h('button', { type: 'button', id: 'btn-batch-cancel', class: 'danger', onclick: async () => {
        status.textContent = 'Cancel…';
        try {
            batch = await api('POST', `/v1/batches/${encodeURIComponent(id)}:cancel`, undefined, signal);
            await render();
            status.textContent = 'Cancel sent to every job not final.';
        } catch (e) {
            status.textContent = `Cancel failed: ${e.message}`;
        }
    } }, 'Cancel batch');
    root.append(h('p', {}, h('a', { href: '#/jobs' }, '← All jobs')), head, h('div', { class: 'actions' }, cancelBtn), status, jobs);
    const render = async () => {
        const b = batch;
        cancelBtn.disabled = b.status !== 'running';
        const k = b.counts;
        head.replaceChildren(h('dl', { class: 'facts' },
            h('dt', {}, 'State'), h('dd', { id: 'batch-state' }, badge(b.status)),
            h('dt', {}, 'Progress'), h('dd', { id: 'batch-progress' }, h('span', { class: 'prog' },
                h('progress', { max: 100, value: b.progress, 'aria-label': `progress of ${b.id}`, class: 'bar' }),
                h('span', { class: 'pct' }, `${b.progress}%`))),
            h('dt', {}, 'Jobs'), h('dd', { id: 'batch-counts' }, `${b.total}: ${k.queued} queued, ${k.running} running, ` +
                `${k.succeeded} succeeded, ${k.partialSuccess} partialSuccess, ${k.failed} failed, ${k.cancelled} cancelled`),
            h('dt', {}, 'Created'), h('dd', {}, fmtTime(b.createdAt)),
            h('dt', {}, 'Finished'), h('dd', {}, fmtTime(b.finishedAt))));
        // The jobs are read again only when the counts moved.
        const key = JSON.stringify(k);
        if (key === shownJobs) return;
        shownJobs = key;
        const page = await api('GET', `/v1/batches/${encodeURIComponent(id)}/jobs?limit=100`, undefined, signal);
        jobs.replaceChildren(h('h2', { id: 'h-batch-jobs' }, 'Jobs'),
            table(`Jobs of the batch, newest first${page.nextPageToken ? ' (the first 100)' : ''}`, ['Job', 'Type', 'State', 'Progress', 'Created'],
                page.items.map((j) => [h('a', { href: `#/jobs/${encodeURIComponent(j.id)}`, class: 'mono' }, j.id), j.type,
                    badge(j.status), progressBar(j), fmtTime(j.createdAt)])));
    };
    batch = await api('GET', `/v1/batches/${encodeURIComponent(id)}`, undefined, signal);
    await render();
    every(2000, async () => {
        if (batch.status !== 'running') return;
        batch = await api('GET', `/v1/batches/${encodeURIComponent(id)}`, undefined, signal);
        await render();
    }, signal);
}

// ---- one job ----

async function jobView(root, signal, id) {
    const h1 = heading(root, 'Job');
    h1.append(' ', h('span', { class: 'mono small' }, id));
    const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    const head = h('div', { class: 'job-head' });
    const actions = h('div', { class: 'actions' });
    const detail = h('div', { class: 'job-detail' });
    const attempts = h('section', { 'aria-labelledby': 'h-attempts' });
    const timeline = h('ol', { class: 'timeline', id: 'timeline' });
    root.append(h('p', {}, h('a', { href: '#/jobs' }, '← All jobs')), head, actions, status, detail, attempts,
        h('section', { 'aria-labelledby': 'h-timeline' }, h('h2', { id: 'h-timeline' }, 'Event timeline'), timeline));

    let job = null;
    const signedOut = h('input', { id: 'signed-url', readonly: true, class: 'mono', 'aria-label': 'Signed status URL' });
    const signedBox = h('div', { class: 'signed', hidden: true }, h('label', { for: 'signed-url' }, 'Signed status URL (read-only access to this job)'), signedOut);

    const act = async (what, fn) => {
        status.textContent = `${what}…`;
        try {
            status.textContent = await fn();
        } catch (e) {
            status.textContent = `${what} failed: ${e.message}`;
        }
    };
    const cancelBtn = h('button', { type: 'button', id: 'btn-cancel', class: 'danger', onclick: () => act('Cancel', async () => {
        job = await api('POST', `/v1/jobs/${encodeURIComponent(id)}:cancel`, undefined, signal);
        render();
        return job.status === 'cancelled' ? 'Cancelled.' : 'Cancel requested: the worker will be told.';
    }) }, 'Cancel');
    const retryBtn = h('button', { type: 'button', id: 'btn-retry', onclick: () => act('Retry', async () => {
        const n = await api('POST', `/v1/jobs/${encodeURIComponent(id)}:retry`, undefined, signal);
        location.hash = `#/jobs/${encodeURIComponent(n.id)}`;
        return `Retried as ${n.id}.`;
    }) }, 'Retry');
    const signBtn = h('button', { type: 'button', id: 'btn-sign', class: 'ghost', onclick: () => act('Signing', async () => {
        const s = await api('POST', `/v1/jobs/${encodeURIComponent(id)}:sign`, { ttlSeconds: 3600 }, signal);
        signedOut.value = s.url;
        signedBox.hidden = false;
        try {
            await navigator.clipboard.writeText(s.url);
            return `Signed URL copied; it expires ${fmtTime(s.expiresAt)}.`;
        } catch {
            signedOut.focus();
            signedOut.select();
            return `Signed URL below (copy it yourself); it expires ${fmtTime(s.expiresAt)}.`;
        }
    }) }, 'Copy signed status URL');
    actions.append(cancelBtn, retryBtn, signBtn, signedBox);

    const render = () => {
        const j = job;
        cancelBtn.disabled = TERMINAL.has(j.status) || j.cancelRequested;
        retryBtn.disabled = !(j.status === 'failed' || j.status === 'cancelled');
        head.replaceChildren(
            h('dl', { class: 'facts' },
                h('dt', {}, 'State'), h('dd', { id: 'job-state' }, badge(j.status), j.cancelRequested ? ' (cancel requested)' : ''),
                h('dt', {}, 'Type'), h('dd', {}, j.type),
                h('dt', {}, 'Progress'), h('dd', { id: 'job-progress' }, progressBar(j)),
                h('dt', {}, 'Message'), h('dd', { id: 'job-message' }, j.message ?? '—'),
                h('dt', {}, 'Attempt'), h('dd', {}, `${j.attempt} of ${j.maxAttempts}`),
                h('dt', {}, 'Priority'), h('dd', {}, j.priority),
                h('dt', {}, 'Created'), h('dd', {}, fmtTime(j.createdAt)),
                h('dt', {}, 'Started'), h('dd', {}, fmtTime(j.startedAt)),
                h('dt', {}, 'Updated'), h('dd', {}, fmtTime(j.lastUpdatedAt)),
                h('dt', {}, 'Finished'), h('dd', {}, fmtTime(j.finishedAt)),
                j.runAt ? [h('dt', {}, 'Runs at'), h('dd', {}, fmtTime(j.runAt))] : null,
                j.traceId ? [h('dt', {}, 'Trace'), h('dd', { id: 'job-trace' }, traceLink(j.traceId))] : null,
                j.retryOf ? [h('dt', {}, 'Retry of'), h('dd', {}, h('a', { href: `#/jobs/${encodeURIComponent(j.retryOf)}`, class: 'mono' }, j.retryOf))] : null,
                j.batchId ? [h('dt', {}, 'Batch'), h('dd', {}, h('a', { href: `#/batches/${encodeURIComponent(j.batchId)}`, class: 'mono' }, j.batchId))] : null,
                j.expiresAt ? [h('dt', {}, 'Expires'), h('dd', {}, fmtTime(j.expiresAt))] : null));
        const blocks = [h('section', { 'aria-labelledby': 'h-payload' }, h('h2', { id: 'h-payload' }, 'Payload'), h('pre', { tabindex: '0' }, json(j.payload)))];
        if (j.error) blocks.push(h('section', { 'aria-labelledby': 'h-problem' }, h('h2', { id: 'h-problem' }, 'Problem'), h('pre', { tabindex: '0', class: 'problem' }, json(j.error))));
        if ('result' in j) blocks.push(h('section', { 'aria-labelledby': 'h-result' }, h('h2', { id: 'h-result' }, 'Result'), h('pre', { tabindex: '0' }, json(j.result))));
        if (j.resultLocation) blocks.push(h('p', {}, 'Result stored at ', h('span', { class: 'mono' }, j.resultLocation)));
        detail.replaceChildren(...blocks);
    };
    const loadAttempts = async () => {
        const a = await api('GET', `/v1/jobs/${encodeURIComponent(id)}/attempts`, undefined, signal);
        attempts.replaceChildren(h('h2', { id: 'h-attempts' }, 'Attempts'),
            table('Attempts, oldest first', ['Attempt', 'Worker', 'Started', 'Ended', 'Lease held', 'Outcome'],
                a.attempts.map((t) => [String(t.attempt), t.worker ?? '—', fmtTime(t.startedAt), fmtTime(t.endedAt),
                    fmtDuration((t.endedAt ? Date.parse(t.endedAt) : Date.now()) - Date.parse(t.startedAt)), t.outcome ?? 'live']),
                { empty: 'Not leased yet.' }));
    };

    job = await api('GET', `/v1/jobs/${encodeURIComponent(id)}`, undefined, signal);
    render();
    await loadAttempts();
    setLive(true);
    let refetch = null;
    stream(`/v1/jobs/${encodeURIComponent(id)}/events`, (name, data, evid) => {
        const at = data.lastUpdatedAt ?? data.finishedAt;
        const what = name === 'done' ? `done: ${data.status}` : name === 'status' ? `status: ${data.status}` :
            `progress ${data.progress ?? '—'}%`;
        timeline.prepend(h('li', { 'data-kind': name },
            h('time', { datetime: at }, fmtTime(at)), ' ', h('strong', {}, what),
            data.message ? h('span', {}, ` — ${data.message}`) : null, h('span', { class: 'muted small' }, ` #${evid}`)));
        if (name === 'done') {
            job = data;
            render();
        } else if (job) {
            job = { ...job, status: data.status ?? job.status, progress: data.progress, message: data.message, lastUpdatedAt: data.lastUpdatedAt };
            render();
        }
        clearTimeout(refetch);
        refetch = setTimeout(async () => {
            try {
                job = await api('GET', `/v1/jobs/${encodeURIComponent(id)}`, undefined, signal);
                render();
                await loadAttempts();
            } catch {
                /* the next event tries again */
            }
        }, 300);
    }, signal, { onOpen: () => setLive(true) });
    signal.addEventListener('abort', () => clearTimeout(refetch));
}

// ---- Queues ----

const PERIODS = ['1s', '10s', '1m', '10m', '1h'];

function fmtRate(r) {
    return r ? `${r.limit} per ${r.period}` : '—';
}

/** A queue's state: paused, held back by a limit (its jobs' waitingFor), or active. */
function queueState(q) {
    if (q.paused) return 'paused';
    return q.counts.waiting > 0 ? 'limited' : 'active';
}

/** The limits form of queue q: each field empty for none; submit sends one merge patch (RFC 7396). */
function limitsForm(q, save) {
    const id = (name) => `q-${q.type}-${name}`.replace(/[^A-Za-z0-9_-]/g, '_');
    const num = (name, label, v) => h('div', {},
        h('label', { for: id(name) }, label),
        h('input', { id: id(name), name, type: 'number', min: 1, step: 1, inputmode: 'numeric', value: v ?? '' }));
    const rate = (name, label, r) => h('fieldset', {},
        h('legend', {}, label),
        h('label', { for: id(name) }, 'Leases'),
        h('input', { id: id(name), name, type: 'number', min: 1, step: 1, inputmode: 'numeric', value: r?.limit ?? '' }),
        h('label', { for: id(`${name}-period`) }, 'per'),
        h('select', { id: id(`${name}-period`), name: `${name}Period` },
            PERIODS.map((p) => h('option', { value: p, selected: (r?.period ?? '1s') === p }, p))));
    const form = h('form', {
        class: 'filters limits', 'aria-label': `Limits of ${q.type}`,
        onsubmit: (e) => {
            e.preventDefault();
            const f = new FormData(form);
            const int = (k) => (f.get(k) === '' ? null : Number(f.get(k)));
            const lim = (k) => (f.get(k) === '' ? null : { limit: Number(f.get(k)), period: f.get(`${k}Period`) });
            save({
                concurrency: int('concurrency'), groupConcurrency: int('groupConcurrency'),
                rateLimit: lim('rateLimit'), groupRateLimit: lim('groupRateLimit'),
            });
        },
    },
    num('concurrency', 'Concurrency', q.concurrency),
    num('groupConcurrency', 'Per group', q.groupConcurrency),
    rate('rateLimit', 'Rate limit', q.rateLimit),
    rate('groupRateLimit', 'Rate limit per group', q.groupRateLimit),
    h('button', { type: 'submit' }, 'Save limits'));
    return h('details', { class: 'queue-limits' }, h('summary', {}, `Limits of ${q.type}`), form);
}

async function queuesView(root, signal) {
    heading(root, 'Queues');
    const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    const body = h('div');
    const forms = h('div'); // rebuilt only while no form is open, so that a refresh never takes what is typed
    root.append(h('p', { class: 'small' }, 'One queue per job type. A paused queue still accepts jobs; none is leased until it resumes. ',
        'Changing a queue takes an admin key.'), status, body, forms);
    const act = async (what, type, patch) => {
        status.textContent = `${what} ${type}…`;
        try {
            await api('PATCH', `/v1/queues/${encodeURIComponent(type)}`, patch, signal, 'application/merge-patch+json');
            status.textContent = `${what} ${type}: done.`;
            await refresh(true);
        } catch (e) {
            status.textContent = e.status === 403 ? `${what} ${type}: this key\u2019s role may not change queues (an admin key may).`
                : `${what} ${type} failed: ${e.message}`;
        }
    };
    const refresh = async (saved = false) => {
        const list = await api('GET', '/v1/queues', undefined, signal);
        const rows = list.queues.map((q) => h('tr', { 'data-queue': q.type },
            h('th', { scope: 'row' }, q.type),
            h('td', {}, badge(queueState(q))),
            h('td', { class: 'num' }, String(q.counts.queued)),
            h('td', { class: 'num' }, String(q.counts.running)),
            h('td', { class: 'num' }, String(q.counts.scheduled)),
            h('td', { class: 'num' }, String(q.counts.waiting), q.waitingFor ? ` (${q.waitingFor})` : ''),
            h('td', {}, q.concurrency ?? '—', q.groupConcurrency ? ` (${q.groupConcurrency} per group)` : ''),
            h('td', {}, fmtRate(q.rateLimit), q.groupRateLimit ? ` (${fmtRate(q.groupRateLimit)} per group)` : ''),
            h('td', {}, h('button', {
                type: 'button', class: 'small-btn', 'aria-label': `${q.paused ? 'Resume' : 'Pause'} ${q.type}`,
                onclick: () => act(q.paused ? 'Resume' : 'Pause', q.type, { paused: !q.paused }),
            }, q.paused ? 'Resume' : 'Pause'))));
        body.replaceChildren(
            table('Queues by type: jobs queued, running, scheduled for later, and held back by a pause or a limit',
                ['Type', 'State', 'Queued', 'Running', 'Scheduled', 'Waiting', 'Concurrency', 'Rate limit', 'Action'], rows,
                { empty: 'No queue yet: a type gets one with its first job or setting.' }));
        if (saved || !forms.querySelector('details[open]'))
            forms.replaceChildren(...list.queues.map((q) => limitsForm(q, (patch) => act('Save limits of', q.type, patch))));
    };
    await every(3000, refresh, signal);
}

// ---- Schedules ----

/** A schedule's rule as written: its cron expression or its interval, and its time zone. */
function scheduleRule(s) {
    return s.cron !== null ? `cron ${s.cron} (${s.timezone})` : `every ${s.every}`;
}

async function schedulesView(root, signal) {
    heading(root, 'Schedules');
    const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    const body = h('div');
    root.append(h('p', { class: 'small' }, 'Recurring jobs. Fire times during a pause are skipped; Run now makes one run at once, ',
        'under the schedule\u2019s overlap policy.'), status, body);
    const act = async (what, id, method, path, patch) => {
        status.textContent = `${what} ${id}…`;
        try {
            await api(method, path, patch, signal, patch ? 'application/merge-patch+json' : undefined);
            status.textContent = `${what} ${id}: done.`;
            await refresh();
        } catch (e) {
            status.textContent = `${what} ${id} failed: ${e.message}`;
        }
    };
    const refresh = async () => {
        const items = [];
        let token = null;
        do {
            const page = await api('GET', `/v1/schedules?limit=200${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`, undefined, signal);
            items.push(...page.items);
            token = page.nextPageToken;
        } while (token && items.length < 1000);
        const now = Date.now();
        const rows = items.map((s) => {
            const path = `/v1/schedules/${encodeURIComponent(s.id)}`;
            return h('tr', { 'data-schedule': s.id },
                h('th', { scope: 'row', class: 'mono' }, s.id),
                h('td', {}, scheduleRule(s)),
                h('td', {}, badge(s.paused ? 'paused' : 'active')),
                h('td', {}, s.nextRunAt ? h('span', { title: s.upcoming.map(fmtTime).join('\n') }, fmtIn(s.nextRunAt, now)) : '—'),
                h('td', {}, s.recentRuns.length === 0 ? '—' : h('ul', { class: 'runs' }, s.recentRuns.slice(0, 3).map((r) => h('li', {},
                    h('a', { href: `#/jobs/${encodeURIComponent(r.jobId)}`, class: 'mono' }, r.jobId), ` ${fmtAgo(r.fireTime, now)}`)))),
                h('td', { class: 'num' }, String(s.counts.fires)),
                h('td', { class: 'num' }, String(s.counts.skips)),
                h('td', {},
                    h('button', {
                        type: 'button', class: 'small-btn', 'aria-label': `${s.paused ? 'Resume' : 'Pause'} ${s.id}`,
                        onclick: () => act(s.paused ? 'Resume' : 'Pause', s.id, 'PATCH', path, { paused: !s.paused }),
                    }, s.paused ? 'Resume' : 'Pause'), ' ',
                    h('button', {
                        type: 'button', class: 'small-btn', 'aria-label': `Run now ${s.id}`,
                        onclick: () => act('Run now', s.id, 'POST', `${path}:trigger`),
                    }, 'Run now')));
        });
        body.replaceChildren(table('Schedules: their rule, next run, recent runs and counts', ['Id', 'Rule', 'State', 'Next run',
            'Recent runs', 'Runs', 'Skipped', 'Action'], rows, { empty: 'No schedule yet: POST /v1/schedules or acceptd schedules create.' }));
    };
    await every(3000, refresh, signal);
}

// ---- Workers ----

async function workersView(root, signal) {
    heading(root, 'Workers');
    const body = h('div');
    root.append(body);
    await every(2000, async () => {
        const l = await api('GET', '/v1/leases', undefined, signal);
        const now = Date.parse(l.now);
        const byType = new Map();
        for (const p of l.parked) for (const t of p.types) {
            if (!byType.has(t)) byType.set(t, []);
            byType.get(t).push(p);
        }
        body.replaceChildren(
            h('section', { 'aria-labelledby': 'h-leases' },
                h('h2', { id: 'h-leases' }, `Current leases (${l.leasesTotal})`),
                table('Running jobs with their lease', ['Job', 'Type', 'Worker', 'Attempt', 'Progress', 'Started', 'Lease expires', 'Last heartbeat'],
                    l.leases.map((x) => h('tr', { 'data-job-id': x.jobId },
                        h('td', {}, h('a', { href: `#/jobs/${encodeURIComponent(x.jobId)}`, class: 'mono' }, x.jobId)),
                        h('td', {}, x.type), h('td', {}, x.worker ?? '—'), h('td', { class: 'num' }, String(x.attempt)),
                        h('td', {}, progressBar({ id: x.jobId, status: 'running', progress: x.progress })),
                        h('td', {}, fmtAgo(x.startedAt, now)),
                        h('td', { class: Date.parse(x.leaseExpiresAt) - now < 5000 ? 'warn' : '' }, fmtIn(x.leaseExpiresAt, now)),
                        h('td', {}, fmtAgo(x.lastHeartbeatAt, now)))),
                    { empty: 'No job is running.' })),
            h('section', { 'aria-labelledby': 'h-parked' },
                h('h2', { id: 'h-parked' }, 'Parked workers by type'),
                h('p', { class: 'muted small' }, 'Lease requests waiting for work on this node (long polls).'),
                table('Workers waiting for a job, by type', ['Type', 'Waiting', 'Workers'],
                    [...byType.entries()].sort().map(([t, ps]) => h('tr', {},
                        h('th', { scope: 'row' }, t), h('td', { class: 'num' }, String(ps.length)),
                        h('td', {}, ps.map((p) => `${p.worker ?? '(unnamed)'} for ${fmtDuration(p.waitingMs)}`).join(', ')))),
                    { empty: 'No worker is waiting.' })));
    }, signal);
}

// ---- Webhooks ----

async function webhooksView(root, signal) {
    heading(root, 'Webhooks');
    const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
    const secret = h('div', { class: 'secret', hidden: true });
    const body = h('div');
    root.append(status, secret, body);
    const act = async (what, fn) => {
        status.textContent = `${what}…`;
        try {
            status.textContent = await fn();
            await refresh();
        } catch (e) {
            status.textContent = `${what} failed: ${e.message}`;
        }
    };
    const refresh = async () => {
        let list;
        try {
            list = await api('GET', '/v1/webhooks', undefined, signal);
        } catch (e) {
            if (e.status === 403) {
                body.replaceChildren(h('p', {}, 'This key\u2019s role may not read webhooks (a client or admin key may).'));
                return;
            }
            throw e;
        }
        const parts = [];
        if (list.items.length === 0) parts.push(h('p', { class: 'muted' }, 'No webhook endpoints. Create one with POST /v1/webhooks.'));
        for (const w of list.items) {
            const [recent, dead] = await Promise.all([
                api('GET', `/v1/webhooks/${encodeURIComponent(w.id)}/deliveries?limit=10`, undefined, signal),
                api('GET', `/v1/webhooks/${encodeURIComponent(w.id)}/deliveries?status=dead&limit=20`, undefined, signal),
            ]);
            const failing = recent.items.some((d) => d.status !== 'delivered' && d.attempts > 0 && (d.lastStatus === null || d.lastStatus >= 300));
            const state = !w.enabled ? 'disabled' : failing ? 'failing' : 'healthy';
            const delRow = (d) => h('tr', { 'data-delivery-id': d.id },
                h('td', {}, d.eventType),
                h('td', {}, d.jobId ? h('a', { href: `#/jobs/${encodeURIComponent(d.jobId)}`, class: 'mono' }, d.jobId) : '—'),
                h('td', {}, badge(d.status)),
                h('td', { class: 'num' }, String(d.attempts)),
                h('td', { class: 'num' }, d.lastStatus === null ? '—' : String(d.lastStatus)),
                h('td', {}, d.lastAttemptAt ? fmtDuration(Date.parse(d.lastAttemptAt) - Date.parse(d.createdAt)) : '—'),
                h('td', {}, d.lastError ?? ''),
                h('td', {}, d.status === 'pending' ? '' : h('button', {
                    type: 'button', class: 'small-btn', 'aria-label': `Redeliver ${d.eventType} of ${d.jobId ?? d.id}`,
                    onclick: () => act('Redeliver', async () => {
                        await api('POST', `/v1/deliveries/${encodeURIComponent(d.id)}:redeliver`, undefined, signal);
                        return `Delivery ${d.id} queued again.`;
                    }),
                }, 'Redeliver')));
            const head = ['Event', 'Job', 'Status', 'Attempts', 'HTTP', 'Time to last attempt', 'Last error', 'Action'];
            parts.push(h('section', { class: `hook hook-${state}`, 'aria-label': `Endpoint ${w.url ?? w.id}`, 'data-webhook-id': w.id },
                h('h2', {}, h('span', { class: 'mono' }, w.url ?? w.id), ' ', badge(state)),
                h('p', { class: 'small' }, `Events: ${(w.events ?? []).join(', ') || 'all'} · created ${fmtTime(w.createdAt)}`,
                    w.disabledAt ? ` · disabled ${fmtTime(w.disabledAt)}: ${w.disabledReason ?? ''}` : ''),
                h('div', { class: 'actions' },
                    h('button', { type: 'button', class: 'ghost', onclick: () => act('Rotate', async () => {
                        const r = await api('POST', `/v1/webhooks/${encodeURIComponent(w.id)}:rotate`, undefined, signal);
                        secret.replaceChildren(h('label', { for: 'new-secret' }, `New secret for ${w.url ?? w.id} (shown once)`),
                            h('input', { id: 'new-secret', readonly: true, class: 'mono', value: r.secret }));
                        secret.hidden = false;
                        return 'Secret rotated; the previous one keeps working for its grace period.';
                    }) }, 'Rotate secret'),
                    w.enabled ? null : h('button', { type: 'button', onclick: () => act('Enable', async () => {
                        await api('POST', `/v1/webhooks/${encodeURIComponent(w.id)}:enable`, undefined, signal);
                        return 'Endpoint enabled.';
                    }) }, 'Enable')),
                table(`Recent deliveries to ${w.url ?? w.id}`, head, recent.items.map(delRow), { empty: 'No deliveries yet.' }),
                table(`Dead letters of ${w.url ?? w.id}`, head, dead.items.map(delRow), { empty: 'No dead letters.', cls: 'dead' })));
        }
        body.replaceChildren(...parts);
    };
    await every(3000, refresh, signal);
}

// ---- start ----

function start() {
    applyTheme();
    matchMedia('(prefers-color-scheme: dark)').addEventListener('change', applyTheme);
    $('theme').addEventListener('click', () => {
        const dark = document.documentElement.dataset.theme === 'dark';
        localStorage.setItem(THEME, dark ? 'light' : 'dark');
        applyTheme();
    });
    $('signout').addEventListener('click', () => signOut('Signed out.'));
    $('signin-form').addEventListener('submit', async (e) => {
        e.preventDefault();
        const key = $('key').value.trim();
        if (!key) return;
        const err = await signIn(key);
        $('key').value = '';
        if (err) {
            $('signin-error').textContent = err;
            return;
        }
        signOutNote = '';
        if (!location.hash || location.hash === '#') location.hash = '#/overview';
        else route();
    });
    window.addEventListener('hashchange', route);
    fetch('/healthz', { credentials: 'omit', cache: 'no-store' }).then((r) => r.json()).catch(() => ({})).then((hz) => {
        keyless = hz.auth === 'none';
        traceViewer = /^https?:\/\//.test(hz.traceViewer ?? '') ? hz.traceViewer : null;
        if (keyless) {
            $('who').textContent = 'no API keys configured: open to loopback clients, as tenant default';
            route();
        } else {
            resume();
        }
    });
}

/** Sign in again with the key this tab kept, or ask for one. */
function resume() {
    if (sessionStorage.getItem(KEY) !== null) {
        signIn(sessionStorage.getItem(KEY)).then((err) => {
            if (err) signOut(err);
            else route();
        });
    } else {
        route();
    }
}

start();
