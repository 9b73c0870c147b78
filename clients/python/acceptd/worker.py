"""The worker side of acceptd: lease jobs, run a handler on each, report the outcome.

Worker(url, key, types, handler, concurrency) runs `concurrency` slots, each a thread: a slot parks a lease
request (POST /v1/leases with `wait`, answered the moment a job comes), runs handler(ctx) on the job, and
reports the outcome with `next` in the same request, so that its next job comes back in the report's own
commit; all with Prefer: return=minimal, so leases carry only what a worker needs. While the handler runs,
a heartbeat thread extends the lease every third of its length and carries the progress the handler
reports; a heartbeat answering cancelRequested sets ctx.cancel_requested (a threading.Event) for the
handler to notice. The handler's return value is the result; an exception fails the attempt (retried while
attempts remain, unless it is a PermanentFailure); a handler that saw the cancel and stops (returns or
raises) gets the cancel acknowledged. ctx.upload_artifact() uploads a file as the result, in parts, and
resumes from the daemon's offset when a part's answer is lost. A traced job's lease carries its trace context
(docs/tracing.md): the handler sees it as ctx.traceparent and ctx.tracestate, and every call of the worker
about the job (heartbeats, uploads, the report) sends that traceparent, as `acceptd worker` does.

Threads, not asyncio: handlers are ordinary blocking code (files, subprocesses, HTTP), and a slot per thread
keeps one job's slowness from holding another's heartbeats."""

from __future__ import annotations

import base64
import hashlib
import http.client
import io
import os
import socket
import threading
import time
import traceback
from typing import IO, Any, Callable, Mapping, Sequence

from ._http import Transport
from .errors import ProblemError

PART_BYTES = 4 << 20  # limits.maxUploadPartBytes' default
_DONE = {":complete": "completed", ":fail": "failed", ":cancel": "cancel acknowledged", ":release": "released"}


def _b64sha(h: "hashlib._Hash") -> str:
    return "sha-256=:" + base64.b64encode(h.digest()).decode() + ":"


class PermanentFailure(Exception):
    """Raised by a handler: fail the job now, without the attempts that remain."""


class JobContext:
    """What a handler gets: the job (id, type, payload, attempt), cancel_requested, progress and uploads."""

    def __init__(self, worker: "Worker", lease: Mapping[str, Any]) -> None:
        self.worker = worker
        self.id: str = lease["id"]
        self.type: str = lease["type"]
        self.payload: Any = lease.get("payload")
        self.attempt: int = int(lease.get("attempt", 1))
        self.lease_id: str = lease["leaseId"]
        self.traceparent: str | None = lease.get("traceparent")
        self.tracestate: str | None = lease.get("tracestate")
        self.cancel_requested = threading.Event()
        self.lease_lost = threading.Event()
        self.artifact_uploaded = False
        self._progress: tuple[int | None, str | None] | None = None
        self._wake = threading.Event()
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return f"/v1/jobs/{self.id}"

    @property
    def trace_id(self) -> str | None:
        """The job's W3C trace id, when it is traced."""
        return self.traceparent.split("-")[1] if self.traceparent else None

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Headers for a call about this job: extra, and the lease's traceparent when the job is traced."""
        h = dict(extra or {})
        if self.traceparent:
            h["traceparent"] = self.traceparent
        return h

    def progress(self, percent: int | None, message: str | None = None) -> None:
        """Report progress (0-100) and a message; sent with the next heartbeat, which comes at once."""
        with self._lock:
            self._progress = (percent, message)
        self._wake.set()

    def heartbeat(self, percent: int | None = None, message: str | None = None) -> bool:
        """Send a heartbeat now, with progress and a message, and wait for its answer (the daemon writes one a
        second per lease: a faster caller waits). Answers whether a cancel was requested. progress() is the
        call that does not wait."""
        if percent is not None or message is not None:
            self.progress(percent, message)
        self._heartbeat()
        return self.cancel_requested.is_set()

    def _heartbeat(self) -> None:
        body: dict[str, Any] = {"leaseId": self.lease_id, "leaseSeconds": self.worker.lease_seconds}
        with self._lock:
            p, self._progress = self._progress, None
            if p is not None:
                if p[0] is not None:
                    body["progress"] = p[0]
                if p[1] is not None:
                    body["message"] = p[1]
            self._wake.clear()
        try:
            res = self.worker.transport.request("POST", self.path + ":heartbeat", body=body, headers=self.headers())
        except ProblemError as e:
            if e.code in ("stale-lease", "not-found", "gone", "illegal-transition"):
                self.lease_lost.set()
                self.cancel_requested.set()  # the work is no longer ours: stop it
            return
        except (OSError, http.client.HTTPException):
            return  # the next one may get through; the lease has room for two missed
        if (res.json() or {}).get("cancelRequested"):
            self.cancel_requested.set()

    def upload_artifact(self, source: bytes | str | IO[bytes], content_type: str = "application/octet-stream",
                        part_bytes: int = PART_BYTES) -> dict[str, Any]:
        """Upload the job's result file under this lease (PUT /v1/jobs/{id}/result, in parts) from bytes, a
        path, or a seekable binary file; the handler then returns None and the job completes with it. Each
        part carries its Content-Digest and the last the whole file's Repr-Digest. A part whose answer is
        lost is not sent again blindly: HEAD says where the daemon is, and the upload goes on from there."""
        if isinstance(source, bytes):
            f: IO[bytes] = io.BytesIO(source)
        elif isinstance(source, str):
            f = open(source, "rb")
        else:
            f = source
        try:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            whole = hashlib.sha256()
            offset = 0
            tries = 0
            while True:
                f.seek(offset)
                part = f.read(min(part_bytes, size - offset))
                last = offset + len(part) >= size
                h = {"Lease-Id": self.lease_id, "Content-Type": content_type,
                     "Upload-Complete": "?1" if last else "?0",
                     "Content-Digest": _b64sha(hashlib.sha256(part))}
                if offset > 0:
                    h["Upload-Offset"] = str(offset)
                if last:
                    done = whole.copy()
                    done.update(part)
                    h["Repr-Digest"] = _b64sha(done)
                try:
                    res = self.worker.transport.request("PUT", self.path + "/result", raw=part, headers=self.headers(h))
                except (ProblemError, OSError, http.client.HTTPException) as e:
                    if isinstance(e, ProblemError) and e.code != "upload-offset-mismatch":
                        raise
                    tries += 1
                    if tries > 5:
                        raise
                    at = self._upload_offset()
                    if at == offset + len(part):
                        whole.update(part)  # stored; only its answer was lost
                        offset = at
                        if last:
                            break
                    elif at != offset:
                        whole, offset = hashlib.sha256(), 0  # anywhere else: start afresh
                    continue
                tries = 0
                whole.update(part)
                offset += len(part)
                if last:
                    self.artifact_uploaded = True
                    return res.json()  # type: ignore[no-any-return]
            self.artifact_uploaded = True
            return {"size": size, "digest": _b64sha(whole), "contentType": content_type}
        finally:
            if f is not source:
                f.close()

    def _upload_offset(self) -> int:
        res = self.worker.transport.request("HEAD", self.path + "/result", headers=self.headers({"Lease-Id": self.lease_id}))
        return int(res.headers.get("upload-offset", "0"))


Handler = Callable[[JobContext], Any]


class Worker:
    """Leases jobs of `types` and runs handler(ctx) on each, `concurrency` at a time. run() blocks until
    stop() (or until `max_jobs` jobs are done); start() runs it on a thread of its own."""

    def __init__(self, url: str, key: str | None, types: Sequence[str], handler: Handler, concurrency: int = 1, *,
                 lease_seconds: float = 30.0, wait_seconds: float = 20.0, name: str | None = None,
                 timeout: float = 60.0, log: Callable[[str], None] | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.transport = Transport(url, key, timeout=max(timeout, wait_seconds + 10), pool_size=2 * concurrency + 2)
        self.types = list(types)
        self.handler = handler
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        self.name = name or f"{socket.gethostname()}/{os.getpid()}/python"
        self.log = log or (lambda line: None)  # one line per lease and report, for the caller's log
        self.errors: list[BaseException] = []  # what went wrong outside handlers (refused leases, ...)
        self.done = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._max_jobs: int | None = None

    def start(self, max_jobs: int | None = None) -> "Worker":
        self._thread = threading.Thread(target=self.run, args=(max_jobs,), name="acceptd-worker", daemon=True)
        self._thread.start()
        return self

    def stop(self, join: bool = True) -> None:
        """Stop leasing; jobs in hand finish first. A parked lease request ends within its wait."""
        self._stop.set()
        if join and self._thread is not None:
            self._thread.join()

    def run(self, max_jobs: int | None = None) -> None:
        self._max_jobs = max_jobs
        slots = [threading.Thread(target=self._slot, name=f"acceptd-slot-{i}", daemon=True)
                 for i in range(self.concurrency)]
        for t in slots:
            t.start()
        for t in slots:
            t.join()
        self.transport.close()

    def _lease_body(self) -> dict[str, Any]:
        return {"types": self.types, "max": 1, "leaseSeconds": self.lease_seconds, "worker": self.name}

    def _more(self) -> bool:
        with self._lock:
            return not self._stop.is_set() and (self._max_jobs is None or self.done < self._max_jobs)

    def _slot(self) -> None:
        pending: list[dict[str, Any]] = []
        while self._more() or pending:
            if not pending:
                try:
                    res = self.transport.request("POST", "/v1/leases", body=dict(self._lease_body(),
                                                 wait=self.wait_seconds), headers={"Prefer": "return=minimal"})
                except (ProblemError, OSError, http.client.HTTPException) as e:
                    self.log(f"lease request failed: {e}")
                    self.errors.append(e)
                    self._stop.wait(1.0)
                    continue
                if res.status == 204:
                    continue
                pending = list(res.json()["leases"])
                continue
            lease = pending.pop(0)
            if not self._more():
                self._report(lease["id"], ":release", {"leaseId": lease["leaseId"]}, False, lease.get("traceparent"))
                continue
            pending.extend(self._run(lease))

    def _run(self, lease: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run one job to its report; answers the next leases the report brought."""
        ctx = JobContext(self, lease)
        self.log(f"leased {ctx.id} (attempt {ctx.attempt})")
        beating = threading.Event()
        hb = threading.Thread(target=self._beat, args=(ctx, beating), name=f"acceptd-hb-{ctx.id}", daemon=True)
        hb.start()
        result: Any = None
        error: BaseException | None = None
        try:
            result = self.handler(ctx)
        except BaseException as e:  # noqa: B902 - a handler's crash is the job's failure, whatever it is
            error = e
        finally:
            beating.set()
            ctx._wake.set()
            hb.join()
        with self._lock:
            self.done += 1
        if ctx.lease_lost.is_set():
            return []  # another worker has it, or it ended: nothing of ours to report
        if ctx.cancel_requested.is_set():
            return self._report(ctx.id, ":cancel", {"leaseId": ctx.lease_id}, False, ctx.traceparent)
        if error is not None:
            problem = {"type": "https://acceptd.dev/problems/handler-error", "title": "The handler raised",
                       "status": 500, "detail": f"{type(error).__name__}: {error}"[:2000],
                       "traceback": "".join(traceback.format_exception(error))[-4000:]}
            body = {"leaseId": ctx.lease_id, "error": problem, "retryable": not isinstance(error, PermanentFailure)}
            return self._report(ctx.id, ":fail", body, True, ctx.traceparent)
        body = {"leaseId": ctx.lease_id}
        if ctx.artifact_uploaded:
            body["artifact"] = True
        else:
            body["result"] = result
        return self._report(ctx.id, ":complete", body, True, ctx.traceparent)

    def _report(self, job_id: str, verb: str, body: dict[str, Any], with_next: bool,
                traceparent: str | None = None) -> list[dict[str, Any]]:
        h = {"Prefer": "return=minimal"}
        if traceparent:
            h["traceparent"] = traceparent
        if with_next and self._more():
            body = dict(body, next=self._lease_body())
        for attempt in range(3):
            try:
                res = self.transport.request("POST", f"/v1/jobs/{job_id}{verb}", body=body, headers=h)
                doc = res.json() or {}
                word = _DONE.get(verb, verb[1:])
                self.log(f"{job_id}: {word} ({res.status}), now {(doc.get('job') or doc).get('status', '?')}")
                return list((res.json() or {}).get("leases") or [])
            except ProblemError as e:
                self.log(f"{job_id}: {verb[1:]} refused: {e}")
                self.errors.append(e)  # stale-lease, illegal-transition: the job is not ours any more
                return []
            except (OSError, http.client.HTTPException) as e:
                # A final report repeated under its lease is answered again (the daemon is idempotent here).
                if attempt == 2:
                    self.errors.append(e)
                    return []
                time.sleep(0.5 * (attempt + 1))
        return []

    def _beat(self, ctx: JobContext, done: threading.Event) -> None:
        every = max(self.lease_seconds / 3.0, 0.2)
        while not done.is_set():
            ctx._wake.wait(every)
            if done.is_set():
                return
            ctx._heartbeat()
