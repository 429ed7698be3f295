"""The HTTP side of the client: one request function and a server-sent-events reader.

Standard library only (urllib). Every request carries the console's token as
`Authorization: Bearer TOKEN`; errors come back as :class:`HordeError` with the console's own
message, which names the problem and the fix.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator, Optional, Union


class HordeError(Exception):
    """A request the console refused or could not serve: its HTTP status and its message."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.body = body


@dataclass(frozen=True)
class Endpoint:
    """Where the console is (scheme://host:port, no path) and its token."""

    base: str
    # Never shown (a repr ends up in logs and notebooks' outputs).
    token: str = field(repr=False)
    context: Optional[ssl.SSLContext] = field(default=None, repr=False)

    @staticmethod
    def parse(url: str, token: Optional[str], cafile: "Optional[Union[str, os.PathLike[str]]]" = None) -> "Endpoint":
        """From the URL `horde ui` prints (`http://127.0.0.1:7070/?token=…`) or a bare base URL
        with the token given apart. `cafile` is a PEM file of certificates to trust for an
        HTTPS console (`horde ui --tls-self-signed` writes its own as console-cert.pem)."""
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"console URL {url!r}: give it as http://HOST:PORT (the URL `horde ui` prints)")
        query = urllib.parse.parse_qs(u.query)
        given = query.get("token") or []
        found = token or (given[0] if given else None)
        if not found:
            raise ValueError(
                "no token: pass token=…, set HORDE_TOKEN, or give the whole URL `horde ui` printed (…/?token=…)"
            )
        context = None
        if cafile is not None:
            if u.scheme != "https":
                raise ValueError(f"cafile= is for an HTTPS console; {url!r} is plain HTTP")
            try:
                context = ssl.create_default_context(cafile=os.fspath(cafile))
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"cafile {os.fspath(cafile)!r}: {e} (give the PEM certificate the console printed)") from e
        return Endpoint(f"{u.scheme}://{u.netloc}", found, context)

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        """One JSON request; the decoded answer, or :class:`HordeError`."""
        status, answer = self.exchange(method, path, body, timeout)
        if status >= 400:
            raise HordeError(status, message_of(answer), answer)
        return answer

    def exchange(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> "tuple[int, Any]":
        """One JSON request; its status and decoded answer, whatever the status."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=self._headers(data is not None))
        try:
            with self._open(req, timeout) as r:
                return r.status, _decode(r.read())
        except urllib.error.HTTPError as e:
            return e.code, _decode(e.read())
        except urllib.error.URLError as e:
            raise HordeError(0, f"cannot reach the console at {self.base}: {e.reason} (is `horde ui` running?)") from e

    def raw(self, path: str, timeout: float = 30.0) -> bytes:
        """A file's bytes (a report file)."""
        req = urllib.request.Request(self.base + path, headers=self._headers(False))
        try:
            with self._open(req, timeout) as r:
                return bytes(r.read())
        except urllib.error.HTTPError as e:
            raise HordeError(e.code, message_of(_decode(e.read()))) from e

    def stream(self, path: str, timeout: float) -> BinaryIO:
        """An open response to read server-sent events from."""
        headers = self._headers(False)
        headers["Accept"] = "text/event-stream"
        req = urllib.request.Request(self.base + path, headers=headers)
        try:
            return self._open(req, timeout)  # type: ignore[no-any-return]
        except urllib.error.HTTPError as e:
            raise HordeError(e.code, message_of(_decode(e.read()))) from e

    def _open(self, req: urllib.request.Request, timeout: float) -> Any:
        """urlopen through an opener whose redirects never carry the token to another origin."""
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=self.context), _SameOriginRedirects())
        return opener.open(req, timeout=timeout)

    def _headers(self, has_body: bool) -> "dict[str, str]":
        h = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if has_body:
            h["Content-Type"] = "application/json"
        return h


def origin(url: str) -> "tuple[str, str]":
    u = urllib.parse.urlsplit(url)
    return (u.scheme, u.netloc.lower())


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect, but drops the token (and every other credential) when it leads to
    another scheme, host or port: urllib's own handler copies the Authorization header along."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Optional[urllib.request.Request]:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(newurl) != origin(req.full_url):
            for name in ("Authorization", "Cookie"):
                new.remove_header(name)
                new.unredirected_hdrs.pop(name, None)
        return new


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def message_of(answer: Any) -> str:
    """The console's message in an answer (its `error`, or a reply's `text`)."""
    if isinstance(answer, dict):
        for k in ("error", "text"):
            if isinstance(answer.get(k), str):
                return str(answer[k])
    return str(answer)


@dataclass(frozen=True)
class Sse:
    """One server-sent event: its id (the run's event line number) and its data."""

    id: Optional[int]
    data: str


def read_sse(lines: Iterator[bytes]) -> Iterator[Sse]:
    """Server-sent events from a response's lines (the WHATWG rules this API uses: `id:`,
    `data:` possibly over several lines, comments and other fields ignored, a blank line ends
    an event)."""
    event_id: Optional[int] = None
    data: "list[str]" = []
    for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line == "":
            if data:
                yield Sse(event_id, "\n".join(data))
            event_id, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "id":
            try:
                event_id = int(value)
            except ValueError:
                event_id = None
    if data:
        yield Sse(event_id, "\n".join(data))
