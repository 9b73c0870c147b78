#!/usr/bin/env python3
"""A receiver of acceptd's webhooks in Python, standard library only: it checks both signatures every
delivery carries (docs/webhooks.md, "Headers and signatures") and answers 204 only when both hold.

    WEBHOOK_SECRET=whsec_... PORT=9000 python3 examples/python/webhook_receiver.py

- webhook-signature (Standard Webhooks): HMAC-SHA256 keyed with the base64-decoded part of the secret after
  `whsec_`, over `<webhook-id>.<webhook-timestamp>.<body>`, as `v1,<base64>`;
- X-Webhook-Signature (Stripe style): HMAC-SHA256 keyed with the whole secret string, over `<t>.<body>`, as
  `t=<unix seconds>,v1=<hex>`.

During a secret rotation a header holds several v1 values; one match is enough. Signatures are compared in
constant time (hmac.compare_digest) over the raw body bytes, and a timestamp more than five minutes away is
refused, which bounds replays. A refused delivery gets 400 and is retried by acceptd.

Prints `listening on URL`, then one line per request: `accepted EVENT_ID TYPE JOB_URL` or `rejected: REASON`.
A real receiver would deduplicate on webhook-id (delivery is at least once).
"""

import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ.get("WEBHOOK_SECRET", "")
HOST = os.environ.get("HOST", "127.0.0.1")
PORT = int(os.environ.get("PORT", "0"))
TOLERANCE_S = 5 * 60
MAX_BODY = 1 << 20


def fresh(ts):
    return ts is not None and ts.isdigit() and abs(time.time() - int(ts)) <= TOLERANCE_S


def check_standard(h, body):
    """Standard Webhooks 1.0: None when it verifies, else why not."""
    msg_id, ts, sig = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not (msg_id and ts and sig):
        return "webhook-id, webhook-timestamp or webhook-signature missing"
    if not fresh(ts):
        return "webhook-timestamp too far from now"
    key = base64.b64decode(SECRET[len("whsec_"):])
    expected = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
    for s in sig.split(" "):
        version, _, value = s.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return None
    return "webhook-signature does not match"


def check_stripe_style(h, body):
    """The Stripe-style X-Webhook-Signature: None when it verifies, else why not."""
    header = h.get("X-Webhook-Signature")
    if not header:
        return "X-Webhook-Signature missing"
    pairs = [p.partition("=")[::2] for p in header.split(",")]
    t = next((v for k, v in pairs if k == "t"), None)
    if not fresh(t):
        return "X-Webhook-Signature: t missing or too far from now"
    expected = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    if any(k == "v1" and hmac.compare_digest(v, expected) for k, v in pairs):
        return None
    return "X-Webhook-Signature does not match"


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413, "body too large")
        body = self.rfile.read(length)
        why = check_standard(self.headers, body) or check_stripe_style(self.headers, body)
        if why:
            print(f"rejected: {why}", flush=True)
            return self.answer(400, why)
        event = json.loads(body)  # only now is the body trusted enough to parse
        print(f"accepted {event['id']} {event['type']} {event.get('data', {}).get('job', '')}", flush=True)
        self.send_response(204)
        self.end_headers()

    def answer(self, status, text):
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass  # one line per request is printed above


def main():
    if not SECRET.startswith("whsec_"):
        print("webhook_receiver: set WEBHOOK_SECRET to the endpoint secret (whsec_...)", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer((HOST, PORT), Receiver)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"listening on http://{HOST}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
