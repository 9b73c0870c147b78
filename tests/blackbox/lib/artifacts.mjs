// Result artifacts (tests/blackbox/artifacts.test.mjs and cluster/artifacts.test.mjs): the daemon's
// configuration for them, deterministic bytes and their digests, and uploads in parts through a binary request.

import { createHash } from 'node:crypto';
import assert from 'node:assert/strict';
import { standardConfig } from './daemon.mjs';
import * as openapi from './openapi.mjs';
import { expectStatus, hget, show } from './jobs.mjs';

export const KiB = 1024;

export const MiB = 1024 * KiB;

export const PART_CAP = 1 * MiB; // limits.maxUploadPartBytes of the main daemon

// One type per test that lets a lease run out, so that a requeued job is never leased by another test.
export const TYPES = ['art.basic', 'art.range', 'art.errors', 'art.stale', 'art.signed', 'art.tenant', 'art.cut', 'art.resume', 'art.cap', 'art.kill', 'art.big', 'art.full', 'art.cluster'];

// The artifacts section of the config. ARTIFACTS-SPEC.md names artifacts.gcSeconds and artifacts.urlSeconds;
// the daemon has artifacts.gcInterval and artifacts.urlLifetime (durations).
export const artifactsConf = ({ gc, url }) => `{ gcInterval: ${gc}s${url ? `, urlLifetime: ${url}s` : ''} }`;

export function config({ limits, artifacts }) {
    const types = '\n  video.transcode: {}\n  report.export: {}' + TYPES.map((t) => `\n  ${t}: { maxAttempts: 5 }`).join('') + '\n  art.short: { retention: { succeeded: 2s, failed: 2s, cancelled: 2s, partialSuccess: 2s } }';
    return standardConfig({ types, tombstone: '60s', limits }) + `artifacts: ${artifacts}\n`;
}

export const sha256hex = (b) => createHash('sha256').update(b).digest('hex');

export const digestOf = (b) => `sha-256=:${createHash('sha256').update(b).digest('base64')}:`;

/** Deterministic bytes: a xorshift32 stream from seed. */
export function patterned(n, seed = 1) {
    const out = Buffer.allocUnsafe(n + 3);
    let x = seed >>> 0 || 1;
    for (let i = 0; i < n; i += 4) {
        x ^= x << 13;
        x >>>= 0;
        x ^= x >>> 17;
        x ^= x << 5;
        x >>>= 0;
        out.writeUInt32LE(x, i);
    }
    return out.subarray(0, n);
}

/**
 * One request with a binary body and a binary answer, checked against docs/openapi.json like api() does.
 * Returns {status, headers, buf, text, json, method, path}.
 */
export async function bin(d, key, method, p, { body, headers = {}, timeoutMs = 60_000 } = {}) {
    const h = {};
    if (key) h.authorization = `Bearer ${key}`;
    for (const [k, v] of Object.entries(headers)) if (v !== null && v !== undefined) h[k.toLowerCase()] = String(v);
    const res = await fetch(d.url + p, { method, headers: h, body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
    const buf = Buffer.from(await res.arrayBuffer());
    const text = buf.toString('latin1');
    const violation = openapi.check({ method, target: p, status: res.status, headers: res.headers, text });
    if (violation) throw new Error(violation);
    let json = null;
    if (/json/i.test(res.headers.get('content-type') ?? '') && buf.length > 0) {
        try {
            json = JSON.parse(buf.toString('utf8'));
        } catch {
            json = null;
        }
    }
    // Failure messages show text: an artifact's bytes only by their size.
    const printable = /json|^text\//i.test(res.headers.get('content-type') ?? '');
    return { status: res.status, headers: res.headers, buf, text: printable ? buf.toString('utf8') : `<${buf.length} bytes>`, json, method, path: p };
}

/** PUT one part. offset null: no Upload-Offset (a fresh start). */
export function putPart(d, key, id, leaseId, bytes, { offset = null, last = true, contentType, headers = {} } = {}) {
    return bin(d, key, 'PUT', `/v1/jobs/${id}/result`, {
        body: bytes,
        headers: {
            'lease-id': leaseId,
            'content-type': contentType ?? 'application/octet-stream',
            'upload-offset': offset,
            'upload-complete': last ? '?1' : '?0',
            'content-digest': digestOf(bytes),
            ...headers,
        },
    });
}

/** Upload data in parts of partSize; asserts every answer. Returns the last (200) answer. */
export async function upload(d, key, id, leaseId, data, { partSize = PART_CAP, contentType = 'application/octet-stream', from = 0 } = {}) {
    let last;
    for (let off = from; off < data.length || (off === 0 && data.length === 0); off += partSize) {
        const end = Math.min(off + partSize, data.length);
        const isLast = end === data.length;
        const res = await putPart(d, key, id, leaseId, data.subarray(off, end), {
            offset: off === 0 ? null : off,
            last: isLast,
            contentType: off === 0 ? contentType : 'application/octet-stream',
            headers: isLast ? { 'repr-digest': digestOf(data) } : {},
        });
        if (!isLast) {
            expectStatus(res, 204);
            assert.equal(hget(res, 'upload-offset'), String(end), show(res));
        } else {
            last = expectStatus(res, 200);
        }
        if (isLast) break;
    }
    return last;
}

/** Stop d and check that it exited cleanly, with no sanitizer report (under ACCEPTD_SANITIZED). */
export async function stopClean(d) {
    const { code, signal } = await d.stop();
    assert.equal(signal, null, `acceptd died of ${signal}`);
    assert.equal(code, 0, `acceptd exited with ${code}:\n${d.stderr.slice(-4000)}`);
    assert.ok(!/Sanitizer|runtime error:/.test(d.stderr), d.stderr.slice(-4000));
}
