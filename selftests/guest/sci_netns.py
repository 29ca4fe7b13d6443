#!/usr/bin/env python3
"""AF_SCI sockets and counters are per network namespace (sci-privileges netns-sockets).

In the initial namespace: a listener on 127.0.0.1:5391 and a connection to it. In a new
network namespace (unshare --net, this script again with "inner"): the same on port 5390.
Each namespace's scictl must list its own sockets and not the other's, and the new
namespace's stats must count its three sockets only. Exit 0 when both hold. Runs under
sci-run (Python's socket module does not know AF_SCI's number: it asks for AF_INET, which
the preload turns into AF_SCI; scictl lists only AF_SCI sockets)."""
import json
import os
import socket
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCICTL = f"{TOP}/tools/target/release/scictl"


def pair(port):
    """A listener, a connection to it and the accepted end (kept open by the caller)."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", port))
    ls.listen(1)
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.connect(("127.0.0.1", port))
    a, _ = ls.accept()
    return [ls, c, a]


def seen():
    """The local ports of the AF_SCI sockets scictl lists here, and the stats' socket count."""
    socks = json.loads(subprocess.check_output([SCICTL, "--json", "sockets"]))
    stats = json.loads(subprocess.check_output([SCICTL, "--json", "stats"]))
    return sorted({s["local"]["port"] for s in socks if s["local"]}), stats["sockets"]


def inner():
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    held = pair(5390)
    ports, count = seen()
    print(json.dumps({"ports": ports, "sockets": count}), flush=True)
    sys.stdin.read()  # until the outer side has looked too
    for s in held:
        s.close()


def main():
    held = pair(5391)
    p = subprocess.Popen(["unshare", "--net", sys.executable, __file__, "inner"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    got = json.loads(p.stdout.readline())
    ports, _ = seen()
    p.stdin.close()
    p.wait()
    for s in held:
        s.close()
    print(f"new namespace: ports {got['ports']}, {got['sockets']} sockets counted; "
          f"initial namespace: ports {ports}")
    ok = (5390 in got["ports"] and 5391 not in got["ports"] and got["sockets"] == 3
          and 5391 in ports and 5390 not in ports)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(inner() if sys.argv[1:] == ["inner"] else main())
