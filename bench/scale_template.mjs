// bench/scale_template.mjs - makes the template store of bench/scale.sh through the daemon's own API: COUNT jobs
// (default 5000) of three types in the mix of states a busy store holds, so that every row, event and attempt the
// scale bench copies was written by the daemon itself. Of every 1,000 jobs: 6 running (leased, 1 h lease), 50
// failed (leased, failed without retry), 40 cancelled (cancelled while queued), 60 queued (10 of them with a runAt
// a day away), the rest succeeded (leased, completed with a small result).
// Usage: node bench/scale_template.mjs URL [COUNT]   (prints one line: the counts by state)
const base = process.argv[2];
const count = Number(process.argv[3] || 5000);
const TYPES = ['email.send', 'video.transcode', 'report.export'];

function fate(n) {
    const m = n % 1000;
    if (m < 6) return 'running';
    if (m < 56) return 'failed';
    if (m < 96) return 'cancelled';
    if (m < 156) return 'queued';
    return 'succeeded';
}

async function call(method, path, body, status) {
    const res = await fetch(base + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== status) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : null;
}

function job(n) {
    const j = { type: TYPES[n % TYPES.length], payload: { n, to: `user${n}@example.com`, template: 'welcome' } };
    if (n % 1000 >= 96 && n % 1000 < 106) j.runAt = new Date(Date.now() + 86400e3).toISOString();
    return j;
}

async function submit(ns) {
    const ids = new Map();
    for (let i = 0; i < ns.length; i += 100) {
        const part = ns.slice(i, i + 100);
        const out = await call('POST', '/v1/jobs:batch', { jobs: part.map(job) }, 207);
        out.results.forEach((r, k) => {
            if (r.status !== 202) throw new Error(`batch: ${JSON.stringify(r).slice(0, 300)}`);
            ids.set(r.id, part[k]);
        });
    }
    return ids;
}

const all = Array.from({ length: count }, (_, n) => n);
// First the jobs that are leased; the queued and cancelled ones are submitted after, so no lease takes them.
const leasedIds = await submit(all.filter((n) => ['running', 'failed', 'succeeded'].includes(fate(n))));
const tally = { running: 0, failed: 0, cancelled: 0, queued: 0, succeeded: 0 };
for (;;) {
    const res = await fetch(base + '/v1/leases', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ types: TYPES, max: 100, leaseSeconds: 3600, worker: 'scale-template' }),
    });
    if (res.status === 204) break;
    if (res.status !== 200) throw new Error(`lease: ${res.status} ${await res.text()}`);
    const { leases } = await res.json();
    await Promise.all(
        leases.map((l) => {
            const n = leasedIds.get(l.job.id);
            const f = fate(n);
            tally[f]++;
            if (f === 'running') return null;
            if (f === 'failed')
                return call('POST', `/v1/jobs/${l.job.id}:fail`, {
                    leaseId: l.leaseId, retryable: false,
                    error: { type: 'about:blank', title: 'upstream refused', status: 502, detail: `attempt for ${n}` },
                }, 200);
            return call('POST', `/v1/jobs/${l.job.id}:complete`, {
                leaseId: l.leaseId, result: { ok: true, bytes: n * 17, location: `s3://bucket/out/${n}.bin` },
            }, 200);
        }),
    );
}
const rest = await submit(all.filter((n) => ['queued', 'cancelled'].includes(fate(n))));
for (const [id, n] of rest) {
    const f = fate(n);
    tally[f]++;
    if (f === 'cancelled') await call('POST', `/v1/jobs/${id}:cancel`, {}, 200);
}
console.log(Object.entries(tally).map(([k, v]) => `${k} ${v}`).join(', '));
