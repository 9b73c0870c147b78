"""Batches and schedules (docs/protocol.md: Batches, Schedules; CONTRACT sections 12 and 13).

A Batch is a handle on up to 1,000 jobs followed as one operation. Batch.wait() follows the batch's event
stream (GET /v1/batches/{id}/events: a `batch` event on each change, then `done`), resuming with
Last-Event-ID after a dropped connection; when the stream is refused it polls GET /v1/batches/{id} with
If-None-Match, sleeping what Retry-After says, as Job.wait() does for a job. Schedules (client.schedules) is
a thin wrapper over /v1/schedules: create, get, list (every page), update (a merge patch), delete, trigger."""

from __future__ import annotations

import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ._follow import Followed
from ._http import Response
from .errors import parse_retry_after

if TYPE_CHECKING:
    from .client import Client, Job

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "partialSuccess"})


def _quote(seg: str) -> str:
    return urllib.parse.quote(seg, safe="")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class Batch(Followed):
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

    def _reread(self) -> None:
        self.get()

    def _apply(self, event: str, doc: Any, on_progress: Callable[[Any], None] | None) -> bool:
        if event in ("batch", "done"):
            changed = doc.get("counts") != self.data.get("counts") or doc.get("status") != self.status
            self.data, self.etag = doc, None  # the stream carries no ETag; the next get() sets it
            if changed and on_progress:
                on_progress(self)
        return event == "done"

    def _seen(self) -> tuple[Any, ...]:
        return (self.status, self.data.get("counts"))


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
