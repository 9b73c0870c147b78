"""Errors of the acceptd client: every refusal the daemon answers is an RFC 9457 problem, raised as a
ProblemError carrying its members, so callers match on `code` (the stable machine name) rather than on text.
Transport failures stay the standard library's own (OSError and its subclasses)."""

from __future__ import annotations

import json
from typing import Any, Mapping


class AcceptdError(Exception):
    """Base class of the errors this library raises itself."""


class ProblemError(AcceptdError):
    """An answer that was an RFC 9457 problem (or any non-2xx answer, read as one as far as it goes)."""

    def __init__(self, status: int, problem: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        self.status: int = status
        self.problem: dict[str, Any] = dict(problem)
        self.type: str = str(problem.get("type") or "about:blank")
        self.code: str = str(problem.get("code") or self.type.rsplit("/", 1)[-1])
        self.title: str = str(problem.get("title") or "")
        self.detail: str = str(problem.get("detail") or "")
        self.instance: str | None = problem.get("instance")
        self.errors: list[dict[str, Any]] = list(problem.get("errors") or [])
        self.headers: dict[str, str] = {k.lower(): v for k, v in (headers or {}).items()}
        super().__init__(f"{status} {self.code}: {self.detail or self.title}")

    @property
    def retry_after(self) -> float | None:
        """The answer's Retry-After in seconds, when it had one."""
        return parse_retry_after(self.headers.get("retry-after"))

    @classmethod
    def from_answer(cls, status: int, headers: Mapping[str, str], body: bytes) -> "ProblemError":
        doc: Any = None
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            doc = {"title": body[:200].decode("utf-8", "replace") if body else "", "status": status}
        return cls(status, doc, headers)


class JobTimeout(AcceptdError, TimeoutError):
    """Job.wait() ran out of time before the job ended; `job` is the job as last seen."""

    def __init__(self, job: Any) -> None:
        self.job = job
        super().__init__(f"job {job.id} still {job.status} when the wait ran out")


class DigestMismatch(AcceptdError):
    """A downloaded artifact's bytes do not match the Repr-Digest the daemon announced."""


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After field (acceptd sends delta-seconds; an HTTP-date is not used by it)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        return None
