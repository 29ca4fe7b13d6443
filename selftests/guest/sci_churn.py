#!/usr/bin/env python3
"""Connection churn over AF_SCI: many short connections of every kind, as fast as the guest
goes, with every reply checked (selftests/guest/sci-churn runs it under sci-run).

  sci_churn.py serve HOST PORT READY
      An epoll echo server (level-triggered, non-blocking): echoes what each connection
      sends and closes it when the client has shut down its side. Writes READY once
      listening; runs until killed.

  sci_churn.py churn HOST PORT SECONDS SEED PROCS
      PROCS processes, each for SECONDS, make connections one after another, each of a
      kind the seeded generator picks:
        full    send a request (1 B..8 KiB), read the echo, check it, close
        half    send, shutdown(SHUT_WR), read the echo up to EOF, check it, close
        abort   send, read the echo, check it, close with SO_LINGER 0 (a reset)
        early   send and close without reading (the server's echo meets a closed socket)
        connect connect and close at once, nothing sent
        nbclose a non-blocking connect, closed before it completes
      Prints one JSON line: connections per kind, per second, errors; exit 1 if any
      reply was wrong or a call failed where it must not.
"""
import errno
import json
import os
import random
import select
import socket
import struct
import sys
import time

KINDS = ("full", "half", "abort", "early", "connect", "nbclose")
# CHURN_KINDS=half,abort: only these (to chase a failure).
if os.environ.get("CHURN_KINDS"):
    KINDS = tuple(k for k in KINDS if k in os.environ["CHURN_KINDS"].split(","))


def serve(host, port, ready):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # AF_SCI under sci-run
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(1024)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    conns = {}  # fd -> [socket, bytes to echo, peer shut down, bytes received]
    open(ready, "w").close()
    while True:
        for fd, ev in ep.poll():
            if fd == ls.fileno():
                while True:
                    try:
                        c, _ = ls.accept()
                    except BlockingIOError:
                        break
                    except OSError:
                        break  # ECONNABORTED and the like: the client gave up
                    c.setblocking(False)
                    conns[c.fileno()] = [c, b"", False, 0]
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            st = conns.get(fd)
            if st is None:
                continue
            c = st[0]
            done = False
            try:
                if ev & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR):
                    data = c.recv(65536)
                    if data:
                        st[1] += data
                        st[3] += len(data)
                    else:
                        st[2] = True
                if st[1]:
                    n = c.send(st[1])
                    st[1] = st[1][n:]
                if st[1]:
                    ep.modify(fd, select.EPOLLIN | select.EPOLLOUT)
                elif st[2]:
                    done = True  # the client shut down its side, and all is echoed
                else:
                    ep.modify(fd, select.EPOLLIN)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                # Expected of clients that reset or close unread; logged for a failure's
                # diagnosis.
                print(f"serve: fd {fd}: {e!r} after {st[3]} B in, {len(st[1])} B unsent, "
                      f"eof {st[2]}", file=sys.stderr, flush=True)
                done = True
            if done:
                ep.unregister(fd)
                del conns[fd]
                c.close()


def recv_exact(s, n):
    got = bytearray()
    while len(got) < n:
        b = s.recv(n - len(got))
        if not b:
            break
        got += b
    return bytes(got)


def one(af, addr, kind, rng):
    """One connection of `kind`; returns None when it went as it must, else why not."""
    if kind == "nbclose":
        s = socket.socket(af, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(addr)
        except (BlockingIOError, InterruptedError):
            pass
        s.close()
        return None
    s = socket.socket(af, socket.SOCK_STREAM)
    s.settimeout(30)
    try:
        s.connect(addr)
        if kind == "connect":
            return None
        req = rng.randbytes(rng.randint(1, 8192))
        s.sendall(req)
        if kind == "early":
            return None
        if kind == "half":
            s.shutdown(socket.SHUT_WR)
            got = recv_exact(s, len(req) + 1)
        else:
            got = recv_exact(s, len(req))
        if got != req:
            return f"{kind}: echo of {len(req)} B came back as {len(got)} B, " \
                   f"{'equal' if got[:len(req)] == req else 'different'} bytes " \
                   f"(from port {s.getsockname()[1]})"
        if kind == "abort":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return None
    except OSError as e:
        return f"{kind}: {errno.errorcode.get(e.errno, e.errno)} ({e})"
    finally:
        s.close()


def churn_proc(af, addr, seconds, seed, out):
    rng = random.Random(seed)
    counts = dict.fromkeys(KINDS, 0)
    bad = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        kind = rng.choice(KINDS)
        why = one(af, addr, kind, rng)
        counts[kind] += 1
        if why:
            bad.append(why)
    os.write(out, (json.dumps({"counts": counts, "bad": bad[:20], "nbad": len(bad)}) + "\n").encode())


def churn(host, port, seconds, seed, procs):
    af = socket.AF_INET  # rewritten to AF_SCI by the preload
    r, w = os.pipe()
    pids = []
    t0 = time.monotonic()
    for i in range(procs):
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                churn_proc(af, (host, port), seconds, seed * 1000 + i, w)
            finally:
                os._exit(0)
        pids.append(pid)
    os.close(w)
    status = [os.waitpid(p, 0)[1] for p in pids]
    took = time.monotonic() - t0
    lines = os.fdopen(r).read().splitlines()
    counts = dict.fromkeys(KINDS, 0)
    bad, nbad = [], 0
    for line in lines:
        d = json.loads(line)
        for k, v in d["counts"].items():
            counts[k] += v
        bad += d["bad"]
        nbad += d["nbad"]
    total = sum(counts.values())
    print(json.dumps({"seed": seed, "procs": procs, "seconds": round(took, 1),
                      "connections": total, "per_second": round(total / took),
                      "counts": counts, "errors": nbad, "first_errors": bad[:10],
                      "crashed": sum(1 for s in status if s != 0) + procs - len(lines)}))
    return 0 if nbad == 0 and len(lines) == procs and all(s == 0 for s in status) else 1


def main():
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return 0
    if sys.argv[1:2] == ["churn"]:
        host, port, seconds, seed, procs = sys.argv[2:7]
        return churn(host, int(port), float(seconds), int(seed), int(procs))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
