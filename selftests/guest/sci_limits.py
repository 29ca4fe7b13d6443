#!/usr/bin/env python3
"""Limits of the SCI data path, run under sci-run with af_sci loaded (selftests/guest/guest-suite).

  sci_limits.py backpressure SCICTL
      A writer fills one SCI connection until the ring is full: a non-blocking send
      reports EAGAIN after about one ring, a blocking writer then advances only as a slow
      reader drains, every byte arrives once and in order (checksummed), and scictl shows
      the reader's queue fill while the pipe is full.

  sci_limits.py exhaustion
      Opens connections until the fabric has no connection slot left: the next
      connections fall back to TCP with reason no-memory and still carry bytes; once
      SCI connections are closed, new connections take the SCI path again.

  sci_limits.py spin
      The SCI_SPIN_US socket option and the spin_us module parameter: the adaptive
      default, values, limits, errors, and ping-pong plus a checksummed stream with waits
      that spin first (a fixed spin, then adaptive spinning).

  sci_limits.py refusals SCICTL
      A destination without an AF_SCI listener (a plain TCP server) refuses the SCI
      connect: the refusal is remembered for refusal_ms, and connects to it meanwhile fall
      back at once (scictl stats: peer-rejected, and refusals remembered); an AF_SCI
      listener that opens on that port ends it at once; refusal_ms=0 remembers nothing.

  sci_limits.py wait-race
      An edge-triggered epoll echo server reads until EAGAIN while its client sends the
      next request at once; the test_wait_race_us module parameter holds each empty look
      open for 2 ms before the reader posts its wait request, so most requests come in
      that window and ring no doorbell. Every one must still be read (never EAGAIN with
      bytes in the ring, which would leave the server waiting for an edge that never
      comes): 300 rounds, each within 10 s. Then the writer's side: an edge-triggered
      writer fills the ring to EAGAIN and waits for EPOLLOUT while a reader drains it,
      the space freed in the same window: 16 MiB must go through, checksummed.

Every connection's mode is read through SCI_INFO, so a silent fallback fails the test.
Exit status 0 only if every check passed.
"""
import contextlib
import fcntl
import hashlib
import json
import os
import resource
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

SOL_SCI, SCI_INFO, SCI_SPIN_US = 300, 1, 3
PARAMS = "/sys/module/af_sci/parameters"
MODE_SCI = 1
REASONS = {0: "none", 1: "no-fabric", 2: "not-mapped", 3: "port-excluded",
           4: "peer-rejected", 5: "no-memory", 6: "timeout", 7: "peer-tcp", 8: "failover"}
RING = 256 << 10  # the receive ring of each connection end (rust/sci_conn.rs RING_LOG2)


def param(name):
    """af_sci's module parameter `name`, as its sysfs file reads."""
    with open(f"{PARAMS}/{name}") as f:
        return f.read().strip()


def set_param(name, value):
    with open(f"{PARAMS}/{name}", "w") as f:
        f.write(str(value))


def info(sock):
    mode, reason, _, _ = struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))
    return mode, REASONS.get(reason, str(reason))


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


def pair(listener):
    cli = socket.create_connection(listener.getsockname())
    acc, _ = listener.accept()
    return cli, acc


def listener():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1024)
    return srv


def backpressure(scictl):
    srv = listener()
    cli, acc = pair(srv)
    expect(info(cli)[0] == MODE_SCI and info(acc)[0] == MODE_SCI, "both ends are SCI")
    block = hashlib.sha256(b"backpressure").digest() * 2048  # 64 KiB
    sent = hashlib.sha256()

    # Non-blocking: the writer stops with EAGAIN once the peer's ring is full.
    cli.setblocking(False)
    queued = 0
    try:
        while True:
            n = cli.send(block)
            sent.update(block[:n])
            queued += n
    except BlockingIOError:
        pass
    expect(RING // 2 <= queued <= RING, f"a full ring stops a non-blocking writer ({queued} bytes queued)")

    # scictl sees the reader's queue fill while the pipe is full.
    port = acc.getsockname()[1]
    socks = json.loads(subprocess.check_output([scictl, "--json", "sockets"]))
    fills = [s["queue_fill"] for s in socks if s["local"] and s["local"]["port"] == port
             and s["peer"] and s["peer"]["port"] == cli.getsockname()[1]]
    expect(fills == [queued], f"scictl sockets shows the reader's queue fill ({fills}, expected [{queued}])")
    # ... and the queues as ss shows them: the reader's Recv-Q is that fill, the writer's
    # Send-Q what SIOCOUTQ says (TCP's write_seq - snd_una).
    outq = struct.unpack("i", fcntl.ioctl(cli, termios.TIOCOUTQ, b"\0" * 4))[0]
    ends = {(s["local"]["port"], s["recv_q"], s["send_q"]) for s in socks
            if s["local"] and s["peer"] and {s["local"]["port"], s["peer"]["port"]} == {port, cli.getsockname()[1]}}
    want = {(port, queued, 0), (cli.getsockname()[1], 0, outq)}
    expect(ends == want, f"scictl sockets: Recv-Q and Send-Q of both ends ({ends}, expected {want})")
    # A listener's Recv-Q counts the connections waiting for accept(), its Send-Q is
    # its backlog (1024).
    waiting = [socket.create_connection(srv.getsockname()) for _ in range(2)]
    deadline = time.monotonic() + 30
    while True:
        socks = json.loads(subprocess.check_output([scictl, "--json", "sockets"]))
        lst = [(s["recv_q"], s["send_q"]) for s in socks
               if s["state"] == "LISTEN" and s["local"]["port"] == srv.getsockname()[1]]
        if lst == [(2, 1024)] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    expect(lst == [(2, 1024)], f"scictl sockets: a listener's Recv-Q and Send-Q ({lst}, expected [(2, 1024)])")
    for w in waiting:
        srv.accept()[0].close()
        w.close()

    # Blocking: the writer advances only as the slow reader drains.
    cli.setblocking(True)
    total = queued + 4 * RING
    progress = {"written": queued}

    def writer():
        while progress["written"] < total:
            chunk = block[: min(len(block), total - progress["written"])]
            cli.sendall(chunk)
            sent.update(chunk)
            progress["written"] += len(chunk)
        cli.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.5)
    stalled = progress["written"]
    expect(stalled <= queued + len(block), f"the blocked writer waits for the reader ({stalled - queued} more bytes)")
    got = hashlib.sha256()
    received = 0
    max_ahead = 0
    while True:
        data = acc.recv(4096)  # a slow reader: small reads, with pauses
        if not data:
            break
        got.update(data)
        received += len(data)
        max_ahead = max(max_ahead, progress["written"] - received)
        if received % (64 << 10) < 4096:
            time.sleep(0.01)
    t.join()
    expect(max_ahead <= RING + len(block), f"the writer never ran more than a ring ahead ({max_ahead} bytes)")
    expect(received == total, f"every byte arrived once ({received} of {total})")
    expect(got.hexdigest() == sent.hexdigest(), "in order and intact (SHA-256)")
    for s in (cli, acc, srv):
        s.close()


def exhaustion():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 8192), max(hard, 8192)))
    srv = listener()
    held, fell_back = [], []
    # Both ends of a loopback connection take a slot of this node's table (1024).
    for _ in range(1100):
        cli, acc = pair(srv)
        mode, reason = info(cli)
        if mode == MODE_SCI:
            expect_mode = info(acc)[0] == MODE_SCI
            if not expect_mode:
                sys.exit("FAIL: an SCI client with a native server end")
            held.append((cli, acc))
            continue
        fell_back.append((cli, acc, reason))
        if len(fell_back) == 8:
            break
    print(f"{len(held)} SCI connections, then {len(fell_back)} fallbacks")
    expect(len(held) >= 256, f"hundreds of SCI connections fit ({len(held)})")
    expect(fell_back and all(r == "no-memory" for _, _, r in fell_back),
           f"the connections beyond fall back with no-memory ({[r for _, _, r in fell_back]})")
    for cli, acc, _ in fell_back:
        cli.sendall(b"over tcp")
        if acc.recv(8) != b"over tcp" or info(acc)[1] != "peer-tcp":
            sys.exit("FAIL: a fallen-back connection does not carry bytes over TCP")
    print("ok: the fallen-back connections carry bytes over TCP")
    for cli, acc in held[:16]:
        cli.sendall(b"x")
        if acc.recv(1) != b"x":
            sys.exit("FAIL: an SCI connection stopped working at the limit")
    print("ok: the SCI connections keep working at the limit")
    for cli, acc in held[:8]:
        cli.close()
        acc.close()
    cli, acc = pair(srv)
    expect(info(cli)[0] == MODE_SCI, "after some SCI connections closed, a new one takes the SCI path again")


def spin():
    def get(s):
        return struct.unpack("i", s.getsockopt(SOL_SCI, SCI_SPIN_US, 4))[0]

    srv = listener()
    cli, acc = pair(srv)
    expect(info(cli)[0] == MODE_SCI, "the connection is SCI")
    expect(param("spin_us") == "-1", "spin_us is -1 (adaptive) by default")
    expect(get(cli) == -1, "a new socket spins adaptively (SCI_SPIN_US reads -1)")
    set_param("spin_us", 0)
    expect(get(cli) == 0, "a new socket follows the module parameter (0)")
    set_param("spin_us", 7)
    expect(get(cli) == 7, "... and its changes (7)")
    cli.setsockopt(SOL_SCI, SCI_SPIN_US, 50)
    set_param("spin_us", 9)
    expect(get(cli) == 50, "SCI_SPIN_US 50 sticks, whatever the parameter says")
    cli.setsockopt(SOL_SCI, SCI_SPIN_US, -1)
    expect(get(cli) == 9, "SCI_SPIN_US -1 follows the parameter again")
    for bad in (-2, 10001):
        try:
            cli.setsockopt(SOL_SCI, SCI_SPIN_US, bad)
            sys.exit(f"FAIL: SCI_SPIN_US {bad} accepted")
        except OSError as e:
            expect(e.errno == 22, f"SCI_SPIN_US {bad}: EINVAL")
    try:
        cli.setsockopt(SOL_SCI, SCI_SPIN_US, b"\x01")
        sys.exit("FAIL: a 1-byte SCI_SPIN_US accepted")
    except OSError as e:
        expect(e.errno == 22, "a short SCI_SPIN_US: EINVAL")
    # Waits that spin first: ping-pong, and a stream through a full ring, both checked;
    # with a fixed spin, then with adaptive spinning (the default).
    set_param("spin_us", 0)
    for s in (cli, acc):
        s.setsockopt(SOL_SCI, SCI_SPIN_US, 200)
    spinning_traffic(cli, acc, "SCI_SPIN_US 200")
    set_param("spin_us", -1)
    for s in (cli, acc):
        s.setsockopt(SOL_SCI, SCI_SPIN_US, -1)
        expect(get(s) == -1, "SCI_SPIN_US -1 with spin_us -1: adaptive")
    spinning_traffic(cli, acc, "adaptive")


def spinning_traffic(cli, acc, how):
    """2000 checked ping-pongs, then a stream through a full ring, checked."""
    for i in range(2000):
        msg = i.to_bytes(4, "little") * 4
        cli.sendall(msg)
        if acc.recv(16, socket.MSG_WAITALL) != msg:
            sys.exit(f"FAIL: ping {i} came back different")
        acc.sendall(msg)
        if cli.recv(16, socket.MSG_WAITALL) != msg:
            sys.exit(f"FAIL: pong {i} came back different")
    print(f"ok: 2000 ping-pongs with spinning waits ({how})")
    total = 8 * RING
    block = hashlib.sha256(b"spin").digest() * 2048
    sent = hashlib.sha256()

    def writer():
        left = total
        while left:
            chunk = block[: min(len(block), left)]
            cli.sendall(chunk)
            sent.update(chunk)
            left -= len(chunk)

    t = threading.Thread(target=writer)
    t.start()
    got, n = hashlib.sha256(), 0
    while n < total:
        data = acc.recv(1 << 16)
        if not data:
            break
        got.update(data)
        n += len(data)
    t.join()
    expect(n == total and got.hexdigest() == sent.hexdigest(),
           f"a stream through a full ring with spinning waits ({how}), intact")


PLAIN_SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.close()
"""


def refusals(scictl):
    def stats():
        r = subprocess.run([scictl, "stats", "--json"], capture_output=True, text=True, check=True)
        s = json.loads(r.stdout)
        return s["fallbacks"].get("peer-rejected", 0), s["refusals_remembered"]

    def plain_server(port):
        """A TCP server with no preload: its port has no AF_SCI listener."""
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        p = subprocess.Popen([sys.executable, "-c", PLAIN_SERVER, str(port)], env=env,
                             stdout=subprocess.PIPE, text=True)
        expect(p.stdout.readline().strip() == "listening", f"a plain TCP server listens on {port}")
        return p

    def connects(port, n):
        modes = []
        for _ in range(n):
            with socket.create_connection(("127.0.0.1", port)) as c:
                modes.append(info(c))
        return modes

    saved = param("refusal_ms")
    expect(saved == "1000", "refusal_ms is 1000 by default")
    port = free_port()
    srv = plain_server(port)
    try:
        # Long enough that the slowest host keeps it for the whole test.
        set_param("refusal_ms", 600000)
        rejected0, remembered0 = stats()
        modes = connects(port, 20)
        rejected, remembered = stats()
        expect(modes == [(0, "peer-rejected")] * 20,
               f"20 connects to a plain TCP server fall back, reason peer-rejected ({set(modes)})")
        expect(rejected - rejected0 == 20 and remembered - remembered0 == 19,
               f"the first asked the peer, the 19 others fell back at once on the remembered "
               f"refusal (peer-rejected +{rejected - rejected0}, remembered +{remembered - remembered0})")
        # refusal_ms=0: nothing remembered, every connect asks.
        set_param("refusal_ms", 0)
        p2 = free_port()
        srv2 = plain_server(p2)
        try:
            _, before = stats()
            connects(p2, 5)
            _, after = stats()
            expect(after == before, f"refusal_ms=0: every connect asks the peer (remembered +{after - before})")
        finally:
            srv2.kill()
            srv2.wait()
        set_param("refusal_ms", 600000)
    finally:
        srv.kill()
        srv.wait()
    # The port refused a moment ago; an AF_SCI listener opens there: SCI at once.
    lsn = socket.socket()
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind(("127.0.0.1", port))
    lsn.listen(8)
    cli, acc = pair(lsn)
    expect(info(cli)[0] == MODE_SCI,
           f"an AF_SCI listener on the refused port ends the refusal at once ({info(cli)})")
    for s in (cli, acc, lsn):
        s.close()
    set_param("refusal_ms", saved)


@contextlib.contextmanager
def wait_race_window(us):
    """Every empty (or full) look held open `us` before its wait request (test_wait_race_us)."""
    set_param("test_wait_race_us", us)
    try:
        yield
    finally:
        set_param("test_wait_race_us", 0)


def edge_triggered_pair(events, watch_client):
    """An SCI connection whose client (or accepted) end is non-blocking and watched by an
    edge-triggered epoll for `events`: (listener, client, accepted, epoll)."""
    srv = listener()
    cli, acc = pair(srv)
    expect(info(cli)[0] == MODE_SCI and info(acc)[0] == MODE_SCI, "both ends are SCI")
    watched = cli if watch_client else acc
    watched.setblocking(False)
    ep = select.epoll()
    ep.register(watched.fileno(), events | select.EPOLLET)
    return srv, cli, acc, ep


def wait_race():
    wait_race_reader()
    wait_race_writer()


def wait_race_reader():
    rounds, msg = 300, b"wait-race 14 B"
    srv, cli, acc, ep = edge_triggered_pair(select.EPOLLIN, watch_client=False)
    lost = []

    def server():
        echoed = 0
        while echoed < rounds * len(msg):
            if not ep.poll(10):
                lost.append(echoed // len(msg))
                return
            while True:
                try:
                    data = acc.recv(65536)
                except BlockingIOError:
                    break
                if not data:
                    return
                acc.sendall(data)
                echoed += len(data)

    with wait_race_window(2000):
        t = threading.Thread(target=server)
        t.start()
        cli.settimeout(30)
        done = 0
        try:
            for _ in range(rounds):
                cli.sendall(msg)
                got = b""
                while len(got) < len(msg):
                    part = cli.recv(len(msg) - len(got))
                    if not part:
                        break
                    got += part
                if got != msg:
                    break
                done += 1
        except socket.timeout:
            pass
        t.join(60)
    expect(not lost, f"the edge-triggered server saw every request (none lost: {lost})")
    expect(done == rounds, f"{done} of {rounds} echoes came back intact")
    for s in (cli, acc, srv):
        s.close()


def wait_race_writer():
    total, block = 16 << 20, hashlib.sha256(b"wait-race").digest() * 2048  # 64 KiB
    srv, cli, acc, ep = edge_triggered_pair(select.EPOLLOUT, watch_client=True)
    got, digest = [0], hashlib.sha256()

    def reader():
        acc.settimeout(30)
        while got[0] < total:
            data = acc.recv(1 << 20)
            if not data:
                return
            digest.update(data)
            got[0] += len(data)

    with wait_race_window(2000):
        t = threading.Thread(target=reader)
        t.start()
        sent, stuck, want = 0, False, hashlib.sha256()
        while sent < total and not stuck:
            chunk = block[sent % len(block):][:total - sent]
            try:
                n = cli.send(chunk)
                want.update(chunk[:n])
                sent += n
            except BlockingIOError:
                stuck = not ep.poll(10)
        t.join(60)
    expect(not stuck, f"the edge-triggered writer saw EPOLLOUT each time ({sent} of {total} bytes sent)")
    expect(got[0] == total and digest.digest() == want.digest(),
           f"{got[0]} of {total} bytes arrived intact")
    for s in (cli, acc, srv):
        s.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if sys.argv[1:2] == ["backpressure"] and len(sys.argv) == 3:
        backpressure(sys.argv[2])
    elif sys.argv[1:2] == ["refusals"] and len(sys.argv) == 3:
        refusals(sys.argv[2])
    elif sys.argv[1:] == ["exhaustion"]:
        exhaustion()
    elif sys.argv[1:] == ["spin"]:
        spin()
    elif sys.argv[1:] == ["wait-race"]:
        wait_race()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
