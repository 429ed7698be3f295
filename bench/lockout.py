#!/usr/bin/env python3
"""Lockout on Horde's TCP listeners (issues 47 and 66). Issue 47's attack: 64 silent or slow
connections from 16 loopback addresses (four each) are held open, then 20 legitimate peers try
one after the other while the attackers reconnect four at a time after each try. Issue 66's
attacks (bench/lockout_attacks.py: churn, fresh addresses, penalty by proxy, idle from the
victim's address) run in the background while 20 peers try. A try succeeds when the peer gets
in within 2 s. One horde binary per call; prints one JSON object per listener and attack.

    python3 bench/lockout.py /path/to/horde LABEL

Listeners: the agent's control port (a controller's mutual-TLS handshake completes), `horde ui`
(a request with the token is answered 200), `horde logd` (a real `horde send --log-server` with
the run key: its log is admitted and written there, the source having proved the key), the
agent's `/ready` (answered 200). Under each of issue 66's attacks, the agent's control port
also takes 4 real runs (`horde run --agents`, a 2-s, 4-player WoW scenario; a run counts when it
exits 0 within 60 s) and logd's 20 tries are real sends (`send --log-server`)."""

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


def one_try(try_once):
    """1 when a legitimate try gets in within WITHIN seconds, else 0."""
    start = time.time()
    try:
        return int(bool(try_once()) and time.time() - start < WITHIN)
    except Exception:
        return 0


def attack(port, try_once, payload=b""):
    held = [c for c in (silent(port, k, payload) for k in range(HELD)) if c]
    time.sleep(0.7)
    ok = 0
    for t in range(TRIES):
        ok += one_try(try_once)
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


def cpu_s(pid):
    """CPU seconds (user + system) process `pid` has used."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def listeners(horde, d):
    """(name, start) of each listener: start() -> (process, port, try_once, payload)."""
    subprocess.run([horde, "agent", "keygen", "--out", f"{d}/creds"], check=True, capture_output=True)
    with open(f"{d}/key", "w") as f:
        f.write("5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7\n")
    os.chmod(f"{d}/key", 0o600)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(f"{d}/creds/ca.pem")
    ctx.load_cert_chain(f"{d}/creds/controller.pem", f"{d}/creds/controller.key")
    # the receiver every logd try sends its one packet to (with the run key), for the whole bench
    rport = free_port()
    recv = subprocess.Popen([horde, "recv", "--port", str(rport), "--key-file", f"{d}/key", "-t", "3600s"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(rport)
    RECEIVERS.append(recv)
    with open(f"{d}/run.toml", "w") as f:
        f.write('name = "lockout"\nservice = "wow"\nplayers = 4\nduration = "2s"\nseed = 1\nspin_us = 0\n')

    def agent(metrics):
        cport, mport = free_port(), free_port()
        p = subprocess.Popen([horde, "agent", "--listen", f"127.0.0.1:{cport}", "--credentials", f"{d}/creds", "--dir", f"{d}/agent",
                              "--metrics", f"127.0.0.1:{mport}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(cport)
        wait_port(mport)
        if metrics:
            return p, mport, lambda: http_ok(mport, "/ready"), b"GET /metr"
        REAL_RUN[0] = lambda k: subprocess.run([horde, "run", f"{d}/run.toml", "--agents", f"127.0.0.1:{cport}", "--credentials",
                                                f"{d}/creds", "-o", f"{d}/runs/real-{cport}-{k}"], capture_output=True,
                                               timeout=60).returncode == 0
        return p, cport, lambda: tls_in(cport, ctx), b""

    def ui():
        uport = free_port()
        p = subprocess.Popen([horde, "ui", "--listen", f"127.0.0.1:{uport}", "--runs", f"{d}/runs"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        token, end = None, time.time() + 20
        while token is None and time.time() < end:
            m = re.search(r"token=([0-9a-f]+)", p.stdout.readline())
            token = m and m.group(1)
        return p, uport, lambda: http_ok(uport, "/api/v1/runs", f"Authorization: Bearer {token}\r\n"), b""

    def logd():
        lport = free_port()
        p = subprocess.Popen([horde, "logd", "--listen", f"127.0.0.1:{lport}", "--key-file", f"{d}/key", "--dir", f"{d}/logs-{lport}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(lport)
        n = [0]

        def send():
            n[0] += 1
            r = subprocess.run([horde, "send", "--dst", f"127.0.0.1:{rport}", "--rate", "100", "--size", "64", "--packets", "1",
                                "--log-server", f"127.0.0.1:{lport}", "--key-file", f"{d}/key", "--log-name", f"try{n[0]}"],
                               capture_output=True, text=True, timeout=WITHIN + 10)
            return r.returncode == 0 and "written there" in r.stdout + r.stderr
        return p, lport, send, b""

    return [("agent control port (controller's TLS handshake)", lambda: agent(False)),
            ("agent /ready (probe answered 200)", lambda: agent(True)),
            ("horde ui (request with the token answered 200)", ui),
            ("horde logd (a real send --log-server, key proved)", logd)]


RECEIVERS = []
REAL_RUN = [None]


def tries(try_once, pid):
    """20 legitimate tries one after the other: (in within 2 s, listener CPU share meanwhile)."""
    ok, c0, t0 = 0, cpu_s(pid), time.time()
    for _ in range(TRIES):
        ok += one_try(try_once)
        time.sleep(0.2)
    return ok, (cpu_s(pid) - c0) / (time.time() - t0)


def main():
    import resource
    horde, label = sys.argv[1], sys.argv[2]
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    d = tempfile.mkdtemp(prefix="horde-lockout-")
    try:
        each_listener(horde, label, d)
    finally:
        for r in RECEIVERS:
            r.kill()
            r.wait()


def each_listener(horde, label, d):
    import lockout_attacks
    for name, start in listeners(horde, d):
        # issue 47's attack: 64 silent connections from 16 addresses, reconnecting
        p, port, try_once, payload = start()
        try:
            ok, n = attack(port, try_once, payload)
            print(json.dumps({"listener": name, "attack": "silent: 64 held from 16 addresses", "ok": ok, "held": n, "build": label}), flush=True)
        finally:
            p.kill()
            p.wait()
        for attack_name, run in lockout_attacks.ATTACKS:
            p, port, try_once, _ = start()
            try:
                end = run(port)
                time.sleep(2.0)
                ok, cpu = tries(try_once, p.pid)
                row = {"listener": name, "attack": attack_name, "ok": ok, "cpu": round(cpu, 3), "build": label}
                if name.startswith("agent control port"):
                    runs = 0
                    for k in range(4):
                        try:
                            runs += int(REAL_RUN[0](k))
                        except subprocess.TimeoutExpired:
                            pass
                    row["real_runs"] = runs
                row["held"] = end()
                print(json.dumps(row), flush=True)
            finally:
                p.kill()
                p.wait()


def report(rows_file, results):
    """Writes the table of `rows_file` (JSON lines) into `results` between its lockout markers."""
    rows = [json.loads(line) for line in open(rows_file) if line.strip()]
    builds = list(dict.fromkeys(r["build"] for r in rows))
    keys = list(dict.fromkeys((r["listener"], r.get("attack", "silent: 64 held from 16 addresses")) for r in rows))
    cell = {(r["listener"], r.get("attack", "silent: 64 held from 16 addresses"), r["build"]): r for r in rows}
    machine = f"{os.cpu_count()} cores, kernel {os.uname().release}"
    out = ["<!-- lockout -->", "### D. Lockout: every attack against every TCP listener (issues 47 and 66)", "",
           f"`HORDE_OLD=/path/to/old/horde OLD_LABEL=… bash bench/lockout.sh` ({time.strftime('%Y-%m-%d')}, {machine}, loopback). "
           "Each row starts its listener afresh, runs the attack in the background (bench/lockout_attacks.py: what each "
           f"does, at what rate, from which addresses), and after 2 s {TRIES} legitimate peers try one after the other, "
           "200 ms apart. A try counts when the peer gets in within 2 s; CPU is the listener's while they try "
           "(a core = 1.0). Issue 47's row: 64 silent connections from 16 addresses held, the attackers reconnecting "
           "four at a time after each try.", "",
           "| listener | attack | " + " | ".join(f"{b}: in within 2 s" for b in builds) + " | real runs (last build) | listener CPU (last build) | attacker connections opened |",
           "|---|---|" + "---:|" * (len(builds) + 3)]
    for li, at in keys:
        vals = [f"{cell[(li, at, b)]['ok']} of {TRIES}" if (li, at, b) in cell else "-" for b in builds]
        last = cell.get((li, at, builds[-1]), {})
        cpu = f"{last['cpu']:.2f}" if "cpu" in last else "-"
        real = f"{last['real_runs']} of 4 `run --agents`" if "real_runs" in last else ("the tries are real sends" if "logd" in li and "cpu" in last else "-")
        out.append(f"| {li} | {at} | " + " | ".join(vals) + f" | {real} | {cpu} | {last.get('held', '-')} |")
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
