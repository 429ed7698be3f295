"""Emulated networks scripted the way Mininet scripts them, on the console's machine (root
there): build a :class:`Topology` (hosts, switches, routers, links with impairments), bring it
up as an :class:`Emu`, run commands in its nodes, change and fail links, take it down.

The topology is the same data a topology file holds (docs/topologies.md); the console saves it
as canonical TOML under its runs directory and brings that file up, so every experiment has its
file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

from ._http import HordeError

if TYPE_CHECKING:
    from .client import Client

# Mininet's names for link options, and what they are here.
_IMPAIR = ("delay", "jitter", "loss", "rate", "queue", "corrupt", "duplicate", "ber", "reorder_prob", "reorder_gap")


def impairments(opts: Dict[str, Any]) -> Dict[str, Any]:
    """A link's settings as the topology file and the link commands name them, from keyword
    options (Mininet's `bw=` in Mbit/s and `loss=` as a number of % too); one mapping for
    topologies, experiments and runs."""
    out: Dict[str, Any] = {}
    for k, v in opts.items():
        if v is None:
            continue
        if k == "bw":  # Mininet: Mbit/s as a number
            out["rate"] = f"{float(v):g}mbit"
        elif k == "max_queue_size":
            raise TypeError("max_queue_size counts packets; a Horde queue is a size in bytes: queue=\"64kB\"")
        elif k == "loss" and isinstance(v, (int, float)):  # Mininet: a percentage as a number
            out["loss"] = f"{float(v):g}%"
        elif k in ("delay", "jitter") and isinstance(v, (int, float)):
            raise TypeError(f"{k}={v!r}: give a duration with its unit, e.g. {k}=\"{v}ms\"")
        elif k in _IMPAIR:
            out[k] = v
        else:
            raise TypeError(f"unknown link option {k!r}; the options are bw, {', '.join(_IMPAIR)}")
    return out


class Topology:
    """A topology as data. Node and link options are the topology file's fields
    (docs/topologies.md); links also take Mininet's `bw=` (Mbit/s) and `loss=` as a number (%)."""

    def __init__(self, name: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValueError(f"topology name {name!r}: 1 to 64 letters, digits, - or _")
        self.name = name
        self.nodes: List[Dict[str, Any]] = []
        self.links: List[Dict[str, Any]] = []

    def _add(self, name: str, kind: str, opts: Dict[str, Any]) -> str:
        if any(n["name"] == name for n in self.nodes):
            raise ValueError(f"node {name!r} twice: every node needs its own name")
        self.nodes.append({"name": name, "kind": kind, **{k: v for k, v in opts.items() if v is not None}})
        return name

    def add_host(self, name: str, count: Optional[int] = None, **opts: Any) -> str:
        """A host (or `count` of them, named NAME1…NAMEn)."""
        return self._add(name, "host", {"count": count, **opts})

    def add_switch(self, name: str, **opts: Any) -> str:
        return self._add(name, "switch", opts)

    def add_router(self, name: str, routing: Optional[str] = None, **opts: Any) -> str:
        """A router: `routing` is "static" (default), "ospf", "rip" or "bgp" (FRR's daemons)."""
        return self._add(name, "router", {"routing": routing, **opts})

    def add_link(self, a: str, b: str, *, subnet: Optional[str] = None, ab: Optional[Dict[str, Any]] = None, ba: Optional[Dict[str, Any]] = None, live: bool = False, cost: Optional[int] = None, **impair: Any) -> None:
        """A link between two nodes, with impairments both ways (`delay="20ms"`, `loss="1%"`,
        `rate="10mbit"`, `queue="64kB"`…) or one way (`ab={…}` from a, `ba={…}`)."""
        known = {n["name"] for n in self.nodes}
        for end in (a, b):
            if end not in known:
                raise ValueError(f"link {a}–{b}: no node {end!r} (add it first)")
        link: Dict[str, Any] = {"a": a, "b": b, "live": live, **impairments(impair)}
        if subnet:
            link["subnet"] = subnet
        if cost is not None:
            link["cost"] = cost
        if ab:
            link["ab"] = impairments(ab)
        if ba:
            link["ba"] = impairments(ba)
        self.links.append(link)

    def to_dict(self) -> Dict[str, Any]:
        """The topology as the API takes it (a topology file's fields)."""
        return {"name": self.name, "node": list(self.nodes), "link": list(self.links)}


@dataclass(frozen=True)
class Ran:
    """What a command in a node did: its exit status (None if it was stopped for taking too
    long or ended by a signal), its output, and whether it timed out."""

    exit: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.exit == 0


class Node:
    """A node of a running experiment."""

    def __init__(self, emu: "Emu", name: str) -> None:
        self.emu = emu
        self.name = name

    def __repr__(self) -> str:
        return f"Node({self.name!r})"

    def cmd(self, command: Union[str, Sequence[str]], timeout: float = 30.0) -> Ran:
        """Run a command in the node: an argument vector (no shell), or a command line split as a
        POSIX shell splits words (quotes, backslashes; no variables, globs or pipes). The console
        stops it after 20 s and keeps 256 KiB of its output; `timeout` bounds the wait here."""
        body: Dict[str, Any] = {"node": self.name}
        if isinstance(command, str):
            body["command"] = command
        else:
            body["argv"] = [os.fspath(a) for a in command]
        r = self.emu._request("POST", "exec", body, timeout)
        return Ran(r.get("exit"), r.get("stdout", ""), r.get("stderr", ""), bool(r.get("timed_out")))


class Emu:
    """An experiment on the console's machine: a context manager that brings the topology up on
    entry and always takes it down on exit (its nodes' files are kept under the runs directory).

    `topology` is a :class:`Topology`, a dict of a topology file's fields, or the path of a
    topology file on the console's machine. `live`: every link changeable and counted.
    """

    def __init__(self, client: "Client", topology: Union["Topology", Dict[str, Any], str, "os.PathLike[str]"], *, live: bool = False, name: Optional[str] = None) -> None:
        self.client = client
        self.topology = topology
        self.live = live
        self.name = name
        self.id: Optional[str] = None
        self.file: Optional[str] = None

    def up(self, timeout: float = 300.0) -> "Emu":
        """Bring it up (saving a topology given as data first); returns itself."""
        if self.id is not None:
            raise RuntimeError(f"experiment {self.id} is already up")
        t = self.topology
        if isinstance(t, (Topology, dict)):
            raw = t.to_dict() if isinstance(t, Topology) else dict(t)
            name = self.name or str(raw.get("name") or "python")
            saved = self.client.endpoint.request("PUT", "/api/v1/topologies", {"name": name, "topology": raw}, self.client.timeout)
            err = (saved.get("checked") or {}).get("error")
            if err:
                what = f"{err.get('field')}: {err.get('message')}" if isinstance(err, dict) else str(err)
                raise HordeError(400, f"topology {name}: {what}", saved)
            self.file = str(saved["path"])
        else:
            self.file = os.path.abspath(os.fspath(t)) if os.path.exists(t) else os.fspath(t)
        r = self.client.endpoint.request("POST", "/api/v1/emu", {"topology": self.file, "live": self.live}, timeout)
        self.id = str(r["id"])
        return self

    def down(self, timeout: float = 300.0) -> Dict[str, Any]:
        """Take it down: namespaces and processes gone, files written inside the nodes kept
        (`kept_in`)."""
        if self.id is None:
            return {}
        r = self.client.endpoint.request("DELETE", f"/api/v1/emu/{self.id}", timeout=timeout)
        self.id = None
        return dict(r)

    def __enter__(self) -> "Emu":
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def _request(self, method: str, what: str, body: Any = None, timeout: Optional[float] = None) -> Any:
        if self.id is None:
            raise RuntimeError("the experiment is not up: call up() or use it in a with block")
        return self.client.endpoint.request(method, f"/api/v1/emu/{self.id}/{what}".rstrip("/"), body, timeout or self.client.timeout)

    def detail(self) -> Dict[str, Any]:
        """Its nodes (with their addresses) and links."""
        return dict(self._request("GET", ""))

    def nodes(self) -> List[Node]:
        return [Node(self, str(n["name"])) for n in self.detail().get("nodes", [])]

    def __getitem__(self, name: str) -> Node:
        return Node(self, name)

    def addrs(self, node: str) -> List[str]:
        """A node's IPv4 addresses (one per link), as the emulator gave them."""
        for n in self.detail().get("nodes", []):
            if n.get("name") == node:
                return [str(a) for a in n.get("addrs", [])]
        raise KeyError(f"no node {node!r} in experiment {self.id}")

    def counters(self) -> Dict[str, Any]:
        """The link emulator's counters now."""
        return dict(self._request("GET", "counters"))

    def link(self, a: str, b: str, *, dir: str = "both", clear: bool = False, **settings: Any) -> List[Dict[str, Any]]:
        """Change a link while it runs (`delay="50ms"`, `loss="2%"`, `bw=5`…); what each node
        pair's link is now."""
        body: Dict[str, Any] = {"a": a, "b": b, "dir": dir, "clear": clear, **impairments(settings)}
        return list(self._request("POST", "link", body))

    def link_down(self, a: str, b: str) -> List[Dict[str, Any]]:
        """Take a link down (both ends, as a pulled cable)."""
        return list(self._request("POST", "link", {"a": a, "b": b, "state": "down"}))

    def link_up(self, a: str, b: str) -> List[Dict[str, Any]]:
        return list(self._request("POST", "link", {"a": a, "b": b, "state": "up"}))
