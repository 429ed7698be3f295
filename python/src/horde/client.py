"""`horde ui`'s API as Python objects: a :class:`Client` starts runs, a :class:`Run` streams its
events, takes commands (answered at once: applied, or refused with the reason) and gives its
results.

The API is described in docs/openapi.json; the event lines in docs/schemas/progress.schema.json.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Deque, Dict, Iterator, List, Mapping, Optional, Union

from ._http import Endpoint, HordeError, message_of, read_sse
from .results import Results

if TYPE_CHECKING:
    from .emu import Emu

MAX_LINE = 1 << 20

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any]]


@dataclass(frozen=True)
class Event:
    """One line of a run's event stream.

    `kind` is the line's `event` field: ``planned`` (the behaviour process planned every
    player), ``note`` (a line for people), ``progress`` (once a second: `data["progress"]` is
    the snapshot: `t_s`, rates, players per category…), ``reply`` (the answer to a command) or
    ``finished`` (`exit` and `report`). `line` is its number in the run's stream.
    """

    kind: str
    data: Dict[str, Any]
    line: Optional[int] = None

    @property
    def t_s(self) -> Optional[float]:
        """A progress line's second on the run's clock (None for other lines)."""
        p = self.data.get("progress")
        return float(p["t_s"]) if isinstance(p, dict) and "t_s" in p else None


@dataclass(frozen=True)
class Reply:
    """A run's answer to one command: applied (and the run-clock second it takes effect, when
    it has one) or refused, with what it did or why not."""

    applied: bool
    text: str
    at_s: Optional[float] = None
    id: Optional[int] = None

    @staticmethod
    def of(body: Any) -> "Reply":
        if not isinstance(body, dict) or "applied" not in body:
            raise HordeError(0, f"not a command reply: {body!r}")
        at = body.get("at_s")
        return Reply(bool(body["applied"]), str(body.get("text", "")), None if at is None else float(at), body.get("id"))


class Refused(HordeError):
    """A command the run refused (HTTP 409), with its reply."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(409, reply.text, None)
        self.reply = reply


class Client:
    """A console (`horde ui`) to start runs on.

    `url` is what `horde ui` printed (`http://127.0.0.1:7070/?token=…`), or the base URL with
    `token=` given apart or in the environment (`HORDE_TOKEN`).
    """

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30.0,
        *,
        token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
        cafile: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> None:
        if token_file is not None:
            url = read_token_file(token_file)
        url = url or os.environ.get("HORDE_URL")
        if not url:
            raise ValueError("no console URL: pass the URL `horde ui` printed, token_file= (`horde ui --token-file F`), or set HORDE_URL")
        self.endpoint = Endpoint.parse(url, token or os.environ.get("HORDE_TOKEN"), cafile=cafile)
        self.timeout = timeout

    # --- runs -------------------------------------------------------------------------------

    def start(
        self,
        scenario: Scenario,
        *,
        players: Optional[int] = None,
        online: Optional[int] = None,
        duration: Optional[str] = None,
        seed: Optional[int] = None,
    ) -> "Run":
        """Start a scenario: a file (a path on the console's machine; a relative one that exists
        here is made absolute) or a scenario as data (a dict of the scenario file's fields, as
        docs/scenarios.md names them). The overrides are `horde run`'s."""
        body: Dict[str, Any] = {"players": players, "online": online, "duration": duration, "seed": seed}
        if isinstance(scenario, Mapping):
            body["form"] = dict(scenario)
        else:
            p = Path(scenario)
            body["scenario"] = str(p.resolve()) if p.exists() else str(p)
        info = self.endpoint.request("POST", "/api/v1/runs", {k: v for k, v in body.items() if v is not None}, self.timeout)
        return Run(self, info)

    def bots(self, players: int, duration: str, *, ramp: Optional[str] = None, server: Optional[str] = None) -> "Run":
        """Quake 3 bots against a game server (`horde bots`): `players` bots (1..=1024) joining
        over `ramp` and playing for `duration`; `server` is IP:PORT (loopback, or inside a
        namespace this host made), or None for an `openarena-server` the run starts and stops.
        The report's summary.json has their response times."""
        body: Dict[str, Any] = {"players": int(players), "duration": duration}
        if ramp is not None:
            body["ramp"] = ramp
        if server is not None:
            body["server"] = server
        return Run(self, self.endpoint.request("POST", "/api/v1/runs", {"bots": body}, self.timeout))

    def runs(self) -> "List[Run]":
        """The runs the console holds."""
        return [Run(self, i) for i in self.endpoint.request("GET", "/api/v1/runs", timeout=self.timeout)]

    def run(self, run_id: int) -> "Run":
        """One run by its id."""
        return Run(self, self.endpoint.request("GET", f"/api/v1/runs/{int(run_id)}", timeout=self.timeout))

    def past(self) -> "List[Dict[str, Any]]":
        """Past runs under the console's runs directory, newest first, with their verdicts."""
        return list(self.endpoint.request("GET", "/api/v1/past", timeout=self.timeout))

    def emu(self, topology: Any, *, live: bool = False, name: Optional[str] = None) -> "Emu":
        """An emulated network on the console's machine (needs root there): see :class:`horde.Emu`."""
        from .emu import Emu

        return Emu(self, topology, live=live, name=name)


class Run:
    """A run the console started (or one attached to it)."""

    def __init__(self, client: Client, info: Dict[str, Any]) -> None:
        self.client = client
        self.info = info
        self.id = int(info["id"])

    def __repr__(self) -> str:
        return f"Run(id={self.id}, state={self.info.get('state')!r}, out={self.info.get('out')!r})"

    def refresh(self) -> Dict[str, Any]:
        """The run as the console sees it now (`state`: running or finished, `exit`, `out`)."""
        self.info = self.client.endpoint.request("GET", f"/api/v1/runs/{self.id}", timeout=self.client.timeout)
        return self.info

    @property
    def finished(self) -> bool:
        """Whether it had finished when last asked (`refresh()` asks again)."""
        return self.info.get("state") == "finished"

    @property
    def out(self) -> str:
        """Its report directory (on the console's machine)."""
        return str(self.info["out"])

    def events(self, after: Optional[int] = None, timeout: float = 60.0) -> Iterator[Event]:
        """Its event lines, from the first (or from line `after` + 1) until its `finished` line;
        reconnects where it left off if the connection drops. `timeout` bounds the wait for any
        one line (the console sends a keep-alive every 15 s)."""
        nxt = 0 if after is None else after + 1
        while True:
            query = f"?after={nxt - 1}" if nxt else ""
            resp = self.client.endpoint.stream(f"/api/v1/runs/{self.id}/events{query}", timeout)
            ended = False
            with resp:
                # a line is at most 1 MiB here (the console's are a few KiB): memory stays bounded
                for sse in read_sse(iter(lambda: resp.readline(MAX_LINE), b"")):
                    try:
                        data = json.loads(sse.data)
                    except ValueError as e:
                        raise HordeError(0, f"run {self.id}: event line {sse.id} is not JSON ({e}): {sse.data[:200]!r}") from e
                    ev = Event(str(data.get("event", "")), data, sse.id)
                    if sse.id is not None:
                        nxt = sse.id + 1
                    yield ev
                    if ev.kind == "finished":
                        ended = True
                        break
            if ended or (self.refresh().get("state") == "finished" and nxt >= int(self.info.get("events", 0))):
                return

    def command(self, command: Mapping[str, Any], check: bool = False) -> Reply:
        """Send one command (the object of a `--commands` line: ``{"command": "players",
        "online": 80}``, ``{"command": "link", …}``, ``{"command": "stop"}``). The reply comes at
        once: applied, or refused with the reason (raises :class:`Refused` if `check`)."""
        status, body = self.client.endpoint.exchange("POST", f"/api/v1/runs/{self.id}/commands", dict(command), self.client.timeout)
        if status in (200, 409) and isinstance(body, dict) and "applied" in body:
            reply = Reply.of(body)
            if check and not reply.applied:
                raise Refused(reply)
            return reply
        raise HordeError(status, message_of(body), body)

    def set_players(self, online: int, check: bool = False) -> Reply:
        """How many players are online (above the scenario's `players` too, up to the limit the
        run stated at its start)."""
        return self.command({"command": "players", "online": int(online)}, check)

    def link(self, a: str, b: str, *, state: Optional[str] = None, clear: bool = False, dir: str = "both", check: bool = False, **settings: Any) -> Reply:
        """Change a link of the run's `[emu]` topology (`delay="50ms"`, `loss="1%"`, `rate=…`,
        Mininet's `bw=` and `loss=` as numbers, as :meth:`horde.Topology.add_link` takes them),
        or take it `state="down"` / `"up"`."""
        cmd: Dict[str, Any] = {"command": "link", "a": a, "b": b, "dir": dir, "clear": clear}
        if state is not None:
            cmd["state"] = state
        if settings:
            from .emu import impairments

            cmd["set"] = impairments(settings)
        return self.command(cmd, check)

    def stop(self) -> Reply:
        """Stop now: the run ends and reports what it measured until then."""
        return self.command({"command": "stop"})

    def wait(self, timeout: Optional[float] = None, poll: float = 0.25) -> Dict[str, Any]:
        """Wait until it has finished (and written its report); its final state. Raises
        TimeoutError after `timeout` seconds (None: as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.refresh().get("state") != "finished":
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.id} still running after {timeout} s")
            time.sleep(poll)
        return self.info

    def results(self, horde: Optional[str] = None) -> Results:
        """Its report as :class:`horde.Results` (waits for the end first). Read from its report
        directory when this machine can see it, else fetched over the API into a temporary one
        (summary.json only: the per-packet tables need the logs)."""
        self.wait()
        out = Path(self.out)
        if (out / "summary.json").exists():
            return Results(out, horde=horde)
        local = Path(tempfile.mkdtemp(prefix=f"horde-run-{self.id}-"))
        (local / "summary.json").write_bytes(self.client.endpoint.raw(f"/api/v1/runs/{self.id}/report/summary.json"))
        return Results(local, horde=horde)


@dataclass
class Console:
    """`horde ui` started by this process on loopback (port chosen by the system), stopped with
    it: a context manager whose value is a :class:`Client`.

    `horde` is the binary (default: `HORDE_BIN`, else `horde` on PATH); `runs` is where its runs
    write their reports.
    """

    runs: Union[str, "os.PathLike[str]"]
    horde: Optional[str] = None
    start_timeout: float = 30.0
    process: Optional["subprocess.Popen[bytes]"] = field(default=None, init=False)
    client: Optional[Client] = field(default=None, init=False)
    log: Deque[str] = field(default_factory=lambda: collections.deque(maxlen=200), init=False)
    _private: Optional[tempfile.TemporaryDirectory[str]] = field(default=None, init=False, repr=False)

    def start(self) -> Client:
        binary = find_horde(self.horde)
        self._private = tempfile.TemporaryDirectory(prefix="horde-console-")
        token_file = os.path.join(self._private.name, "console.url")
        self.process = subprocess.Popen(
            [binary, "ui", "--listen", "127.0.0.1:0", "--runs", os.fspath(self.runs), "--token-file", token_file],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None

        def read(stream: Any) -> None:
            for raw in iter(stream.readline, b""):
                self.log.append(raw.decode("utf-8", "replace").rstrip("\n"))

        threading.Thread(target=read, args=(self.process.stderr,), daemon=True).start()
        # The console writes its URL to the token file (renamed into place whole) once it listens.
        deadline = time.monotonic() + self.start_timeout
        while not os.path.exists(token_file):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise HordeError(0, "`horde ui` did not write its token file: " + " | ".join(list(self.log)[-5:]))
            time.sleep(0.05)
        self.client = Client(token_file=token_file)
        return self.client

    def stop(self, timeout: float = 120.0) -> Optional[int]:
        """Stop the console as Ctrl-C does (its runs stop first and write their reports)."""
        p = self.process
        if self._private is not None:
            self._private.cleanup()
            self._private = None
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(2)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def __enter__(self) -> Client:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_token_file(path: Union[str, "os.PathLike[str]"]) -> str:
    """The console URL (with its token) that `horde ui --token-file F` wrote: one line, at most
    4 KiB."""
    try:
        with open(path, "rb") as f:
            raw = f.read(4097)
    except OSError as e:
        raise ValueError(f"token file {os.fspath(path)!r}: {e.strerror} (is `horde ui --token-file` running?)") from e
    line = raw.decode("utf-8", "replace").strip()
    if len(raw) > 4096 or "\n" in line or not re.fullmatch(r"https?://\S+/\?token=[0-9a-f]+", line):
        raise ValueError(f"token file {os.fspath(path)!r}: not what `horde ui --token-file` writes (one line: the console's URL with ?token=)")
    return line


def find_horde(given: Optional[str] = None) -> str:
    """The horde binary: `given`, else `HORDE_BIN`, else `horde` on PATH."""
    b = given or os.environ.get("HORDE_BIN") or shutil.which("horde")
    if not b:
        raise FileNotFoundError("no horde binary: install it (cargo install --path crates/cli), put it on PATH or set HORDE_BIN")
    return b
