// Every JSON the daemon writes is UTF-8 (RFC 8259 §8.1), whatever bytes the request carried: text that is
// not UTF-8 reads back with U+FFFD in `detail`, and `instance` is the request target percent-encoded where
// a byte may not stand in a URI. Each answer is decoded with a strict decoder before it is parsed.

import { describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { it, rawRequest, startDaemon, standardConfig, tenant } from './lib/daemon.mjs';
import { assertProblem, submit } from './lib/jobs.mjs';

const strict = new TextDecoder('utf-8', { fatal: true });

/**
 * Send method and target (a latin1 string: each char one byte, so '\xff' is the byte 0xff) on a raw socket.
 * Resolves {status, headers, json, path}; json comes from the body bytes through the strict decoder, and the
 * test fails when they are not UTF-8 or not JSON.
 */
async function rawGet(d, key, target, method = 'GET') {
    const head = `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`;
    const res = await rawRequest(d, Buffer.from(head, 'latin1'));
    const bytes = Buffer.from(res.raw, 'latin1');
    const body = bytes.subarray(bytes.indexOf('\r\n\r\n') + 4);
    const show = `${method} ${JSON.stringify(target)} -> ${res.status} ${body.toString('latin1').slice(0, 400)}`;
    assert.ok(res.complete, `no complete answer: ${show}`);
    let text;
    try {
        text = strict.decode(body);
    } catch (e) {
        assert.fail(`the answer is not UTF-8 (${e.message}): ${show}`);
    }
    let json;
    try {
        json = JSON.parse(text);
    } catch (e) {
        assert.fail(`the answer is not JSON (${e.message}): ${show}`);
    }
    return { status: res.status, headers: res.headers, json, text: show };
}

describe('UTF-8 in answers', () => {
    let d;
    before(async () => {
        d = await startDaemon({ config: standardConfig() });
    });
    after(() => d?.stop());

    it('?status=%ff: the detail has U+FFFD for the byte, the instance is the target as sent', async () => {
        const { keys } = tenant(d);
        const res = await rawGet(d, keys.c, '/v1/jobs?status=%ff');
        const p = assertProblem(res, 400, 'invalid-request', { instance: '/v1/jobs?status=%ff' });
        assert.equal(p.detail, 'unknown status \uFFFD', res.text);
        assert.equal(p.instance, '/v1/jobs?status=%ff', res.text);
    });

    it('/v1/events?status=%ff: 400 with a problem before any stream starts', async () => {
        const { keys } = tenant(d);
        for (const target of ['/v1/events?status=%ff', '/v1/events?status=%FF&type=report.export']) {
            const res = await rawGet(d, keys.c, target);
            assert.match(res.headers['content-type'] ?? '', /^application\/problem\+json/, res.text);
            const p = assertProblem(res, 400, 'invalid-request', { instance: target });
            assert.equal(p.detail, 'unknown status \uFFFD', res.text);
        }
    });

    it('raw bytes 0xff 0xfe in the path: a 404 whose instance is percent-encoded', async () => {
        const { keys } = tenant(d);
        const res = await rawGet(d, keys.c, '/v1/jobs/\xff\xfe');
        const p = assertProblem(res, 404, 'not-found', { instance: '/v1/jobs/%FF%FE' });
        assert.equal(p.instance, '/v1/jobs/%FF%FE', res.text);
        assert.ok(p.instance.length > 0 && /^[\x21-\x7e]+$/.test(p.instance), res.text);
    });

    it('raw bytes elsewhere: after a job id, on a route of the config, in a query value, on a 405', async () => {
        const { c, keys } = tenant(d);
        const id = (await submit(c)).json.id;
        const cases = [
            [`/v1/jobs/${id}\xff`, 404, 'not-found', `/v1/jobs/${id}%FF`],
            ['/v1/videos\xc0\xaf', 404, 'not-found', '/v1/videos%C0%AF'],
            ['/v1/jobs?status=\xff\xfe', 400, 'invalid-request', '/v1/jobs?status=%FF%FE'],
            ['/v1/jobs?status="<\\^`{|}>', 400, 'invalid-request', '/v1/jobs?status=%22%3C%5C%5E%60%7B%7C%7D%3E'],
        ];
        for (const [target, status, code, instance] of cases) {
            const res = await rawGet(d, keys.c, target);
            const p = assertProblem(res, status, code, { instance });
            assert.equal(p.instance, instance, res.text);
        }
        const res = await rawGet(d, keys.c, `/v1/jobs/${id}?x=\xe2\x82`, 'PUT');
        const p = assertProblem(res, 405, 'method-not-allowed', { instance: `/v1/jobs/${id}?x=%E2%82` });
        assert.equal(p.instance, `/v1/jobs/${id}?x=%E2%82`, res.text);
    });

    it('each ill-formed sequence is one U+FFFD, well-formed UTF-8 is kept', async () => {
        const { keys } = tenant(d);
        const cases = [
            ['%c0%af', '\uFFFD\uFFFD'], // overlong '/'
            ['%e0%80%af', '\uFFFD\uFFFD\uFFFD'], // overlong, three bytes
            ['%ed%a0%80', '\uFFFD\uFFFD\uFFFD'], // a surrogate, U+D800
            ['%f4%90%80%80', '\uFFFD\uFFFD\uFFFD\uFFFD'], // past U+10FFFF
            ['%e2%82', '\uFFFD'], // truncated at the end
            ['%e2%82x', '\uFFFDx'], // truncated before ASCII
            ['%f0%9f%98%c3%a9', '\uFFFD\u00e9'], // cut by a new sequence, which is kept
            ['caf%C3%A9%20%E2%82%AC%20%F0%9F%98%80', 'caf\u00e9 \u20ac \u{1F600}'], // all well-formed
        ];
        for (const [q, want] of cases) {
            const res = await rawGet(d, keys.c, `/v1/jobs?status=${q}`);
            const p = assertProblem(res, 400, 'invalid-request', { instance: `/v1/jobs?status=${q}` });
            assert.equal(p.detail, `unknown status ${want}`, res.text);
            // The same bytes through a lenient decoder give the same text.
            const bytes = Buffer.from(q.replace(/%([0-9a-f]{2})/gi, (_, h) => String.fromCharCode(parseInt(h, 16))), 'latin1');
            assert.equal(`unknown status ${new TextDecoder().decode(bytes)}`, p.detail, res.text);
        }
    });
});
