#!/usr/bin/env python3
"""A connect request served after its connect gave up, run under sci-run with af_sci
freshly loaded (selftests/guest/guest-suite).

  sci_late_request.py SCICTL

Within one node (the loopback fabric) a connect that gives up frees its channel at once,
and the next connection may take it. A listener's end receives on a queue tagged with its
client's generation, and generations are per channel, so the new holder of the channel
can carry the very generation the late request names: the check of the requester's
receive area (generation and start, and the start was the same for every connection)
then passed, and the listener node wired a new end into *another* connection's ring.
Now the start names the connecting end, and within one node the requester is also looked
up in the node's own table; either is enough for this test. When that stray end was reset and closed (its connector was gone),
its close landed in the other connection, whose peer read an EOF or a reset instead of
its echo (make test's churn: one lost echo in thousands of connections, under load).

This test builds that collision on purpose, with the `test_hold_frames` module parameter
holding the listener kthread's inbox (requests are then served in order, later):

  1. held: X connects (channel 0, generation 2), then L connects (channel 1,
     generation 2) and gives up at once (close): channel 1 is free;
  2. released: X's request is served first; its listener end takes the first free
     channel, 1, with X's generation 2; then L's late request names channel 1,
     generation 2, and finds a receive area that looks like its own;
  3. once X is connected (its answer came after L's request), a third connect (Z): once
     it is accepted, whatever L's request left in the listener's queue is there too.

Checks: no connection from L's port reaches accept(); every accepted one is closed by the
server the way a server closes what it does not want; X's connection then carries 1 MiB
each way intact, and both ends are SCI. Needs a freshly loaded module (no connection made
yet), which the suite provides right after its second insmod; every wait is bounded.
"""
import errno
import json
import select
import socket
import struct
import subprocess
import sys

from sci_churn import recv_exact  # its bytes, short only at the end of the stream

SOL_SCI, SCI_INFO = 300, 1
HOLD = "/sys/module/af_sci/parameters/test_hold_frames"
LIMIT = 30  # seconds any one wait may take before it counts as a hang
BLOCK = bytes(range(256)) * 4096  # 1 MiB
CHUNK = BLOCK[: 64 << 10]

failed = False


def expect(cond, what):
    global failed
    print(f"{'ok' if cond else 'FAIL'}: {what}", flush=True)
    failed |= not cond


def hold(on):
    with open(HOLD, "w") as f:
        f.write("1" if on else "0")


def mode(sock):
    m = struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))[0]
    return {0: "native", 1: "sci"}.get(m, str(m))


def start_connect(addr):
    s = socket.socket()
    s.setblocking(False)
    rc = s.connect_ex(addr)
    if rc != errno.EINPROGRESS:
        sys.exit(f"FAIL: a non-blocking connect returned {errno.errorcode.get(rc, rc)}, "
                 "not EINPROGRESS (is the SCI path on?)")
    return s


def finish_connect(s):
    _, w, _ = select.select([], [s], [], LIMIT)
    if not w:
        return "no answer in time"
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return errno.errorcode.get(err, str(err)) if err else None


def exchange(client, served):
    """1 MiB from client to server in 64 KiB round trips, each echoed back; True when
    every byte arrives intact both ways."""
    client.setblocking(True)
    client.settimeout(LIMIT)
    served.settimeout(LIMIT)
    for i in range(len(BLOCK) // len(CHUNK)):
        try:
            client.sendall(CHUNK)
            got = recv_exact(served, len(CHUNK))
            if got == CHUNK:
                served.sendall(got)
            back = recv_exact(client, len(CHUNK))
        except OSError as e:
            print(f"# round trip {i}: {e!r}", flush=True)
            return False
        if got != CHUNK or back != CHUNK:
            print(f"# round trip {i}: the server got {len(got)} B, the client {len(back)} B "
                  f"back, of {len(CHUNK)}", flush=True)
            return False
    return True


def main():
    scictl = sys.argv[1]
    stats = json.loads(subprocess.run([scictl, "--json", "stats"], check=True,
                                      capture_output=True, text=True).stdout)
    if stats["sci_connections"] != 0:
        sys.exit("FAIL: needs a freshly loaded af_sci (it counts "
                 f"{stats['sci_connections']} SCI connections already)")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    addr = srv.getsockname()

    hold(True)
    try:
        x = start_connect(addr)
        late = start_connect(addr)
        late_port = late.getsockname()[1]
        late.close()
    finally:
        hold(False)
    # X's answer comes after L's request in the inbox: once X is connected, L's late
    # request has been served (and the channels taken are the ones step 2 says).
    expect(finish_connect(x) is None, "X's connect completes once the listener is served")
    z = socket.create_connection(addr, timeout=LIMIT)

    srv.settimeout(LIMIT)
    accepted = {}
    while True:
        c, peer = srv.accept()
        accepted[peer[1]] = c
        if peer[1] == z.getsockname()[1]:
            break
    srv.setblocking(False)
    while True:  # anything else queued by now
        try:
            c, peer = srv.accept()
        except BlockingIOError:
            break
        accepted[peer[1]] = c
    expect(late_port not in accepted,
           f"nothing from the port of the connect that gave up ({late_port}) reaches accept()")
    x_port = x.getsockname()[1]
    served = accepted.pop(x_port, None)
    expect(served is not None, "X's connection reaches accept()")
    for c in accepted.values():
        c.close()  # as a server closes what it does not serve (the stray end: reset)
    if served is None:
        sys.exit(1)
    expect(mode(x) == "sci" and mode(served) == "sci", "both ends of X's connection are SCI")
    expect(exchange(x, served),
           "X's connection carries 1 MiB each way intact after the others closed")
    for s in (x, served, z, srv):
        s.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
