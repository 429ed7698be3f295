#!/usr/bin/env python3
"""Lockout on Horde's TCP listeners (issue 47): 64 silent or slow connections from 16 loopback
addresses (four each) are held open, then 20 legitimate peers try one after the other while the
attackers reconnect four at a time after each try. A try succeeds when the peer gets in within
2 s. One horde binary per call; prints one JSON object per listener.

    python3 bench/lockout.py /path/to/horde LABEL

Listeners: the agent's control port (a controller's mutual-TLS handshake completes), `horde ui`
(a request with the token is answered 200), `horde logd` (the TLS handshake completes: the
place is taken before it), the agent's `/ready` (answered 200)."""

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ATTACKERS = 16
HELD = 64
TRIES = 20
WITHIN = 2.0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def silent(port, k, payload=b""):
    s = socket.socket()
    s.bind((f"127.0.1.{10 + k % ATTACKERS}", 0))
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", port))
        if payload:
            s.sendall(payload)
        return s
    except OSError:
        s.close()
        return None


def wait_port(port, t=20):
    end = time.time() + t
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def attack(port, try_once, payload=b""):
    held = [c for c in (silent(port, k, payload) for k in range(HELD)) if c]
    time.sleep(0.7)
    ok = 0
    for t in range(TRIES):
        start = time.time()
        try:
            if try_once() and time.time() - start < WITHIN:
                ok += 1
        except Exception:
            pass
        held += [c for c in (silent(port, t * 4 + j, payload) for j in range(4)) if c]
    for c in held:
        c.close()
    return ok, len(held)


def tls_in(port, ctx):
    with socket.create_connection(("127.0.0.1", port), timeout=WITHIN) as s:
        s.settimeout(WITHIN)
        with ctx.wrap_socket(s, server_hostname="horde-logd") as t:
            t.do_handshake()
            return True


def http_ok(port, path, headers=""):
    with socket.create_connection(("127.0.0.1", port), timeout=WITHIN) as s:
        s.settimeout(WITHIN)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{headers}\r\n".encode())
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        return got.split(b" ")[1:2] == [b"200"]


def main():
    horde, label = sys.argv[1], sys.argv[2]
    d = tempfile.mkdtemp(prefix="horde-lockout-")
    rows = []
    subprocess.run([horde, "agent", "keygen", "--out", f"{d}/creds"], check=True, capture_output=True)
    # the agent: control port and /ready
    cport, mport = free_port(), free_port()
    agent = subprocess.Popen([horde, "agent", "--listen", f"127.0.0.1:{cport}", "--credentials", f"{d}/creds", "--dir", f"{d}/agent",
                              "--metrics", f"127.0.0.1:{mport}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(cport)
        wait_port(mport)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.load_verify_locations(f"{d}/creds/ca.pem")
        ctx.load_cert_chain(f"{d}/creds/controller.pem", f"{d}/creds/controller.key")
        ok, n = attack(cport, lambda: tls_in(cport, ctx))
        rows.append({"listener": "agent control port (controller's TLS handshake)", "ok": ok, "held": n})
        ok, n = attack(mport, lambda: http_ok(mport, "/ready"), payload=b"GET /metr")
        rows.append({"listener": "agent /ready (probe answered 200)", "ok": ok, "held": n})
    finally:
        agent.kill()
        agent.wait()
    # the console
    uport = free_port()
    ui = subprocess.Popen([horde, "ui", "--listen", f"127.0.0.1:{uport}", "--runs", f"{d}/runs"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        token = None
        end = time.time() + 20
        while token is None and time.time() < end:
            line = ui.stdout.readline()
            m = re.search(r"token=([0-9a-f]+)", line)
            token = m and m.group(1)
        ok, n = attack(uport, lambda: http_ok(uport, "/api/v1/runs", f"Authorization: Bearer {token}\r\n"))
        rows.append({"listener": "horde ui (request with the token answered 200)", "ok": ok, "held": n})
    finally:
        ui.kill()
        ui.wait()
    # the log server
    lport = free_port()
    with open(f"{d}/key", "w") as f:
        f.write("5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7\n")
    os.chmod(f"{d}/key", 0o600)
    logd = subprocess.Popen([horde, "logd", "--listen", f"127.0.0.1:{lport}", "--key-file", f"{d}/key", "--dir", f"{d}/logs"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(lport)
        lctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        lctx.check_hostname = False
        lctx.verify_mode = ssl.CERT_NONE
        ok, n = attack(lport, lambda: tls_in(lport, lctx))
        rows.append({"listener": "horde logd (source's TLS handshake)", "ok": ok, "held": n})
    finally:
        logd.kill()
        logd.wait()
    for r in rows:
        r["build"] = label
        print(json.dumps(r))


def report(rows_file, results):
    """Writes the table of `rows_file` (JSON lines) into `results` between its lockout markers."""
    rows = [json.loads(line) for line in open(rows_file) if line.strip()]
    builds = list(dict.fromkeys(r["build"] for r in rows))
    listeners = list(dict.fromkeys(r["listener"] for r in rows))
    cell = {(r["listener"], r["build"]): r for r in rows}
    machine = f"{os.cpu_count()} cores, kernel {os.uname().release}"
    out = ["<!-- lockout -->", "### D. Lockout: silent or slow connections against every TCP listener (issue 47)", "",
           f"`HORDE_OLD=/path/to/old/horde OLD_LABEL=… bash bench/lockout.sh` ({time.strftime('%Y-%m-%d')}, {machine}, loopback). "
           f"{HELD} connections that never authenticate (`/ready`: half a request) from {ATTACKERS} addresses "
           f"(127.0.1.10–25, four each) are held open; then {TRIES} legitimate peers try one after the other, the attackers "
           "reconnecting four at a time after each try. A try counts when the peer gets in within 2 s (bench/lockout.py).", "",
           "| listener | " + " | ".join(f"{b}: in within 2 s" for b in builds) + " | attacker connections opened (last build) |",
           "|---|" + "---:|" * (len(builds) + 1)]
    for li in listeners:
        vals = [f"{cell[(li, b)]['ok']} of {TRIES}" if (li, b) in cell else "-" for b in builds]
        out.append(f"| {li} | " + " | ".join(vals) + f" | {cell.get((li, builds[-1]), {}).get('held', '-')} |")
    out.append("<!-- /lockout -->")
    text = open(results).read()
    block = "\n".join(out)
    if "<!-- lockout -->" in text:
        a, rest = text.split("<!-- lockout -->", 1)
        text = a + block + rest.split("<!-- /lockout -->", 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(results, "w").write(text)


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        report(sys.argv[2], sys.argv[3])
    else:
        main()
