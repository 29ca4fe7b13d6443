#!/usr/bin/env python3
"""What an open connection costs in memory: `make bench`'s memory row (issue 16).

    conn-memory.py OUT-JSON [CONNECTIONS]

In the guest, with af_sci loaded: opens CONNECTIONS (default 100) idle connections on
127.0.0.1, client and accepted end both in one process, first over TCP (AF_INET), then
over AF_SCI (the same program under tools/sci-run; every end is checked to be in mode sci
in its fdinfo), and for
each family reads how much memory the kernel handed out for them: MemAvailable, and of it
the slab and vmalloc counters, from /proc/meminfo before and after (the slab caches shrunk
first, so that freed objects do not count), divided by the number of connections. Each
connection has two ends here; a connection between two machines costs each machine one
end's share. Closes everything and checks that the memory comes back. Prints a table and
writes OUT-JSON. Reported, not asserted: exits 1 only if a connection could not be made or
an AF_SCI end was not in mode sci.
"""

import json
import os
import socket
import subprocess
import sys
import time

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

FIELDS = ("MemAvailable", "Slab", "VmallocUsed")


def meminfo():
    """The FIELDS of /proc/meminfo in KiB, after shrinking the slab caches."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2\n")
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, value = line.split(":", 1)
            if name in FIELDS:
                out[name] = int(value.split()[0])
    return out


def settle(before, limit=30):
    """Waits until MemAvailable is back within 1 MiB of `before` (closed ends give their
    memory back from the module's kthreads, not at once); the last reading."""
    end = time.monotonic() + limit
    now = meminfo()
    while before["MemAvailable"] - now["MemAvailable"] > 1024 and time.monotonic() < end:
        time.sleep(0.2)
        now = meminfo()
    return now


def open_pairs(family, n):
    """n connected pairs (client, accepted end) on 127.0.0.1 of `family`."""
    lsock = socket.socket(family, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(n)
    port = lsock.getsockname()[1]
    pairs = []
    for _ in range(n):
        c = socket.socket(family, socket.SOCK_STREAM)
        c.connect(("127.0.0.1", port))
        a, _ = lsock.accept()
        pairs.append((c, a))
    return lsock, pairs


def modes(socks):
    """The sci-mode of each socket (from its fdinfo)."""
    out = []
    for s in socks:
        with open(f"/proc/self/fdinfo/{s.fileno()}") as f:
            m = [l.split()[1] for l in f if l.startswith("sci-mode:")]
        out.append(m[0] if m else "none")
    return out


def measure(name, family, n):
    base = meminfo()
    lsock, pairs = open_pairs(family, n)
    # A moment for the module's kthreads to finish the handshakes' bookkeeping.
    time.sleep(0.5)
    used = meminfo()
    ends = [s for p in pairs for s in p]
    seen = modes(ends)
    for s in ends:
        s.close()
    lsock.close()
    after = settle(base)
    per = {f: (base[f] - used[f] if f == "MemAvailable" else used[f] - base[f]) / n
           for f in FIELDS}
    back = base["MemAvailable"] - after["MemAvailable"]
    return {"connections": n, "kib_per_connection": per, "not_returned_kib": back,
            "modes": {m: seen.count(m) for m in set(seen)}}


def one(name, n):
    """`--one NAME N`: measure in this process (under sci-run for sci); JSON on stdout."""
    print(json.dumps(measure(name, socket.AF_INET, n)))


def main():
    if sys.argv[1:2] == ["--one"]:
        one(sys.argv[2], int(sys.argv[3]))
        return 0
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 100
    result = {}
    ok = True
    for name, run in (("tcp", []), ("sci", [os.path.join(TOP, "tools", "sci-run")])):
        r = subprocess.run(run + [sys.executable, os.path.abspath(__file__), "--one", name,
                                  str(n)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(f"conn-memory: {name}: {r.stderr.strip()}")
            ok = False
            continue
        result[name] = json.loads(r.stdout)
    if "sci" in result and result["sci"]["modes"] != {"sci": 2 * n}:
        print(f"conn-memory: not every AF_SCI end is in mode sci: {result['sci']['modes']}")
        ok = False
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"memory per open connection ({n} idle connections on 127.0.0.1, both ends in "
          f"this machine; KiB; /proc/meminfo before and after):")
    print(f"{'family':8} {'MemAvailable':>13} {'of it Slab':>11} {'VmallocUsed':>12} "
          f"{'not returned after close':>25}")
    for name, r in result.items():
        p = r["kib_per_connection"]
        print(f"{name:8} {p['MemAvailable']:13.1f} {p['Slab']:11.1f} {p['VmallocUsed']:12.1f} "
              f"{r['not_returned_kib']:25d}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
