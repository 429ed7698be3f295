"""The parts that need no console: the event-stream reader, URLs and tokens, topologies as
data, and results read from a report directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import horde
from horde._http import Endpoint, read_sse


def test_server_sent_events_are_read_as_the_standard_says() -> None:
    raw = b": keep-alive\n\nid: 3\ndata: {\"a\":\ndata: 1}\n\nid: x\nevent: y\ndata:2\r\n\ndata: tail"
    events = list(read_sse(iter(raw.splitlines(keepends=True))))
    assert [(e.id, e.data) for e in events] == [(3, '{"a":\n1}'), (None, "2"), (None, "tail")]
    assert json.loads(events[0].data) == {"a": 1}


def test_the_printed_url_carries_the_token_and_a_bad_one_says_what_to_give() -> None:
    e = Endpoint.parse("http://127.0.0.1:7070/?token=abc123", None)
    assert (e.base, e.token) == ("http://127.0.0.1:7070", "abc123")
    assert Endpoint.parse("http://127.0.0.1:7070", "t").token == "t"
    with pytest.raises(ValueError, match="HORDE_TOKEN"):
        Endpoint.parse("http://127.0.0.1:7070/", None)
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        Endpoint.parse("127.0.0.1:7070", "t")


def test_the_token_is_never_shown_in_a_repr() -> None:
    secret = "0123456789abcdef" * 4
    e = Endpoint.parse(f"http://127.0.0.1:7070/?token={secret}", None)
    c = horde.Client(f"http://127.0.0.1:7070/?token={secret}")
    assert secret not in repr(e) and secret not in repr(c.endpoint) and secret not in str(e)


def test_a_redirect_to_another_origin_does_not_carry_the_token() -> None:
    import http.server
    import threading

    seen: "list[tuple[str, str | None]]" = []

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Other)

    class Redirecting(Other):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            self.send_response(302)
            where = self.path.removeprefix("/away")
            host = f"127.0.0.1:{other.server_port}" if self.path.startswith("/away") else f"127.0.0.1:{self.server.server_port}"
            self.send_header("Location", f"http://{host}{where or '/landed'}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    first = http.server.HTTPServer(("127.0.0.1", 0), Redirecting)
    for s in (first, other):
        threading.Thread(target=s.handle_request, daemon=True).start()
    try:
        e = Endpoint.parse(f"http://127.0.0.1:{first.server_port}/?token=feed", None)
        assert e.request("GET", "/away/landed", timeout=10) == {"ok": True}
    finally:
        first.server_close()
        other.server_close()
    assert seen == [("/away/landed", "Bearer feed"), ("/landed", None)]


def test_a_token_file_is_read_and_anything_else_is_named(tmp_path: Path) -> None:
    f = tmp_path / "console.url"
    f.write_text("http://127.0.0.1:7070/?token=00ff\n")
    c = horde.Client(token_file=f)
    assert (c.endpoint.base, c.endpoint.token) == ("http://127.0.0.1:7070", "00ff")
    for bad in ("", "hello\n", "http://127.0.0.1:7070/?token=00ff\nmore\n", "x" * 5000):
        f.write_text(bad)
        with pytest.raises(ValueError, match="token file"):
            horde.Client(token_file=f)
    with pytest.raises(ValueError, match="is `horde ui --token-file` running"):
        horde.Client(token_file=tmp_path / "absent")


def test_a_ca_file_is_for_https_and_a_bad_one_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="plain HTTP"):
        Endpoint.parse("http://127.0.0.1:7070/?token=00", None, cafile=tmp_path / "ca.pem")
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ValueError, match="cafile"):
        Endpoint.parse("https://127.0.0.1:7070/?token=00", None, cafile=bad)


def test_a_console_that_is_not_there_is_named() -> None:
    c = horde.Client("http://127.0.0.1:9/?token=00")
    with pytest.raises(horde.HordeError, match="is `horde ui` running"):
        c.runs()


def test_topologies_take_mininet_link_options_and_refuse_what_they_cannot_mean() -> None:
    t = horde.Topology("lab")
    t.add_host("h1")
    t.add_router("r1", routing="ospf", timers="fast")
    t.add_link("h1", "r1", bw=10, delay="20ms", loss=1, queue="64kB", ab={"jitter": "5ms"})
    d = t.to_dict()
    assert d["node"] == [{"name": "h1", "kind": "host"}, {"name": "r1", "kind": "router", "routing": "ospf", "timers": "fast"}]
    assert d["link"] == [{"a": "h1", "b": "r1", "live": False, "rate": "10mbit", "delay": "20ms", "loss": "1%", "queue": "64kB", "ab": {"jitter": "5ms"}}]
    with pytest.raises(TypeError, match="queue="):
        t.add_link("h1", "r1", max_queue_size=100)
    with pytest.raises(TypeError, match='delay="20ms"'):
        t.add_link("h1", "r1", delay=20)
    with pytest.raises(ValueError, match="no node 'r9'"):
        t.add_link("h1", "r9")
    with pytest.raises(ValueError, match="twice"):
        t.add_host("h1")
    with pytest.raises(ValueError, match="letters"):
        horde.Topology("a b")


def test_results_need_a_report_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="summary.json"):
        horde.Results(tmp_path)


def test_results_of_a_summary_are_tables(tmp_path: Path) -> None:
    cat = lambda sent, lost: {"sent": sent, "received": sent - lost, "lost": lost, "bytes": 10 * sent, "size_samples": sent, "size_cdf": [[1, 0.5], [3, 1.0]]}  # noqa: E731
    summary = {
        "scenario": "s",
        "client": {"flows": [{"id": 0, "packets": 3}, {"id": 1, "packets": 4}]},
        "analysis": {
            "categories": [
                {"category": "a", "player_seconds": 2.0, "up": cat(10, 1), "down": cat(20, 0)},
                {"category": "b", "player_seconds": 1.0, "up": cat(0, 0), "down": cat(5, 5)},
            ],
            "up": cat(10, 1),
            "down": cat(25, 5),
            "seconds": [{"t_s": 0.0, "sent": [4, 9], "lost": [1, 0], "delay_p50_ms": [1.0, 2.0], "delay_p99_ms": [3.0, 4.0]}],
            "throughput": [[0.0, 80.0, 160.0]],
        },
        "verdicts": [{"label": "lost", "value": "0", "limit": "0", "ok": True, "kind": "generator"}],
        "emulated_links": [{"a": "r1", "b": "r2", "ab": {"packets": 5, "lost": 1}, "ba": {"packets": 6, "lost": 0}}],
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    r = horde.Results(tmp_path)
    c = r.categories()
    assert list(c["category"]) == ["a", "a", "b", "b", "total", "total"]
    assert "size_cdf" not in c.columns
    assert c.loc[(c.category == "a") & (c.direction == "up"), "loss_pct"].item() == pytest.approx(10.0)
    assert c.loc[(c.category == "b") & (c.direction == "up"), "loss_pct"].isna().item()  # nothing sent: no rate
    per = c[c.category != "total"].groupby("direction")[["sent", "lost"]].sum()
    tot = c[c.category == "total"].set_index("direction")[["sent", "lost"]]
    assert per.sort_index().equals(tot.sort_index())
    s = r.seconds()
    assert list(s["sent"]) == [4, 9] and list(s["direction"]) == ["up", "down"]
    assert list(r.throughput().columns) == ["t_s", "up_bps", "down_bps"]
    assert r.flows()["packets"].sum() == 7
    assert r.verdicts()["ok"].all()
    links = r.links()
    assert list(links["from"]) == ["r1", "r2"] and list(links["lost"]) == [1, 0]
    f = r.cdf("a", "down", "size")
    assert list(f["x"]) == [1.0, 3.0] and list(f["F"]) == [0.5, 1.0] and set(f["n"]) == {20}
    assert r.cdf("total", "up", "size")["n"].iloc[0] == 10
    assert r.cdf("b", "up", "iat").empty  # the report drew none
    with pytest.raises(KeyError, match="it has: a, b, and total"):
        r.cdf("c", "up", "size")
    with pytest.raises(ValueError, match="size, iat, delay"):
        r.cdf("a", "up", "rate")


def test_a_stream_that_is_not_json_is_named_and_memory_stays_bounded() -> None:
    import http.server
    import threading

    class Feed(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'id: 0\ndata: {"event":"planned","scenario":"s","seconds":0.1}\n\n')
            self.wfile.write(b"id: 1\ndata: " + b"x" * (3 << 20) + b"\n\n")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Feed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = horde.Run(horde.Client(f"http://127.0.0.1:{server.server_port}/?token=00"), {"id": 1, "out": "/nowhere"})
        events = run.events(timeout=10)
        assert next(events).kind == "planned"
        with pytest.raises(horde.HordeError, match="not JSON"):
            next(events)
    finally:
        server.shutdown()
