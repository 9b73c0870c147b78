"""The HTTP transport: http.client connections kept alive in a small pool shared by the threads of one
Client or Worker, JSON in and out, problems raised as ProblemError. Blocking by design: a worker runs each
job's handler on a thread of its own (see worker.py), so every call here is an ordinary blocking call.

Not here: retries of application refusals (callers decide which are safe), redirects (never followed: the
caller reads Location), cookies, proxies from the environment."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from typing import Any, Mapping

from .errors import ProblemError
from .version import __version__

USER_AGENT = f"acceptd-python/{__version__}"
# Errors of a kept-alive connection that the server closed while idle: the request never reached it.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest)


class Response:
    """A whole answer: status, headers (names lowercased) and body bytes."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _headers_of(res: http.client.HTTPResponse) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in res.getheaders():
        k = k.lower()
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out


class Transport:
    """Requests against one base URL with one bearer key (None: no Authorization)."""

    def __init__(self, url: str, key: str | None, timeout: float = 60.0, pool_size: int = 8) -> None:
        u = urllib.parse.urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.base = f"{u.scheme}://{u.netloc}{u.path}"
        self.scheme, self.host, self.port, self.prefix = u.scheme, u.hostname, u.port, u.path
        self.key = key
        self.timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._pool_size = pool_size

    def _new_conn(self, timeout: float | None) -> http.client.HTTPConnection:
        t = timeout if timeout is not None else self.timeout
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=t)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def _take(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def target(self, path: str) -> str:
        """The request target of path: a path of the API, or an absolute URL on this daemon."""
        if path.startswith(("http://", "https://")):
            u = urllib.parse.urlsplit(path)
            return u.path + (f"?{u.query}" if u.query else "")
        return self.prefix + path

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        h = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.key is not None:
            h["Authorization"] = f"Bearer {self.key}"
        h.update(extra or {})
        return h

    def request(self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None,
                raw: bytes | None = None, timeout: float | None = None, ok: tuple[int, ...] = ()) -> Response:
        """One request; a 2xx or 3xx answer (or one listed in ok) is returned, anything else raised as a
        ProblemError. body is sent as JSON; raw as it is."""
        h = self.headers(headers)
        data = raw
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            h.setdefault("Content-Type", "application/json")
        target = self.target(path)
        for attempt in range(2):
            conn = self._take() if timeout is None else None
            reused = conn is not None
            if conn is None:
                conn = self._new_conn(timeout)
            try:
                conn.request(method, target, body=data, headers=h)
                res = conn.getresponse()
                payload = res.read()
            except _STALE:
                conn.close()
                if reused and attempt == 0:
                    continue  # the pool's connection had been closed by the server: once more, afresh
                raise
            except BaseException:
                conn.close()
                raise
            hdrs = _headers_of(res)
            if res.will_close or timeout is not None:
                conn.close()
            else:
                self._give(conn)
            if res.status >= 400 and res.status not in ok:
                raise ProblemError.from_answer(res.status, hdrs, payload)
            return Response(res.status, hdrs, payload)
        raise AssertionError("unreachable")

    def stream(self, method: str, path: str, headers: Mapping[str, str] | None = None,
               timeout: float | None = None, ok: tuple[int, ...] = ()) -> tuple[http.client.HTTPConnection,
                                                                                  http.client.HTTPResponse]:
        """A request whose body the caller reads as it comes (events, artifacts), on a connection of its own
        that the caller closes. A refusal is read and raised as a ProblemError."""
        conn = self._new_conn(timeout)
        try:
            conn.request(method, self.target(path), headers=self.headers(headers))
            res = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        if res.status >= 400 and res.status not in ok:
            try:
                payload = res.read()
            finally:
                conn.close()
            raise ProblemError.from_answer(res.status, _headers_of(res), payload)
        return conn, res


headers_of = _headers_of
