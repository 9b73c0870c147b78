"""verify_webhook on real deliveries: the daemon calls a job's callbackUrl, signed both ways with the
tenant's callback secret; both signatures verify, a tampered body, a wrong secret and a stale timestamp are
refused, and during a rotation either secret verifies."""

from __future__ import annotations

import json
import threading
import unittest

from acceptd import Client, WebhookVerificationError, verify_webhook
from acceptd._http import Transport

from .harness import Daemon, Receiver

d: Daemon
WEBHOOKS = """webhooks:
  allowNetworks: ["127.0.0.0/8", "::1/128"]
  retrySchedule: ["0", "300ms", "300ms", "300ms"]
  timeoutSeconds: 5
"""


def setUpModule() -> None:
    global d
    d = Daemon(WEBHOOKS).start()


def tearDownModule() -> None:
    d.stop()


def complete_one(url: str, wkey: str) -> None:
    t = Transport(url, wkey)
    lease = t.request("POST", "/v1/leases", body={"types": ["report.export"], "wait": 5}).json()["leases"][0]
    t.request("POST", f"/v1/jobs/{lease['job']['id']}:complete", body={"leaseId": lease["leaseId"], "result": 1})
    t.close()


class WebhookTest(unittest.TestCase):
    def test_both_signatures_of_a_real_delivery(self) -> None:
        ck, wk, _ = d.tenant()
        rec = Receiver()
        self.addCleanup(rec.close)
        c = Client(d.url, ck)
        self.addCleanup(c.close)
        secret = c.transport.request("POST", "/v1/webhooks/callback:rotate").json()["secret"]
        job = c.submit("report.export", {}, callback_url=rec.url)
        threading.Thread(target=complete_one, args=(d.url, wk)).start()
        rec.wait_for(lambda ds: len(ds) >= 1)
        headers, body = rec.deliveries[0]
        event = verify_webhook(headers, body, secret)
        self.assertEqual(event["type"], "job.succeeded")
        self.assertTrue(event["data"]["job"].endswith(f"/v1/jobs/{job.id}"))
        ts = int(headers["webhook-timestamp"])
        # Each scheme alone, and each one refused for what it checks.
        verify_webhook({k: v for k, v in headers.items() if k.lower() != "x-webhook-signature"}, body, secret,
                       scheme="standard")
        verify_webhook({k: v for k, v in headers.items() if k.lower() != "webhook-signature"}, body, secret,
                       scheme="stripe")
        tampered = body.replace(b"job.succeeded", b"job.failed")
        self.assertNotEqual(tampered, body)
        for scheme in ("both", "standard", "stripe"):
            with self.assertRaises(WebhookVerificationError, msg=scheme):
                verify_webhook(headers, tampered, secret, scheme=scheme)
            with self.assertRaises(WebhookVerificationError, msg=scheme):
                verify_webhook(headers, body, "whsec_" + "QUJD" * 11, scheme=scheme)
            with self.assertRaises(WebhookVerificationError, msg=scheme):
                verify_webhook(headers, body, secret, scheme=scheme, now=ts + 301)
            verify_webhook(headers, body, secret, scheme=scheme, now=ts + 299)
            with self.assertRaises(WebhookVerificationError, msg=scheme):
                verify_webhook(headers, body, secret, scheme=scheme, tolerance_seconds=10, now=ts - 11)
        # A header missing is refused by the check that needs it.
        with self.assertRaises(WebhookVerificationError):
            verify_webhook({k: v for k, v in headers.items() if k.lower() != "webhook-signature"}, body, secret)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook({k: v for k, v in headers.items() if k.lower() != "x-webhook-signature"}, body, secret)

        # Rotate: the next delivery carries a signature of each secret, and either one verifies it.
        new = c.transport.request("POST", "/v1/webhooks/callback:rotate").json()["secret"]
        self.assertNotEqual(new, secret)
        c.submit("report.export", {}, callback_url=rec.url)
        threading.Thread(target=complete_one, args=(d.url, wk)).start()
        rec.wait_for(lambda ds: len(ds) >= 2)
        headers2, body2 = rec.deliveries[1]
        self.assertEqual(len(headers2["webhook-signature"].split(" ")), 2, headers2)
        for s in (new, secret, [new, secret], ["whsec_" + "QUJD" * 11, secret]):
            self.assertEqual(verify_webhook(headers2, body2, s)["type"], "job.succeeded")
        self.assertEqual(json.loads(body2)["id"], headers2["webhook-id"])
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(headers2, body2 + b" ", [new, secret])


if __name__ == "__main__":
    unittest.main()
