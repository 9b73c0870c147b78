#!/usr/bin/env python3
"""A receiver of acceptd's webhooks in Python, on the acceptd library (clients/python): it checks both
signatures every delivery carries (docs/webhooks.md, "Headers and signatures") with verify_webhook and
answers 204 only when both hold.

    WEBHOOK_SECRET=whsec_... PORT=9000 python3 examples/python/webhook_receiver.py

- webhook-signature (Standard Webhooks): HMAC-SHA256 keyed with the base64-decoded part of the secret after
  `whsec_`, over `<webhook-id>.<webhook-timestamp>.<body>`, as `v1,<base64>`;
- X-Webhook-Signature (Stripe style): HMAC-SHA256 keyed with the whole secret string, over `<t>.<body>`, as
  `t=<unix seconds>,v1=<hex>`.

During a secret rotation a header holds several v1 values; one match is enough. Signatures are compared in
constant time (hmac.compare_digest) over the raw body bytes, and a timestamp more than five minutes away is
refused, which bounds replays (verify_webhook does all of this). A refused delivery gets 400 and is retried
by acceptd.

Prints `listening on URL`, then one line per request: `accepted EVENT_ID TYPE JOB_URL` or `rejected: REASON`.
A real receiver would deduplicate on webhook-id (delivery is at least once).
"""

import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The library from the checkout when it is not installed (pip install ./clients/python).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from acceptd import WebhookVerificationError, verify_webhook  # noqa: E402

SECRET = os.environ.get("WEBHOOK_SECRET", "")
HOST = os.environ.get("HOST", "127.0.0.1")
PORT = int(os.environ.get("PORT", "0"))
TOLERANCE_S = 5 * 60
MAX_BODY = 1 << 20


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413, "body too large")
        body = self.rfile.read(length)
        try:
            event = verify_webhook(dict(self.headers.items()), body, SECRET, tolerance_seconds=TOLERANCE_S)
        except (WebhookVerificationError, ValueError) as e:  # ValueError: a signed body that is not JSON
            print(f"rejected: {e}", flush=True)
            return self.answer(400, str(e))
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
