#!/usr/bin/env python3
"""The failover row of `make bench` (selftests/bench/bench-pair): what a stream sees when
its fabric link is dropped under it and the connection moves onto TCP.

  failover-pause.py serve HOST PORT
      In guest B, under sci-run: sends a stream of 64 KiB blocks to every connection
      until the reader closes it.

  failover-pause.py measure HOST PORT OUT.json [--drop NODE --scictl SCICTL]
      In guest A: connects to that server and reads for READ_S s. Without --drop (a
      plain client: the connection is TCP) that is the TCP baseline. With --drop (under
      sci-run: the connection must be in mode sci), after BEFORE_S s it runs `scictl
      drop-link NODE` (as a failed link, in a thread: the reads go on), reads until
      SCI_INFO says the socket moved (mode native, reason failover), then AFTER_S s more.

From the time of every read it reports (OUT.json): the throughput before the loss, in
the second after it and once on TCP (from 1 s after the move, when TCP has ramped up);
the pause (ms from the loss to the first byte read over TCP, which is the first read
after the ring was read to its end, when SCI_INFO changes); the longest gap between two
reads across the loss; and how many ms the move itself took (to SCI_INFO's change). The
loss is taken to be when `scictl drop-link` returned (most of that call is starting
scictl in a TCG guest).
Timings are TCG guests': compare them within one run only.
"""
import json
import socket
import struct
import subprocess
import sys
import threading
import time

SOL_SCI, SCI_INFO = 300, 1
MODE_SCI, MODE_NATIVE, REASON_FAILOVER = 1, 0, 8
BLOCK = 64 << 10
BEFORE_S, AFTER_S, READ_S = 3.0, 3.0, 3.0
MOVE_LIMIT_S = 30.0


def info(sock):
    mode, reason, _, _ = struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))
    return mode, reason


def serve(host, port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(8)
    print(f"failover-pause: serving on {host}:{port}", flush=True)
    data = bytes(BLOCK)

    def stream(conn):
        try:
            while True:
                conn.sendall(data)
        except OSError:
            pass
        conn.close()

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=stream, args=(conn,), daemon=True).start()


def mibs(reads, start, end):
    """MiB/s of the reads in [start, end)."""
    n = sum(b for t, b in reads if start <= t < end)
    return round(n / (end - start) / (1 << 20), 1) if end > start else None


def measure(host, port, drop, scictl):
    s = socket.create_connection((host, port), timeout=MOVE_LIMIT_S)
    buf = bytearray(BLOCK)
    reads = []  # (time, bytes)
    result = {"drop": drop is not None}
    start = time.monotonic()
    if drop is None:
        while time.monotonic() - start < READ_S:
            n = s.recv_into(buf)
            if not n:
                break
            reads.append((time.monotonic(), n))
        s.close()
        result["tcp_mibs"] = mibs(reads, start + 1.0, start + READ_S)
        return result
    mode = info(s)
    result["mode_before"] = "sci" if mode[0] == MODE_SCI else f"mode {mode[0]}"
    if mode[0] != MODE_SCI:
        s.close()
        result["error"] = f"the connection is not SCI ({mode})"
        return result
    dropped = {}

    def run_drop():
        dropped["t0"] = time.monotonic()
        r = subprocess.run([scictl, "drop-link", str(drop)], capture_output=True, text=True)
        dropped["t1"] = time.monotonic()
        dropped["status"] = r.returncode
        dropped["output"] = (r.stdout + r.stderr).strip()

    dropper = None
    moved = None
    while True:
        now = time.monotonic()
        if dropper is None and now - start >= BEFORE_S:
            dropper = threading.Thread(target=run_drop)
            dropper.start()
        if moved is not None and now - moved >= AFTER_S:
            break
        if dropper is not None and moved is None and now - start > BEFORE_S + MOVE_LIMIT_S:
            break
        n = s.recv_into(buf)
        t = time.monotonic()
        if not n:
            break
        reads.append((t, n))
        if dropper is not None and moved is None and info(s) == (MODE_NATIVE, REASON_FAILOVER):
            moved = t
    s.close()
    if dropper is not None:
        dropper.join()
    t0 = dropped.get("t0")
    result["drop_status"] = dropped.get("status")
    result["drop_output"] = dropped.get("output")
    if t0 is None or moved is None or dropped.get("status") != 0:
        result["error"] = "the connection did not move onto TCP" if t0 else "no drop"
        return result
    # The link is down once `scictl drop-link` returned (most of the call is starting the
    # program): the times are counted from there, a lower bound by the netlink call.
    lost = dropped["t1"]
    after = [t for t, _ in reads if t > moved]
    gaps = [b - a for (a, _), (b, _) in zip(reads, reads[1:]) if b > t0 and a < moved + 1.0]
    result.update({
        "before_mibs": mibs(reads, t0 - 2.0, t0),
        "during_mibs": mibs(reads, lost, lost + 1.0),
        "after_mibs": mibs(reads, moved + 1.0, moved + AFTER_S),
        "move_ms": round((moved - lost) * 1000, 1),
        "pause_ms": round(((after[0] if after else moved) - lost) * 1000, 1),
        "longest_gap_ms": round(max(gaps, default=0.0) * 1000, 1),
        "drop_call_ms": round((dropped["t1"] - t0) * 1000, 1),
    })
    return result


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
        return 0
    if len(sys.argv) < 5 or sys.argv[1] != "measure":
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    host, port, out = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    opts = dict(zip(sys.argv[5::2], sys.argv[6::2]))
    drop = int(opts["--drop"]) if "--drop" in opts else None
    result = measure(host, port, drop, opts.get("--scictl", "scictl"))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"failover-pause: {json.dumps(result)}")
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
