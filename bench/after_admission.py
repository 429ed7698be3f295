#!/usr/bin/env python3
"""Reflection after admission (issue 21): a peer is admitted, goes away, and an off-path
attacker spoofs packets from its address. Counts what the target then sends to that address
(AF_PACKET sniffer on lo) against what the attacker sent. Root (raw sockets); loopback only;
every case is bounded (30 s of counting by default).

  python3 bench/after_admission.py --horde target/release/horde --version 3 [--window 30]

prints one JSON line per case: case, bytes sent by the spoofer, bytes to the victim, ratio.
`--version 2` speaks the wire of builds before consent (cab4673 and earlier).
"""

import argparse
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from hostile import Sniffer, Spoofer, header, mac16  # noqa: E402

FLAG_ECHO_REQUEST, FLAG_HELLO, FLAG_CHALLENGE, FLAG_ANSWER, FLAG_REVERSE, FLAG_CONSENT, FLAG_ECHO_REPLY = 0x01, 0x04, 0x08, 0x10, 0x20, 0x80, 0x02


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


SETTLE_S = 2.0


def measure(victim_ip, target_port, spoof, window):
    """Waits until the legitimate peer's own traffic has ended (2 s: a reverse flow's bulk goes on
    1 s after its last keep-alive, consent lapses 1.6 s after the last answer), then starts the
    sniffer, runs `spoof()` (returns bytes sent) and counts `window` seconds."""
    time.sleep(SETTLE_S)
    sn = Sniffer(victim_ip, target_port)
    sn.start()
    t = time.time()
    sent = spoof()
    time.sleep(max(0.0, window - (time.time() - t)))
    sn.running = False
    sn.join()
    return sent, sn.bytes


def spoofing(sp, src, dst, pkt, count, every):
    """A spoof() for measure(): `count` packets from `src`, `every` seconds apart."""

    def go():
        n = 0
        for _ in range(count):
            n += sp.send(src, dst, pkt)
            time.sleep(every)
        return n

    return go


def out(case, sent, got):
    print(json.dumps({"case": case, "spoofed_bytes": sent, "victim_bytes": got, "ratio": round(got / sent, 3) if sent else None}), flush=True)


def recv_cases(a):
    port = free_port()
    rx = subprocess.Popen([a.horde, "recv", "--udp", str(port), "-t", str(int(3 * a.window + 60)) + "s"], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    sp = Spoofer()
    try:
        # A: a one-way flow that ended, then ONE spoofed 1,400-byte datagram with the reverse flag.
        v = ("127.0.0.5", 40000)
        subprocess.run([a.horde, "send", "--src", "%s:%d" % v, "--dst", "127.0.0.1:%d" % port, "--rate", "100", "--size", "64", "-t", "2s"], stderr=subprocess.DEVNULL, check=True)
        pkt = header(a.version, FLAG_REVERSE, 0, 1000, time.time_ns()).ljust(1400, b"\0")
        out("recv: one-way flow ended, 1 spoofed reverse datagram", *measure(v[0], port, lambda: sp.send(v, ("127.0.0.1", port), pkt), a.window))
        # B: a reverse flow that ended, then 5 spoofed keep-alives.
        v = ("127.0.0.5", 40001)
        subprocess.run([a.horde, "send", "--src", "%s:%d" % v, "--dst", "127.0.0.1:%d" % port, "-R", "--size", "1400", "-t", "2s"], stderr=subprocess.DEVNULL, check=True)
        pkt = header(a.version, FLAG_REVERSE, 0, 1000, time.time_ns()).ljust(1400, b"\0")
        out("recv: reverse flow ended, 5 spoofed keep-alives", *measure(v[0], port, spoofing(sp, v, ("127.0.0.1", port), pkt, 5, 0.2), a.window))
        # C: a round-trip flow that ended, then spoofed echo requests, 10 per second.
        v = ("127.0.0.5", 40002)
        subprocess.run([a.horde, "send", "--src", "%s:%d" % v, "--dst", "127.0.0.1:%d" % port, "--rate", "100", "--size", "1000", "--meter", "rtt", "-t", "2s"], stderr=subprocess.DEVNULL, check=True)
        pkt = header(a.version, FLAG_ECHO_REQUEST, 0, 5000, time.time_ns()).ljust(1000, b"\0")
        tenth = spoofing(sp, v, ("127.0.0.1", port), pkt, int((a.window - 1) * 10), 0.1)
        out("recv: round-trip flow ended, spoofed echo requests 10/s", *measure(v[0], port, tenth, a.window))
    finally:
        rx.send_signal(signal.SIGTERM)
        rx.wait()


def circuit_case(a):
    port = free_port()
    log = open("/tmp/horde-after-admission-serve.log", "w+")
    srv = subprocess.Popen([a.horde, "circuit", "serve", "--listen", "127.0.0.1:%d" % port, "--backlog", "texture", "-t", str(int(a.window + 30)) + "s"], stderr=log)
    time.sleep(0.5)
    join = subprocess.Popen([a.horde, "circuit", "join", "--server", "127.0.0.1:%d" % port, "--bind", "127.0.0.6", "--throttle", "fixed:400", "-t", "60s"], stderr=subprocess.DEVNULL)
    try:
        client = None
        for _ in range(100):
            log.seek(0)
            m = re.search(r"client (127\.0\.0\.6):(\d+) joined", log.read())
            if m:
                client = (m.group(1), int(m.group(2)))
                break
            time.sleep(0.05)
        assert client, "the circuit client did not join"
        time.sleep(3)
        join.kill()
        join.wait()
        sp = Spoofer()
        throttle = b"HV\x01\x02\x00\x00\x00\x00\x00\x00\x00\x00" + struct.pack(">7f", *([1e9] * 7))
        thirty = spoofing(sp, client, ("127.0.0.1", port), throttle, 30, 0.1)
        out("circuit serve: client killed, 30 spoofed throttle packets (7 x 1 Gbit/s)", *measure(client[0], port, thirty, a.window))
    finally:
        join.kill()
        srv.send_signal(signal.SIGTERM)
        srv.wait()


def server_side_case(a):
    """A UDP scenario's server side (quake3): a player validated with the run key, playing for 2 s
    (answering consent probes, where the build sends them), then gone; the spoofer sends data
    datagrams from its address, 10 per second."""
    key = os.urandom(32)
    d = "/tmp/horde-after-admission-srv"
    os.makedirs(d, exist_ok=True)
    text = 'service = "quake3"\nplayers = 10\nduration = "120s"\nseed = 1\nserver = "127.0.0.1:0"\n'
    if subprocess.run([a.horde, "child", "--help"], capture_output=True).returncode == 0:
        # the server part alone, as `horde run` starts it: its Part on standard input
        part = {"run_id": "after-admission", "shape": {"duration_ns": 120 * 10**9, "seed": 1, "key": key.hex()},
                "work": {"players": {"name": "sc.toml", "scenario": text, "service": None, "players": 10, "online": None}},
                "role": {"server": {"listen": "127.0.0.1:0", "out": os.path.join(d, "out")}}}
        srv = subprocess.Popen([a.horde, "child", "part", "after-admission"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        srv.stdin.write((json.dumps({"version": 1, "kind": "part", "id": "after-admission", "task": part}) + "\n").encode())
        srv.stdin.flush()
    else:  # a build from before parts: argv, and the key in the environment
        sc = os.path.join(d, "sc.toml")
        open(sc, "w").write(text)
        env = dict(os.environ, HORDE_RUN_KEY=key.hex())
        srv = subprocess.Popen([a.horde, "run", sc, "--serve-only", "--out", os.path.join(d, "out")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        line = srv.stdout.readline().decode().strip()
        target = json.loads(line)["listening"]["addr"] if line.startswith("{") else line.rsplit(" ", 1)[-1]
        host, port = target.rsplit(":", 1)
        port = int(port)
        v = ("127.0.0.8", 40003)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(v)
        s.connect((host, port))
        s.settimeout(0.2)
        base = time.time_ns()

        def hello(cookie):
            signed = header(a.version, FLAG_HELLO, 0, 0, base) + cookie
            return (signed + mac16(key, b"horde-udp-hello-v2", signed)).ljust(64, b"\0")

        cookie = bytes(16)
        for _ in range(20):
            s.send(hello(cookie))
            try:
                b = s.recv(2048)
            except socket.timeout:
                continue
            if b[3] & FLAG_CHALLENGE:
                cookie = b[20:36]
            elif b[3] & FLAG_ANSWER:
                break
        end = time.time() + 2
        got_stream = 0
        while time.time() < end:
            try:
                b = s.recv(65536)
            except socket.timeout:
                continue
            if b[3] & FLAG_CONSENT:
                s.send(b[:3] + bytes([b[3] | FLAG_ECHO_REPLY]) + b[4:])
            else:
                got_stream += len(b)
        s.close()
        assert got_stream > 0, "the player got no stream"
        sp = Spoofer()
        pkt = header(a.version, 0, 0, 100, time.time_ns()).ljust(100, b"\0")
        tenth = spoofing(sp, v, (host, port), pkt, int((a.window - 1) * 10), 0.1)
        out("server part alone (quake3): player gone, spoofed data 10/s from its address", *measure(v[0], port, tenth, a.window))
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--horde", required=True)
    p.add_argument("--version", type=int, default=3)
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--only", default="recv,circuit,server")
    a = p.parse_args()
    only = a.only.split(",")
    if "recv" in only:
        recv_cases(a)
    if "circuit" in only:
        circuit_case(a)
    if "server" in only:
        server_side_case(a)


if __name__ == "__main__":
    main()
