"""Following a job or a batch to its end, shared by Job.wait() and Batch.wait().

Followed holds the two loops: _follow() reads the object's event stream (GET {path}/events), resuming with
Last-Event-ID after a dropped connection and giving up (so that the caller polls) after three failures in a
row or when the stream is refused; _poll() reads {path} with If-None-Match at the pace Retry-After says
(at most MAX_RETRY_AFTER). The subclass supplies `path`, `done`, `data`, `etag`, `retry_after` and three
hooks: _reread() (one conditional GET), _apply(event, doc, on_progress) (take one event; True when it ends
the stream) and _seen() (what a change is, for on_progress while polling)."""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .errors import JobTimeout, ProblemError

if TYPE_CHECKING:
    from .client import Client

MAX_RETRY_AFTER = 30.0  # never sleep longer than this on a server's hint
SSE_IDLE = 45.0  # the daemon sends a heartbeat comment every 15 s: three missed is a dead connection


class Followed:
    client: "Client"
    data: dict[str, Any]
    etag: str | None
    retry_after: float | None

    @property
    def path(self) -> str:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def _reread(self) -> None:
        raise NotImplementedError

    def _apply(self, event: str, doc: Any, on_progress: Callable[[Any], None] | None) -> bool:
        raise NotImplementedError

    def _seen(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def _left(self, deadline: float | None) -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    def _follow(self, deadline: float | None, on_progress: Callable[[Any], None] | None) -> bool:
        """Follow the event stream until done (True), or until it is refused (False: poll instead)."""
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
                    raise  # not there to be followed: no point polling it either
                return False
            except OSError:
                failures += 1
                if failures >= 3:
                    return False
                time.sleep(min(0.2 * failures, left or 1.0))
                continue
            try:
                if res.status == 204:  # resumed past `done`: it has ended
                    self._reread()
                    return True
                if res.status != 200 or "text/event-stream" not in (res.getheader("Content-Type") or ""):
                    return False
                for ev_id, event, data in _events(conn, res, deadline):
                    failures = 0
                    if ev_id is not None:
                        last_id = ev_id
                    if self._apply(event, json.loads(data), on_progress):
                        return True
            except (OSError, http.client.HTTPException):
                failures += 1  # dropped or idle too long: resume from the last id
                if failures >= 3:
                    return False
            finally:
                conn.close()

    def _poll(self, deadline: float | None, on_progress: Callable[[Any], None] | None) -> None:
        if self.etag is None or not self.data.get("status"):
            self._reread()
        while not self.done:
            pace = min(self.retry_after if self.retry_after is not None else 1.0, MAX_RETRY_AFTER)
            left = self._left(deadline)
            if left is not None:
                if left <= 0:
                    raise JobTimeout(self)
                pace = min(pace, left)
            time.sleep(pace)
            before = self._seen()
            self._reread()
            if on_progress and self._seen() != before:
                on_progress(self)


def _events(conn: http.client.HTTPConnection, res: http.client.HTTPResponse,
            deadline: float | None) -> Iterator[tuple[str | None, str, str]]:
    """(id, event, data) of each event of a text/event-stream body, until it ends."""
    ev_id: str | None = None
    event, data = "message", list[str]()
    while True:
        if conn.sock is not None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise socket.timeout("the wait ran out")
            conn.sock.settimeout(SSE_IDLE if left is None else min(SSE_IDLE, left))
        raw = res.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield ev_id, event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                ev_id = value
            elif field == "event":
                event = value
            elif field == "data":
                data.append(value)
