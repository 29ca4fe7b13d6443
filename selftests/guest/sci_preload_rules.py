#!/usr/bin/env python3
"""The SCI_FABRIC socket option and the preload's rules (/etc/af_sci/preload.conf).

  SCI_PRELOAD_CONF=/dev/null sci-run sci_preload_rules.py SCICTL SCI_RUN

- SCI_FABRIC on an AF_SCI socket: 1 by default; 0 before connect() keeps the connection
  on TCP with reason opted-out; 0 before listen() keeps the listener off the fabric (an
  AF_SCI client falls back, the accepted end is peer-tcp); EISCONN once connected,
  EINVAL for a value other than 0 and 1.
- The preload's rules, through SCI_PRELOAD_CONF (unmodified python3 programs under
  sci-run): a rule for the whole program keeps its sockets AF_INET; a connect rule keeps
  the connects it matches on TCP (opted-out) and no other; a listen rule keeps the
  listener off the fabric; a file with an error keeps every socket AF_INET and SCI_DEBUG
  names the line; scictl load --check names it too; sci-run --dry-run tells each case.

Every step waits for the event it needs (a file the server writes once it listens).
Exit status 0 only if every check passed.
"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

SOL_SCI = 300
SCI_INFO = 1
SCI_FABRIC = 4
MODE_SCI, MODE_NATIVE = 1, 0
REASONS = {0: "none", 4: "peer-rejected", 7: "peer-tcp", 9: "opted-out"}
FAMILY = int(open("/sys/module/af_sci/parameters/family").read())
SCICTL, SCI_RUN = sys.argv[1], sys.argv[2]
failed = False


def expect(cond, what):
    global failed
    print(f"{'ok' if cond else 'FAIL'}: {what}", flush=True)
    failed |= not cond


def info(s):
    mode, reason, _, _ = struct.unpack("4I", s.getsockopt(SOL_SCI, SCI_INFO, 16))
    return ("sci" if mode == MODE_SCI else "native", REASONS.get(reason, str(reason)))


def sci_socket():
    # This script runs under sci-run (with no rules): python's TCP sockets are AF_SCI.
    s = socket.socket()
    assert s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN) == FAMILY, "not under sci-run"
    return s


def sci_listener(port, fabric=1):
    s = sci_socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if not fabric:
        s.setsockopt(SOL_SCI, SCI_FABRIC, 0)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    return s


def the_option():
    srv = sci_listener(5411)
    c = sci_socket()
    expect(c.getsockopt(SOL_SCI, SCI_FABRIC) == 1, "SCI_FABRIC reads 1 on a new socket")
    for bad in (2, -1):
        try:
            c.setsockopt(SOL_SCI, SCI_FABRIC, bad)
            expect(False, f"SCI_FABRIC {bad} is refused")
        except OSError as e:
            expect(e.errno == 22, f"SCI_FABRIC {bad} is refused with EINVAL ({e.errno})")
    c.setsockopt(SOL_SCI, SCI_FABRIC, 0)
    expect(c.getsockopt(SOL_SCI, SCI_FABRIC) == 0, "SCI_FABRIC reads 0 once set")
    c.connect(("127.0.0.1", 5411))
    a, _ = srv.accept()
    expect(info(c) == ("native", "opted-out"), f"a connect with SCI_FABRIC 0 stays on TCP, opted-out ({info(c)})")
    expect(info(a) == ("native", "peer-tcp"), f"... and its accepted end is peer-tcp ({info(a)})")
    c.sendall(b"x" * 1000)
    expect(a.recv(1000, socket.MSG_WAITALL) == b"x" * 1000, "... and carries bytes")
    d = sci_socket()
    d.connect(("127.0.0.1", 5411))
    try:
        d.setsockopt(SOL_SCI, SCI_FABRIC, 0)
        expect(False, "SCI_FABRIC after connect is refused")
    except OSError as e:
        expect(e.errno == 106, f"SCI_FABRIC after connect is refused with EISCONN ({e.errno})")
    b, _ = srv.accept()
    expect(info(d) == ("sci", "none"), f"a connect without it is SCI ({info(d)})")
    for s in (a, b, c, d, srv):
        s.close()
    # A listener that opted out takes TCP connections only.
    srv = sci_listener(5415, fabric=0)
    c = sci_socket()
    c.connect(("127.0.0.1", 5415))
    a, _ = srv.accept()
    expect(info(c) == ("native", "peer-rejected"),
           f"an AF_SCI client of a listener with SCI_FABRIC 0 falls back ({info(c)})")
    expect(info(a) == ("native", "peer-tcp"), f"... and the accepted end is peer-tcp ({info(a)})")
    for s in (a, c, srv):
        s.close()


# A program under sci-run: it reports its sockets' domain and SCI_INFO as JSON lines.
CLIENT = r"""
import json, socket, struct, sys
out = {}
for port in map(int, sys.argv[1:]):
    s = socket.socket()
    dom = s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
    s.connect(("127.0.0.1", port))
    mode, reason = (None, None)
    if dom != socket.AF_INET:
        mode, reason, _, _ = struct.unpack("4I", s.getsockopt(300, 1, 16))
    out[port] = [dom, mode, reason]
print(json.dumps(out))
"""

SERVER = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
open(sys.argv[2], "w").close()
held = [s.accept()[0] for _ in range(int(sys.argv[3]))]
time.sleep(0.2)
"""


def run_client(conf, ports, debug=False):
    env = dict(os.environ, SCI_PRELOAD_CONF=conf)
    if debug:
        env["SCI_DEBUG"] = "1"
    r = subprocess.run([SCI_RUN, "python3", "-c", CLIENT, *map(str, ports)], env=env,
                       capture_output=True, text=True, timeout=60)
    return {int(k): v for k, v in json.loads(r.stdout or "{}").items()}, r.stderr


def the_rules(work):
    listeners = [sci_listener(p) for p in (5412, 5413)]
    conf = os.path.join(work, "preload.conf")

    open(conf, "w").write("# the whole program\ntcp python3\n")
    got, _ = run_client(conf, [5412])
    expect(got.get(5412, [None])[0] == socket.AF_INET,
           f"'tcp python3': python3's socket stays AF_INET under sci-run ({got})")

    open(conf, "w").write("tcp * connect 127.0.0.1 5412\ntcp * listen * 5414\n")
    got, err = run_client(conf, [5412, 5413], debug=True)
    expect(got.get(5412) == [FAMILY, MODE_NATIVE, 9],
           f"a connect rule keeps the connect it matches on TCP, opted-out ({got.get(5412)})")
    expect(got.get(5413) == [FAMILY, MODE_SCI, 0], f"... and no other ({got.get(5413)})")
    expect("stays TCP (preload.conf:1)" in err, f"SCI_DEBUG names the rule ({err.strip()})")

    # A listen rule: the server under sci-run is AF_SCI but off the fabric.
    ready = os.path.join(work, "ready")
    env = dict(os.environ, SCI_PRELOAD_CONF=conf)
    srv = subprocess.Popen([SCI_RUN, "python3", "-c", SERVER, "5414", ready, "1"], env=env)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and srv.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    socks = json.loads(subprocess.check_output([SCICTL, "--json", "sockets", "sport", ":5414"]))
    lst = [s["fallback"] for s in socks if s["state"] == "LISTEN"]
    expect(lst == ["opted-out"], f"a listen rule keeps the listener off the fabric ({lst})")
    c = sci_socket()
    c.connect(("127.0.0.1", 5414))
    expect(info(c) == ("native", "peer-rejected"), f"... and its clients fall back ({info(c)})")
    c.close()
    srv.wait(timeout=60)

    open(conf, "w").write("tcp sshd\ntcp x conect\n")
    got, err = run_client(conf, [5413], debug=True)
    expect(got.get(5413, [None])[0] == socket.AF_INET,
           f"a rule file with an error keeps every socket AF_INET ({got})")
    expect(":2: 'conect' is not a role" in err, f"... and SCI_DEBUG names the line ({err.strip()})")
    r = subprocess.run([SCICTL, "load", "--check", "--nodes", "/dev/null", "--ports", "/dev/null",
                        "--preload", conf], capture_output=True, text=True)
    expect(r.returncode == 1 and f"{conf}:2: 'conect' is not a role" in r.stderr,
           f"scictl load --check names the line ({r.returncode}: {r.stderr.strip()})")

    open(conf, "w").write("tcp sshd\ntcp * connect 10.1.0.0/16 5432\n")
    env = dict(os.environ, SCI_PRELOAD_CONF=conf)
    out = subprocess.run([SCI_RUN, "--dry-run", "/usr/sbin/sshd", "-D"], env=env,
                         capture_output=True, text=True).stdout
    expect(f"stay TCP ({conf}:1)" in out, f"sci-run --dry-run: sshd stays TCP ({out.strip()})")
    out = subprocess.run([SCI_RUN, "-n", "psql"], env=env, capture_output=True, text=True).stdout
    expect("each connect and listen" in out and f"{conf}:2: tcp * connect" in out,
           f"sci-run --dry-run: psql asks the rules per socket ({out.strip()})")
    for s in listeners:
        s.close()


with tempfile.TemporaryDirectory() as work:
    the_option()
    the_rules(work)
sys.exit(1 if failed else 0)
