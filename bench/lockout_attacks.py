#!/usr/bin/env python3
"""The attacks of issue 66 against Horde's TCP listeners, each run in background threads while
20 legitimate peers try one after the other (a try counts when it gets in within 2 s). Used by
bench/lockout.py (`--attacks`); one function per attack, each returning a stop function.

- churn: connections that reset themselves (RST) after 490 ms, just before the old 500-ms
  grace, 2,000 a second from 256 addresses (127.0.1.0/24), or from one address (127.0.0.9)
  at 400 a second;
- fresh: a fresh source address for every attempt (127.x.y.z, a new /24 every 256), never
  closing, 500 a second;
- proxy: a few silent connections from the victim's own address (127.0.0.1), held to the
  listener's deadline, 4 a second ("penalty by proxy");
- idle: idle connections from the victim's own address, 50 a second, never closing.
"""

import socket
import struct
import threading
import time


def _opener(port, rate, source, hold, reset):
    """Opens `rate` connections a second from source(n) until stopped; each is closed after
    `hold` seconds (with a reset if `reset`), or kept until stopped (hold None)."""
    stop = threading.Event()
    held = []
    lock = threading.Lock()
    opened = [0]

    def close_later():
        while not stop.is_set():
            now = time.time()
            with lock:
                due = [h for h in held if hold is not None and now - h[0] >= hold]
                for h in due:
                    held.remove(h)
            for _, s in due:
                if reset:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            time.sleep(0.005)

    def open_loop():
        n, start = 0, time.time()
        while not stop.is_set():
            due = int((time.time() - start) * rate)
            while n < due and not stop.is_set():
                s = socket.socket()
                s.setblocking(False)
                try:
                    s.bind((source(n), 0))
                    s.connect_ex(("127.0.0.1", port))
                    with lock:
                        held.append((time.time(), s))
                    opened[0] += 1
                except OSError:
                    s.close()
                n += 1
            time.sleep(0.001)

    threads = [threading.Thread(target=open_loop, daemon=True), threading.Thread(target=close_later, daemon=True)]
    for t in threads:
        t.start()

    def end():
        stop.set()
        for t in threads:
            t.join()
        with lock:
            for _, s in held:
                s.close()
            held.clear()
        return opened[0]

    return end


def churn_many(port):
    return _opener(port, 2000, lambda n: f"127.0.1.{n % 256}", 0.49, True)


def churn_one(port):
    return _opener(port, 400, lambda n: "127.0.0.9", 0.49, True)


def fresh(port):
    return _opener(port, 500, lambda n: f"127.{2 + n // 65536 % 200}.{n // 256 % 256}.{n % 256}", None, False)


def proxy(port):
    return _opener(port, 4, lambda n: "127.0.0.1", 4.0, False)


def idle(port):
    return _opener(port, 50, lambda n: "127.0.0.1", None, False)


ATTACKS = [
    ("churn: resets at 490 ms, 2,000/s from 256 addresses", churn_many),
    ("churn: resets at 490 ms, 400/s from one address", churn_one),
    ("fresh address per attempt, never closing, 500/s", fresh),
    ("penalty by proxy: silent from the victim's address, 4/s", proxy),
    ("idle from the victim's address, 50/s", idle),
]
