#!/usr/bin/env python3
"""Hostile traffic against Horde's receivers and server sides, for bench/hostile.sh.

Loopback only (127.0.0.0/8); every mode is bounded in time and count. Spoofing needs root (a
raw IPv4 socket with IP_HDRINCL writes any 127.x source address).

  amplify  -- spoofed hellos / echo requests from a victim address; prints what reached the
              victim (bytes) over what was sent (bytes) as JSON.
  tcp      -- a TCP peer that sends a hello Horde cannot validate; bytes received / sent.
  soak     -- the soak's hostile load for a fixed duration (garbage, spoofed hellos, idle
              connects at the cap, echo peers that never read, bad hellos to a server side).
"""

import argparse
import hashlib
import hmac
import json
import os
import random
import socket
import struct
import threading
import time

FLAG_ECHO_REQUEST = 0x01
FLAG_HELLO = 0x04
HELLO_ECHO = 0x01


def header(version, flags, flow, seq, send_ns):
    return b"HD" + bytes([version, flags]) + struct.pack(">IIQ", flow, seq, send_ns)


def mac16(key, domain, data):
    return hmac.new(key, domain + data, hashlib.sha256).digest()[:16]


def udp_hello(version, flow, tag, key=bytes(32), flags=FLAG_HELLO):
    """A UDP hello: version 1 (before address validation) was the 20-byte header alone;
    version 2 is at least 64 bytes with a cookie (zeros: none yet) and a MAC under `key`."""
    if version == 1:
        return header(1, flags, flow, tag, time.time_ns())
    signed = header(version, flags, flow, tag, time.time_ns()) + bytes(16)
    return (signed + mac16(key, b"horde-udp-hello-v2", signed)).ljust(64, b"\0")


def stream_hello(version, flow, tag, flags=0, key=bytes(32)):
    signed = b"HS" + bytes([version, flags]) + struct.pack(">IQI", flow, time.time_ns(), tag)
    return signed if version == 1 else signed + mac16(key, b"horde-tcp-hello-v2", signed)


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


class Spoofer:
    """Sends UDP datagrams with any source address (root)."""

    def __init__(self):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
        self.ident = 0

    def send(self, src, dst, payload):
        (sip, sport), (dip, dport) = src, dst
        udp_len = 8 + len(payload)
        pseudo = socket.inet_aton(sip) + socket.inet_aton(dip) + struct.pack("!BBH", 0, 17, udp_len)
        udp = struct.pack("!HHHH", sport, dport, udp_len, 0)
        csum = checksum(pseudo + udp + payload) or 0xFFFF
        udp = struct.pack("!HHHH", sport, dport, udp_len, csum)
        self.ident = (self.ident + 1) & 0xFFFF
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, self.ident, 0, 64, 17, 0, socket.inet_aton(sip), socket.inet_aton(dip))
        self.s.sendto(ip + udp + payload, (dip, 0))
        return len(payload)


def drain(sock, seconds):
    sock.settimeout(0.02)
    got = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            got += len(sock.recv(65536))
        except socket.timeout:
            pass
    return got


def addr(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


class Sniffer(threading.Thread):
    """Counts the UDP payload bytes leaving `src_port` towards `dst_ip` on the loopback
    interface (AF_PACKET, root): what the target sent the victims, whichever ports they use."""

    def __init__(self, dst_ip, src_port):
        super().__init__(daemon=True)
        # ETH_P_ALL: outgoing frames reach only "all protocols" taps.
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self.s.bind(("lo", 0))
        self.s.settimeout(0.1)
        self.dst = socket.inet_aton(dst_ip)
        self.port = src_port
        self.bytes = 0
        self.packets = 0
        self.running = True

    def run(self):
        while self.running:
            try:
                frame, meta = self.s.recvfrom(70000)
            except socket.timeout:
                continue
            if meta[2] != socket.PACKET_OUTGOING:
                continue
            ip = frame[14:]
            if len(ip) < 28 or ip[9] != 17 or ip[16:20] != self.dst:
                continue
            ihl = (ip[0] & 0x0F) * 4
            sport, _, ulen = struct.unpack("!HHH", ip[ihl : ihl + 6])
            if sport == self.port:
                self.bytes += ulen - 8
                self.packets += 1


def amplify(a):
    """Spoofed packets from many victim ports on 127.0.0.2 (one per packet: each a victim the
    target might serve); counts everything the target sends to 127.0.0.2."""
    target = addr(a.addr)
    sniff = Sniffer("127.0.0.2", target[1])
    sniff.start()
    sp = Spoofer()
    key = bytes.fromhex(a.key) if a.key else bytes(32)
    sent = 0
    for i in range(a.hellos):
        src = ("127.0.0.2", 20000 + i % 40000)
        if a.mode == "hello":
            flow = i % max(a.players, 1)
            p = udp_hello(a.version, flow, flow << 8, key)
        else:  # echo requests, as data
            p = header(a.version, FLAG_ECHO_REQUEST, i % 7, i, time.time_ns()).ljust(a.size, b"\0")
        sent += sp.send(src, target, p)
    time.sleep(a.window)
    sniff.running = False
    sniff.join()
    got = sniff.bytes
    print(json.dumps({"target": a.addr, "mode": a.mode, "version": a.version, "packets": a.hellos, "sent_bytes": sent, "victim_bytes": got, "victim_packets": sniff.packets, "ratio": got / sent if sent else 0}))


def tcp(a):
    """Connections that send a hello the server side cannot validate (without the run key, or
    in the old layout), in batches of up to 100 at once; counts what comes back before close."""
    target = addr(a.addr)
    sent = got = 0
    done = 0
    while done < a.hellos:
        batch = []
        for i in range(done, min(done + 100, a.hellos)):
            c = socket.create_connection(target, timeout=2)
            h = stream_hello(a.version, i % a.players, (i % a.players) << 8)
            c.sendall(h)
            sent += len(h)
            c.setblocking(False)
            batch.append(c)
        done += len(batch)
        end = time.time() + a.window
        while time.time() < end:
            for c in batch:
                try:
                    got += len(c.recv(65536))
                except (BlockingIOError, OSError):
                    pass
            time.sleep(0.005)
        for c in batch:
            c.close()
    print(json.dumps({"target": a.addr, "mode": "tcp-hello", "version": a.version, "connections": a.hellos, "sent_bytes": sent, "received_bytes": got, "ratio": got / sent if sent else 0}))


# ---- soak ---------------------------------------------------------------------------------------


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {}

    def add(self, k, v=1):
        with self.lock:
            self.n[k] = self.n.get(k, 0) + v


def paced(rate, end, fn):
    """Calls fn() about `rate` times a second until `end`."""
    step = 1.0 / rate
    t = time.time()
    while t < end:
        fn()
        t += step
        d = t - time.time()
        if d > 0:
            time.sleep(d)


def garbage_udp(dst, rate, end, c):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    r = random.Random(1)

    def one():
        b = bytes(r.getrandbits(8) for _ in range(r.randint(0, 300)))
        if r.random() < 0.5 and len(b) >= 4:
            b = b"HD\x03" + b[3:]
        try:
            s.sendto(b, dst)
            c.add("garbage_datagrams")
        except OSError:
            pass

    paced(rate, end, one)


def spoofed_hellos(dst, rate, end, c):
    sp = Spoofer()
    r = random.Random(2)

    def one():
        src = ("127.%d.%d.%d" % (r.randint(1, 254), r.randint(0, 255), r.randint(1, 254)), r.randint(1024, 65535))
        sp.send(src, dst, udp_hello(2, r.randint(0, 1 << 20), 0))
        c.add("spoofed_hellos")

    paced(rate, end, one)


def idle_connects(dst, hold, end, c):
    """Keeps about `hold` idle connections open; reopens what the peer closes."""
    conns = []
    while time.time() < end:
        alive = []
        for s in conns:
            try:
                s.setblocking(False)
                if s.recv(1) == b"":
                    s.close()
                    c.add("idle_closed_by_peer")
                    continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                c.add("idle_closed_by_peer")
                continue
            alive.append(s)
        conns = alive
        while len(conns) < hold and time.time() < end:
            try:
                s = socket.create_connection(dst, timeout=1)
                conns.append(s)
                c.add("idle_connects")
            except OSError:
                c.add("idle_connect_failed")
                break
        time.sleep(0.5)
    for s in conns:
        s.close()


def never_reading_echo_peers(dst, n, end, c):
    apdu = struct.pack(">HI", 1460, 0) + bytes(1454)
    peers = []
    for _ in range(n):
        s = socket.create_connection(dst, timeout=2)
        s.sendall(stream_hello(2, 1, 0, HELLO_ECHO))
        s.setblocking(False)
        peers.append(s)
    while time.time() < end:
        for i, s in enumerate(peers):
            try:
                c.add("echo_peer_bytes", s.send(apdu))
            except BlockingIOError:
                pass
            except OSError:
                c.add("echo_peer_closed_by_peer")
                s.close()
                s = socket.create_connection(dst, timeout=2)
                s.sendall(stream_hello(2, 1, 0, HELLO_ECHO))
                s.setblocking(False)
                peers[i] = s
        time.sleep(0.01)


def bad_server_hellos(dst, rate, end, c):
    r = random.Random(3)

    def one():
        try:
            s = socket.create_connection(dst, timeout=1)
            k = r.random()
            if k < 0.4:
                s.sendall(stream_hello(2, 5, 5 << 8))  # a player, without the run key
            elif k < 0.7:
                s.sendall(bytes(r.getrandbits(8) for _ in range(r.randint(1, 200))))
            else:
                s.sendall(b"GET / HTTP/1.1\r\nHost: horde\r\n\r\n")
            s.close()
            c.add("bad_server_connections")
        except OSError:
            c.add("bad_server_failed")

    paced(rate, end, one)


def soak(a):
    end = time.time() + a.seconds
    c = Counter()
    jobs = []
    if a.recv_udp:
        jobs += [(garbage_udp, (addr(a.recv_udp), 500, end, c)), (spoofed_hellos, (addr(a.recv_udp), 1000, end, c))]
    if a.recv_tcp:
        jobs += [(idle_connects, (addr(a.recv_tcp), a.hold, end, c)), (never_reading_echo_peers, (addr(a.recv_tcp), 8, end, c))]
    if a.serve_tcp:
        jobs += [(idle_connects, (addr(a.serve_tcp), a.hold, end, c)), (bad_server_hellos, (addr(a.serve_tcp), 50, end, c))]
    threads = [threading.Thread(target=f, args=args, daemon=True) for f, args in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.seconds + 30)
    print(json.dumps(c.n))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("amplify")
    m.add_argument("--addr", required=True)
    m.add_argument("--mode", choices=["hello", "echo"], default="hello")
    m.add_argument("--version", type=int, default=2)
    m.add_argument("--hellos", type=int, default=1)
    m.add_argument("--players", type=int, default=100)
    m.add_argument("--size", type=int, default=64)
    m.add_argument("--key", default="")
    m.add_argument("--window", type=float, default=3.0)
    t = sub.add_parser("tcp")
    t.add_argument("--addr", required=True)
    t.add_argument("--version", type=int, default=2)
    t.add_argument("--hellos", type=int, default=1)
    t.add_argument("--players", type=int, default=100)
    t.add_argument("--window", type=float, default=1.0)
    s = sub.add_parser("soak")
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--recv-udp")
    s.add_argument("--recv-tcp")
    s.add_argument("--serve-tcp")
    s.add_argument("--hold", type=int, default=1000)
    a = p.parse_args()
    for v in [getattr(a, k, None) for k in ("addr", "recv_udp", "recv_tcp", "serve_tcp")]:
        if v and not addr(v)[0].startswith("127."):
            raise SystemExit("loopback targets only (127.0.0.0/8)")
    {"amplify": amplify, "tcp": tcp, "soak": soak}[a.cmd](a)


if __name__ == "__main__":
    main()
