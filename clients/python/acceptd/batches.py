"""Batches and schedules (docs/protocol.md: Batches, Schedules; CONTRACT sections 12 and 13).

A Batch is a handle on up to 1,000 jobs followed as one operation. Batch.wait() follows the batch's event
stream (GET /v1/batches/{id}/events: a `batch` event on each change, then `done`), resuming with
Last-Event-ID after a dropped connection; when the stream is refused it polls GET /v1/batches/{id} with
If-None-Match, sleeping what Retry-After says, as Job.wait() does for a job. Schedules (client.schedules) is
a thin wrapper over /v1/schedules: create, get, list (every page), update (a merge patch), delete, trigger."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ._http import Response
from .errors import JobTimeout, ProblemError, parse_retry_after

if TYPE_CHECKING:
    from .client import Client, Job

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "partialSuccess"})
MAX_RETRY_AFTER = 30.0
SSE_IDLE = 45.0


def _quote(seg: str) -> str:
    return urllib.parse.quote(seg, safe="")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class Batch:
    """One batch: `data` is its representation as last read ({id, status, total, counts, progress, ...})."""

    def __init__(self, client: "Client", data: Mapping[str, Any], etag: str | None = None) -> None:
        self.client = client
        self.data: dict[str, Any] = dict(data)
        self.etag = etag
        self.retry_after: float | None = None
        self.followed_by: str | None = None  # how the last wait() followed it: "events" or "poll"

    def __repr__(self) -> str:
        return f"<Batch {self.id} {self.status}>"

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def status(self) -> str:
        return str(self.data.get("status", ""))

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.data.get("counts") or {})

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def path(self) -> str:
        return f"/v1/batches/{_quote(self.id)}"

    def _take(self, res: Response) -> None:
        if res.status == 200:
            self.data = res.json()
            self.etag = res.headers.get("etag", self.etag)
        self.retry_after = parse_retry_after(res.headers.get("retry-after"))

    def get(self) -> "Batch":
        """Read the batch again (If-None-Match: an unchanged batch costs a 304); returns self."""
        h = {"If-None-Match": self.etag} if self.etag else {}
        self._take(self.client.transport.request("GET", self.path, headers=h))
        return self

    def cancel(self) -> "Batch":
        """Cancel every job of the batch that is not final; returns self as the batch is after."""
        res = self.client.transport.request("POST", self.path + ":cancel")
        self.data, self.etag = res.json(), res.headers.get("etag")
        return self

    def jobs(self, page_size: int | None = None) -> Iterator["Job"]:
        """The batch's jobs, newest first, page after page (GET /v1/batches/{id}/jobs)."""
        from .client import Job

        token: str | None = None
        while True:
            q = {k: v for k, v in (("limit", page_size), ("pageToken", token)) if v is not None}
            query = "?" + urllib.parse.urlencode(q) if q else ""
            res = self.client.transport.request("GET", self.path + "/jobs" + query)
            page = res.json()
            for item in page.get("items", []):
                yield Job(self.client, item)
            token = page.get("nextPageToken")
            if not token:
                return

    def wait(self, timeout: float | None = None, on_progress: Callable[["Batch"], None] | None = None,
             events: bool = True) -> "Batch":
        """Block until the batch ends and return it (self, updated). on_progress(batch) is called on each
        change seen on the way. Raises JobTimeout after timeout seconds. events=False polls from the start."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.done and events and self._follow(deadline, on_progress):
            self.followed_by = "events"
            return self
        self.followed_by = "poll"
        self._poll(deadline, on_progress)
        return self

    def _left(self, deadline: float | None) -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    def _follow(self, deadline: float | None, on_progress: Callable[["Batch"], None] | None) -> bool:
        """Follow the event stream until done (True), or until it is refused (False: poll instead)."""
        from .client import _events

        last_id: str | None = None
        failures = 0
        while True:
            left = self._left(deadline)
            if left is not None and left <= 0:
                raise JobTimeout(self)
            h = {"Accept": "text/event-stream"}
            if last_id is not None:
                h["Last-Event-ID"] = last_id
            try:
                conn, res = self.client.transport.stream("GET", self.path + "/events", headers=h,
                                                         timeout=min(SSE_IDLE, left) if left else SSE_IDLE)
            except ProblemError as e:
                if e.status in (404, 410, 401, 403):
                    raise
                return False
            except OSError:
                failures += 1
                if failures >= 3:
                    return False
                time.sleep(min(0.2 * failures, left or 1.0))
                continue
            try:
                if res.status == 204:  # resumed past `done`: the batch has ended
                    self.get()
                    return True
                if res.status != 200 or "text/event-stream" not in (res.getheader("Content-Type") or ""):
                    return False
                for ev_id, event, data in _events(conn, res, deadline):
                    failures = 0
                    if ev_id is not None:
                        last_id = ev_id
                    doc = json.loads(data)
                    if event in ("batch", "done"):
                        changed = doc.get("counts") != self.data.get("counts") or doc.get("status") != self.status
                        self.data, self.etag = doc, None  # the stream carries no ETag; the next get() sets it
                        if changed and on_progress:
                            on_progress(self)
                        if event == "done":
                            return True
            except (OSError, http.client.HTTPException):
                failures += 1  # dropped or idle too long: resume from the last id
                if failures >= 3:
                    return False
            finally:
                conn.close()

    def _poll(self, deadline: float | None, on_progress: Callable[["Batch"], None] | None) -> None:
        if self.etag is None or not self.data.get("status"):
            self.get()
        while not self.done:
            pace = min(self.retry_after if self.retry_after is not None else 1.0, MAX_RETRY_AFTER)
            left = self._left(deadline)
            if left is not None:
                if left <= 0:
                    raise JobTimeout(self)
                pace = min(pace, left)
            time.sleep(pace)
            before = (self.status, self.data.get("counts"))
            self.get()
            if on_progress and (self.status, self.data.get("counts")) != before:
                on_progress(self)


class Schedules:
    """client.schedules: /v1/schedules. Each call answers the schedule as the daemon does (a dict)."""

    def __init__(self, client: "Client") -> None:
        self.client = client

    @staticmethod
    def _path(schedule_id: str) -> str:
        return f"/v1/schedules/{_quote(schedule_id)}"

    def create(self, job: Mapping[str, Any], *, id: str | None = None, cron: str | None = None,
               every: str | None = None, **options: Any) -> dict[str, Any]:
        """Create a schedule: exactly one of cron and every; job a submit body ({type, payload, ...});
        options the other members in snake_case (timezone, overlap, catchup_window, paused, start_at, end_at)."""
        body: dict[str, Any] = {"job": dict(job)}
        body.update({k: v for k, v in (("id", id), ("cron", cron), ("every", every)) if v is not None})
        body.update({_camel(k): v for k, v in options.items() if v is not None})
        return self.client.transport.request("POST", "/v1/schedules", body=body).json()  # type: ignore[no-any-return]

    def get(self, schedule_id: str) -> dict[str, Any]:
        return self.client.transport.request("GET", self._path(schedule_id)).json()  # type: ignore[no-any-return]

    def list(self, page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """Every schedule of the tenant, page after page."""
        token: str | None = None
        while True:
            q = {k: v for k, v in (("limit", page_size), ("pageToken", token)) if v is not None}
            query = "?" + urllib.parse.urlencode(q) if q else ""
            res = self.client.transport.request("GET", "/v1/schedules" + query)
            page = res.json()
            yield from page.get("items", [])
            token = page.get("nextPageToken")
            if not token:
                return

    def update(self, schedule_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON merge patch, members in camelCase as the API names them (None sends one back to its default)."""
        res = self.client.transport.request("PATCH", self._path(schedule_id), body=dict(patch),
                                            headers={"Content-Type": "application/merge-patch+json"})
        return res.json()  # type: ignore[no-any-return]

    def delete(self, schedule_id: str) -> None:
        self.client.transport.request("DELETE", self._path(schedule_id))

    def trigger(self, schedule_id: str) -> dict[str, Any]:
        """One run now, under the schedule's overlap policy; answers the schedule after the run."""
        res = self.client.transport.request("POST", self._path(schedule_id) + ":trigger")
        return res.json()  # type: ignore[no-any-return]
