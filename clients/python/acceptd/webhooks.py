"""Checks of the signatures acceptd puts on every webhook delivery (docs/webhooks.md, "Headers and
signatures"). Both schemes are checked, on the raw body bytes, in constant time (hmac.compare_digest):

- webhook-signature (Standard Webhooks 1.0): HMAC-SHA256 keyed with the base64-decoded part of the secret
  after `whsec_`, over `<webhook-id>.<webhook-timestamp>.<body>`, sent as `v1,<base64>`;
- X-Webhook-Signature (Stripe style): HMAC-SHA256 keyed with the whole secret string, over `<t>.<body>`,
  sent as `t=<unix seconds>,v1=<hex>`.

During a rotation each header carries one v1 value per secret; one match is enough, and the caller may pass
several secrets. A timestamp further than tolerance_seconds from now is refused, which bounds replays."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any, Iterable, Mapping

from .errors import AcceptdError


class WebhookVerificationError(AcceptdError):
    """The delivery is not signed by any of the secrets, or is too old or too new."""


def _get(headers: Mapping[str, str], name: str) -> str | None:
    lname = name.lower()
    for k, v in headers.items():
        if k.lower() == lname:
            return v
    return None


def _fresh(ts: str | None, tolerance: float, now: float) -> int:
    if ts is None or not ts.isdigit():
        raise WebhookVerificationError("timestamp missing or not a number")
    t = int(ts)
    if abs(now - t) > tolerance:
        raise WebhookVerificationError(f"timestamp {t} is more than {tolerance:g}s from now")
    return t


def _check_standard(headers: Mapping[str, str], body: bytes, secrets: list[str], tolerance: float, now: float) -> None:
    msg_id, ts, sig = _get(headers, "webhook-id"), _get(headers, "webhook-timestamp"), _get(headers, "webhook-signature")
    if not (msg_id and ts and sig):
        raise WebhookVerificationError("webhook-id, webhook-timestamp or webhook-signature missing")
    _fresh(ts, tolerance, now)
    given = [v for ver, _, v in (s.partition(",") for s in sig.split(" ")) if ver == "v1"]
    for secret in secrets:
        if not secret.startswith("whsec_"):
            continue
        try:
            key = base64.b64decode(secret[6:], validate=True)
        except binascii.Error:
            continue
        expected = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
        if any(hmac.compare_digest(expected, g.encode()) for g in given):
            return
    raise WebhookVerificationError("webhook-signature does not match")


def _check_stripe(headers: Mapping[str, str], body: bytes, secrets: list[str], tolerance: float, now: float) -> None:
    header = _get(headers, "X-Webhook-Signature")
    if not header:
        raise WebhookVerificationError("X-Webhook-Signature missing")
    pairs = [(k.strip(), v.strip()) for k, _, v in (p.partition("=") for p in header.split(","))]
    ts = next((v for k, v in pairs if k == "t"), None)
    _fresh(ts, tolerance, now)
    given = [v for k, v in pairs if k == "v1"]
    for secret in secrets:
        expected = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest().encode()
        if any(hmac.compare_digest(expected, g.encode()) for g in given):
            return
    raise WebhookVerificationError("X-Webhook-Signature does not match")


def verify_webhook(headers: Mapping[str, str], body: bytes, secrets: str | Iterable[str], *,
                   tolerance_seconds: float = 300.0, scheme: str = "both", now: float | None = None) -> Any:
    """Check a delivery's signatures and answer its event (the parsed body), or raise
    WebhookVerificationError. scheme: "both" (default: each signature acceptd sends must verify),
    "standard" or "stripe" (only that one, for a proxy that drops the other header)."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    if not keys:
        raise ValueError("no secret to verify with")
    t = time.time() if now is None else now
    if scheme in ("both", "standard"):
        _check_standard(headers, body, keys, tolerance_seconds, t)
    if scheme in ("both", "stripe"):
        _check_stripe(headers, body, keys, tolerance_seconds, t)
    if scheme not in ("both", "standard", "stripe"):
        raise ValueError(f"unknown scheme {scheme!r}")
    return json.loads(body)
