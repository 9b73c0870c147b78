"""The client side of acceptd: submit jobs, follow them to their end, read their results.

A Job is a handle on one job, holding its last representation and ETag. Job.wait() follows the job's
Server-Sent Events (GET /v1/jobs/{id}/events), resuming with Last-Event-ID after a dropped connection; when
the stream is refused (a proxy that does not pass event streams answers 5xx, 405, ...) it polls instead,
sleeping what Retry-After says between requests and sending If-None-Match, so that an unchanged job costs a
304. result() answers the JSON result, or the artifact as a stream whose SHA-256 is checked against the
daemon's Repr-Digest as it is read; a download that breaks is resumed with a Range request (If-Range: its
ETag) from the byte where it broke.

Blocking calls on threads, not asyncio: the standard library has no asyncio HTTP client, http.client is
what urllib itself uses, and the calls of one Client may be made from any number of threads. Batches and
schedules are in batches.py."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import time
import urllib.parse
import uuid
from typing import Any, Callable, Iterator, Mapping

from ._follow import MAX_RETRY_AFTER, Followed, _events
from ._http import Response, Transport
from .batches import Batch, Schedules
from .errors import DigestMismatch, ProblemError, parse_retry_after

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "partialSuccess"})
_SUBMIT_RETRIES = 4


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _quote(seg: str) -> str:
    return urllib.parse.quote(seg, safe="")


class Job(Followed):
    """One job: `data` is its representation as last read, `etag` the tag of it."""

    def __init__(self, client: "Client", data: Mapping[str, Any], etag: str | None = None) -> None:
        self.client = client
        self.data: dict[str, Any] = dict(data)
        self.etag = etag
        self.retry_after: float | None = None

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.status}>"

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def status(self) -> str:
        return str(self.data.get("status", ""))

    @property
    def progress(self) -> int | None:
        p = self.data.get("progress")
        return int(p) if p is not None else None

    @property
    def message(self) -> str | None:
        return self.data.get("message")

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def path(self) -> str:
        return f"/v1/jobs/{_quote(self.id)}"

    def _take(self, res: Response) -> None:
        if res.status == 200:
            self.data = res.json()
            self.etag = res.headers.get("etag", self.etag)
        self.retry_after = parse_retry_after(res.headers.get("retry-after"))

    def refresh(self) -> bool:
        """Read the job again (If-None-Match: an unchanged job costs a 304). True when it changed."""
        h = {"If-None-Match": self.etag} if self.etag else {}
        res = self.client.transport.request("GET", self.path, headers=h)
        before = self.etag
        self._take(res)
        return res.status == 200 and self.etag != before

    def wait(self, timeout: float | None = None, on_progress: Callable[["Job"], None] | None = None,
             events: bool = True) -> "Job":
        """Block until the job ends and return it (self, updated). on_progress(job) is called on each
        change of status, progress or message seen on the way. Raises JobTimeout after timeout seconds.
        events=False polls from the start."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.done and events:
            if self._follow(deadline, on_progress):
                return self
        self._poll(deadline, on_progress)
        return self

    def _reread(self) -> None:
        self.refresh()

    def _apply(self, event: str, doc: Any, on_progress: Callable[[Any], None] | None) -> bool:
        if event == "done":
            self.data = doc
            self.etag = None  # the stream carries no ETag; the next refresh sets it
            if on_progress:
                on_progress(self)
            return True
        if event in ("status", "progress"):
            changed = any(self.data.get(k) != doc.get(k) for k in ("status", "progress", "message"))
            self.data.update({k: doc[k] for k in ("status", "progress", "message", "lastUpdatedAt") if k in doc})
            if changed and on_progress:
                on_progress(self)
        return False

    def _seen(self) -> tuple[Any, ...]:
        return (self.status, self.progress, self.message)

    def events(self, last_event_id: str | None = None) -> Iterator[tuple[str | None, str, Any]]:
        """The job's event stream as (id, event, data) with data parsed: `status` and `progress` events, then
        `done` with the whole job, after which it ends. last_event_id resumes after that event (nothing
        when the job ended there). Leaving the loop early closes the connection. No reconnecting: wait()
        does that."""
        h = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            h["Last-Event-ID"] = last_event_id
        conn, res = self.client.transport.stream("GET", self.path + "/events", headers=h)
        try:
            if res.status == 204:
                return
            for ev_id, event, data in _events(conn, res, None):
                doc = json.loads(data)
                if event == "done":
                    self.data, self.etag = doc, None
                yield ev_id, event, doc
                if event == "done":
                    return
        finally:
            conn.close()

    def cancel(self) -> "Job":
        return self._become(self.client.transport.request("POST", self.path + ":cancel"))

    def retry(self) -> "Job":
        """A new job (retryOf = this one) for a failed or cancelled job."""
        res = self.client.transport.request("POST", self.path + ":retry")
        return Job(self.client, res.json(), res.headers.get("etag"))

    def _become(self, res: Response) -> "Job":
        self.data, self.etag = res.json(), res.headers.get("etag")
        return self

    def result(self) -> Any:
        """The job's result: its JSON document, or an Artifact (a stream to read, close it) when the worker
        uploaded a file. A failed job raises its stored problem, a cancelled one 409 job-cancelled, a pending
        one 404 result-not-ready: all ProblemError."""
        return self.client.result(self.id)


class Artifact:
    """A downloaded result artifact, read as a stream. Its SHA-256 is computed as it is read; reading to
    the end raises DigestMismatch when it is not the Repr-Digest the daemon sent. When the connection breaks
    before the last byte, the download goes on from there with Range: bytes=N- and If-Range: its ETag (up to
    RESUMES times, counted in resumed)."""

    RESUMES = 5

    def __init__(self, conn: http.client.HTTPConnection, res: http.client.HTTPResponse,
                 transport: Transport | None = None, path: str | None = None) -> None:
        self._conn, self._res = conn, res
        self._transport, self._path = transport, path
        self.content_type = res.getheader("Content-Type") or "application/octet-stream"
        self.size = int(res.getheader("Content-Length") or -1)
        self.digest = res.getheader("Repr-Digest") or ""
        self.etag = res.getheader("ETag")
        self.resumed = 0
        self._got = 0
        self._sha = hashlib.sha256()
        self._checked = False

    def read(self, n: int = -1) -> bytes:
        if n >= 0:
            return self._read_some(n)
        parts = []
        while chunk := self._read_some(1 << 20):
            parts.append(chunk)
        return b"".join(parts)

    def _read_some(self, n: int) -> bytes:
        while True:
            error: BaseException | None = None
            try:
                chunk = self._res.read(n)
            except (http.client.HTTPException, OSError) as e:  # IncompleteRead, a reset connection
                chunk, error = b"", e
            if chunk:
                self._got += len(chunk)
                self._sha.update(chunk)
                return chunk
            if 0 <= self._got < self.size:
                self._resume(error)
                continue
            if error is not None:
                raise error
            if not self._checked:
                self._checked = True
                got = "sha-256=:" + base64.b64encode(self._sha.digest()).decode() + ":"
                if self.digest and got != self.digest:
                    raise DigestMismatch(f"artifact digest {got} is not the announced {self.digest}")
            return b""

    def _resume(self, error: BaseException | None) -> None:
        """Go on from byte _got on a new connection, or raise why it cannot."""
        broke = error or http.client.IncompleteRead(b"", self.size - self._got)
        if self._transport is None or self._path is None or not self.etag or self.resumed >= self.RESUMES:
            raise broke
        self._conn.close()
        self.resumed += 1
        time.sleep(0.1 * self.resumed)
        conn, res = self._transport.stream("GET", self._path, {"Range": f"bytes={self._got}-",
                                                                "If-Range": self.etag})
        cr = res.getheader("Content-Range") or ""
        if res.status != 206 or not cr.startswith(f"bytes {self._got}-"):
            conn.close()
            raise ProblemError(res.status, {"title": f"cannot resume the artifact's download at byte {self._got}",
                                            "detail": f"HTTP {res.status} {cr}: {broke}"}) from broke
        self._conn, self._res = conn, res

    def __iter__(self) -> Iterator[bytes]:
        while True:
            chunk = self.read(1 << 20)
            if not chunk:
                return
            yield chunk

    def save(self, path: str) -> int:
        """Write the whole artifact to path; returns its size. The digest is checked before it returns."""
        n = 0
        with open(path, "wb") as f:
            for chunk in self:
                f.write(chunk)
                n += len(chunk)
        return n

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Artifact":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """A client of one acceptd daemon with one key (None for a keyless loopback daemon)."""

    def __init__(self, url: str, key: str | None = None, *, timeout: float = 60.0) -> None:
        self.transport = Transport(url, key, timeout)
        self.schedules = Schedules(self)  # /v1/schedules: create, get, list, update, delete, trigger

    def batch(self, batch_id: str) -> Batch:
        """A handle on a batch known by id (nothing is fetched)."""
        return Batch(self, {"id": batch_id})

    def submit_batch(self, jobs: "list[Mapping[str, Any]]", *, callback_url: str | None = None) -> Batch:
        """Submit up to 1,000 jobs as one batch (POST /v1/batches): all stored in one commit, or none (a 422
        whose errors point into /jobs/N). Each job is a submit body ({type, payload, ...} in camelCase);
        callback_url hears the batch's end."""
        body: dict[str, Any] = {"jobs": [dict(j) for j in jobs]}
        if callback_url is not None:
            body["callbackUrl"] = callback_url
        res = self.transport.request("POST", "/v1/batches", body=body)
        b = Batch(self, res.json(), res.headers.get("etag"))
        b.retry_after = parse_retry_after(res.headers.get("retry-after"))
        return b

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, type: str, payload: Mapping[str, Any] | None = None, *, idempotency_key: str | None = None,
               traceparent: str | None = None, tracestate: str | None = None, **options: Any) -> Job:
        """Submit a job (POST /v1/jobs) and return it once stored. options are the request's other members in
        snake_case (priority, callback_url, run_at, max_attempts, timeout_seconds, unique_key, group, ...).
        An Idempotency-Key is made when none is given, so that the submit is retried safely after a dropped
        connection, a 503 or a 429: one job, however many tries. traceparent and tracestate (the caller's W3C
        trace context) make the job continue that trace (docs/tracing.md)."""
        body: dict[str, Any] = {"type": type, "payload": dict(payload or {})}
        body.update({_camel(k): v for k, v in options.items() if v is not None})
        key = idempotency_key or f"py-{uuid.uuid4()}"
        h = {"Idempotency-Key": key}
        if traceparent:
            h["traceparent"] = traceparent
            if tracestate:
                h["tracestate"] = tracestate
        for attempt in range(_SUBMIT_RETRIES + 1):
            try:
                res = self.transport.request("POST", "/v1/jobs", body=body, headers=h)
            except ProblemError as e:
                if attempt == _SUBMIT_RETRIES or not (e.status in (429, 503) or e.code == "idempotency-key-in-flight"):
                    raise
                time.sleep(min(e.retry_after or 0.5 * (attempt + 1), MAX_RETRY_AFTER))
                continue
            except (OSError, http.client.HTTPException):
                if attempt == _SUBMIT_RETRIES:
                    raise
                time.sleep(0.2 * (attempt + 1))
                continue
            job = Job(self, res.json(), res.headers.get("etag"))
            job.retry_after = parse_retry_after(res.headers.get("retry-after"))
            return job
        raise AssertionError("unreachable")

    def get(self, job_id: str) -> Job:
        res = self.transport.request("GET", f"/v1/jobs/{_quote(job_id)}")
        job = Job(self, res.json(), res.headers.get("etag"))
        job.retry_after = parse_retry_after(res.headers.get("retry-after"))
        return job

    def list(self, *, status: str | None = None, type: str | None = None, updated_after: str | None = None,
             page_size: int | None = None) -> Iterator[Job]:
        """Every job of the tenant matching the filters, newest first, page after page (GET /v1/jobs)."""
        q = {k: v for k, v in (("status", status), ("type", type), ("updatedAfter", updated_after),
                               ("limit", page_size)) if v is not None}
        token: str | None = None
        while True:
            params = dict(q, **({"pageToken": token} if token else {}))
            res = self.transport.request("GET", "/v1/jobs" + ("?" + urllib.parse.urlencode(params) if params else ""))
            page = res.json()
            for item in page.get("items", []):
                yield Job(self, item)
            token = page.get("nextPageToken")
            if not token:
                return

    def cancel(self, job_id: str) -> Job:
        res = self.transport.request("POST", f"/v1/jobs/{_quote(job_id)}:cancel")
        return Job(self, res.json(), res.headers.get("etag"))

    def retry(self, job_id: str) -> Job:
        res = self.transport.request("POST", f"/v1/jobs/{_quote(job_id)}:retry")
        return Job(self, res.json(), res.headers.get("etag"))

    def result(self, job_id: str) -> Any:
        """As Job.result(). A result kept elsewhere by the worker (resultLocation) answers that URL."""
        path = f"/v1/jobs/{_quote(job_id)}/result"
        conn, res = self.transport.stream("GET", path)
        if res.getheader("Repr-Digest") is not None:
            return Artifact(conn, res, self.transport, path)
        try:
            body = res.read()
        finally:
            conn.close()
        if res.status == 303:
            return {"resultLocation": res.getheader("Location")}
        return json.loads(body) if body else None

