#!/usr/bin/env python3
"""Gathering of small writes on the SCI path (Nagle, TCP_CORK, MSG_MORE), run under
sci-run with af_sci loaded (selftests/guest/guest-suite).

  sci_gather.py cork       TCP_CORK holds small writes until uncork (then all arrive, in
                           order); a cork left alone is flushed after about 200 ms;
                           shutdown and close after corked writes lose nothing
  sci_gather.py more       MSG_MORE holds, the next write without it sends everything
  sci_gather.py nagle      Nagle holds small writes while earlier bytes are unconsumed
                           (and gives them up after about 40 ms); a write-write-read
                           request/response does not stall (the ACK clock)
  sci_gather.py nodelay    TCP_NODELAY: every write is visible at once; setting it sends
                           what Nagle held; an accepted socket inherits it
  sci_gather.py all        all of the above

The receiver sees bytes only once the writer publishes them, so "held" is read on the
receiving end (FIONREAD 0, recv MSG_DONTWAIT: EAGAIN) and on the sending end
(SIOCOUTQNSD: bytes written and not yet sent). A hold ends by itself after its timeout,
so a check counts only if it came soon enough after the writes (a slow guest retries).
Every connection's mode is read through SCI_INFO. Exit status 0 only if every check passed.
"""
import fcntl
import socket
import struct
import sys
import termios
import threading
import time

from sci_limits import MODE_SCI, expect, info, listener, pair

SIOCOUTQNSD = 0x894B


def inq(sock):
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def unsent(sock):
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), SIOCOUTQNSD, b"\0" * 4))[0]


def sci_pair(srv):
    cli, acc = pair(srv)
    expect_quiet(info(cli)[0] == MODE_SCI and info(acc)[0] == MODE_SCI, "both ends are SCI")
    return cli, acc


def expect_quiet(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


def recv_exactly(sock, n, timeout=5.0):
    sock.settimeout(timeout)
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    sock.settimeout(None)
    return data


def not_visible(acc):
    """Nothing readable on the receiving end, by FIONREAD and by a non-blocking recv."""
    if inq(acc) != 0:
        return False
    try:
        acc.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK)
        return False
    except BlockingIOError:
        return True


def timely(srv, setup, window, what, tries=20):
    """Runs setup(cli, acc) -> (t0, held) on fresh pairs until a check came within
    `window` seconds of t0; fails if that check saw the bytes sent early. Returns the
    pair of the timely try."""
    for _ in range(tries):
        cli, acc = sci_pair(srv)
        t0, held = setup(cli, acc)
        if time.monotonic() - t0 <= window:
            expect(held, what)
            return cli, acc
        cli.close()
        acc.close()
    sys.exit(f"FAIL: no try checked within {window * 1000:.0f} ms ({what})")


def cork():
    srv = listener()
    parts = [b"alpha-", b"bravo-", b"charlie-", b"delta"]
    want = b"".join(parts)

    def corked_writes(cli, acc):
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        t0 = time.monotonic()
        for p in parts:
            cli.send(p)
        held = not_visible(acc) and unsent(cli) == len(want)
        return t0, held

    cli, acc = timely(srv, corked_writes, 0.15, "TCP_CORK: small writes are not visible to the peer")
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
    expect(recv_exactly(acc, len(want), 2.0) == want, "uncork: every byte arrives, in order")
    expect(unsent(cli) == 0, "uncork: nothing left unsent (SIOCOUTQNSD 0)")

    # A cork left alone: flushed after about 200 ms (TCP's ceiling), not before.
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    t0 = time.monotonic()
    cli.send(b"lonely")
    got = recv_exactly(acc, 6, 3.0)
    took = time.monotonic() - t0
    expect(got == b"lonely" and 0.15 <= took < 2.0, f"a cork held alone is sent after ~200 ms ({took * 1000:.0f} ms)")
    cli.close()
    acc.close()

    # shutdown(SHUT_WR) and close() after corked writes: all bytes, then EOF.
    for how in ("shutdown", "close"):
        cli, acc = sci_pair(srv)
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        for p in parts:
            cli.send(p)
        if how == "shutdown":
            cli.shutdown(socket.SHUT_WR)
        else:
            cli.close()
        got = recv_exactly(acc, len(want) + 1, 2.0)
        expect(got == want, f"{how} after corked writes: the peer reads every byte, then EOF")
        if how == "shutdown":
            cli.close()
        acc.close()
    srv.close()


def more():
    srv = listener()

    def more_writes(cli, acc):
        t0 = time.monotonic()
        cli.send(b"head-", socket.MSG_MORE)
        cli.send(b"body-", socket.MSG_MORE)
        return t0, not_visible(acc) and unsent(cli) == 10

    cli, acc = timely(srv, more_writes, 0.15, "MSG_MORE: the writes are held")
    cli.send(b"tail")
    expect(recv_exactly(acc, 14, 2.0) == b"head-body-tail", "a write without MSG_MORE sends everything, in order")
    cli.close()
    acc.close()
    srv.close()


def nagle():
    srv = listener()

    # The peer does not read: the first byte goes, later small writes wait for it.
    def nagle_writes(cli, acc):
        cli.send(b"1")  # published at once: nothing was in flight
        t0 = time.monotonic()
        for _ in range(10):
            cli.send(b"n")
        return t0, inq(acc) == 1 and unsent(cli) == 10

    cli, acc = timely(srv, nagle_writes, 0.03, "Nagle: small writes wait while the first byte is unconsumed")
    t0 = time.monotonic()
    while inq(acc) < 11 and time.monotonic() - t0 < 3:
        time.sleep(0.005)
    took = time.monotonic() - t0
    expect(inq(acc) == 11 and unsent(cli) == 0, f"... and are sent after ~40 ms without a reader ({took * 1000:.0f} ms)")
    expect(recv_exactly(acc, 11) == b"1" + b"n" * 10, "... in order")
    cli.close()
    acc.close()

    # Nagle's ACK clock: the reader consuming the first byte sends the rest at once.
    def clocked(cli, acc):
        cli.send(b"A")
        t0 = time.monotonic()
        cli.send(b"B")
        cli.send(b"C")
        return t0, inq(acc) == 1

    cli, acc = timely(srv, clocked, 0.03, "Nagle: held behind an unconsumed byte")
    t0 = time.monotonic()
    got = recv_exactly(acc, 3, 2.0)
    took = time.monotonic() - t0
    expect(got == b"ABC", "the reader gets every byte")
    print(f"# consuming the first byte released the rest after {took * 1000:.1f} ms")
    cli.close()
    acc.close()

    # write-write-read request/response: no stall (a stall costs >= 40 ms a round). The
    # same with TCP_NODELAY, for comparison.
    rounds = 50
    header, body, answer = b"H" * 16, b"B" * 100, b"R" * 32

    def request_response(nodelay):
        cli, acc = sci_pair(srv)
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, nodelay)

        def server():
            for _ in range(rounds):
                if recv_exactly(acc, len(header) + len(body), 10) != header + body:
                    return
                acc.send(answer)

        t = threading.Thread(target=server)
        t.start()
        t0 = time.monotonic()
        done = held = 0
        for _ in range(rounds):
            cli.send(header)
            cli.send(body)
            held += unsent(cli) > 0
            if recv_exactly(cli, len(answer), 10) != answer:
                break
            done += 1
        took = time.monotonic() - t0
        t.join()
        cli.close()
        acc.close()
        return done, held, took

    done, _, base = request_response(1)
    expect(done == rounds, f"{rounds} write-write-read rounds with TCP_NODELAY ({base * 1000 / rounds:.2f} ms a round)")
    done, held, took = request_response(0)
    expect(done == rounds, f"{rounds} write-write-read rounds with Nagle ({held} with the second write held)")
    expect(took < rounds * 0.04, f"... without Nagle stalls ({took * 1000 / rounds:.2f} ms a round, a stall costs >= 40)")
    srv.close()


def nodelay():
    srv = listener()
    cli, acc = sci_pair(srv)
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    total = 0
    visible = True
    for i in range(1, 11):
        cli.send(b"x" * i)
        total += i
        visible &= inq(acc) == total and unsent(cli) == 0
    expect(visible, "TCP_NODELAY: every small write is visible to the (non-reading) peer at once")
    expect(recv_exactly(acc, total) == b"x" * total, "... and arrives intact")
    cli.close()
    acc.close()

    # Setting TCP_NODELAY sends what Nagle holds.
    def held_then_nodelay(cli, acc):
        cli.send(b"1")
        t0 = time.monotonic()
        cli.send(b"2")
        cli.send(b"3")
        held = inq(acc) == 1
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return t0, held and inq(acc) == 3 and unsent(cli) == 0

    cli, acc = timely(srv, held_then_nodelay, 0.03, "setting TCP_NODELAY sends the bytes Nagle held")
    cli.close()
    acc.close()
    srv.close()

    # As TCP: an accepted socket inherits the listener's TCP_NODELAY.
    srv = listener()
    srv.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cli, acc = sci_pair(srv)
    expect(acc.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0, "an accepted SCI socket inherits TCP_NODELAY")
    acc.send(b"1")
    acc.send(b"2")
    expect(inq(cli) == 2, "... and sends its small writes at once")
    for s in (cli, acc, srv):
        s.close()


TESTS = {"cork": cork, "more": more, "nagle": nagle, "nodelay": nodelay}


def main():
    names = sys.argv[1:]
    if names == ["all"]:
        names = list(TESTS)
    if not names or any(n not in TESTS for n in names):
        sys.exit(__doc__)
    for n in names:
        TESTS[n]()


if __name__ == "__main__":
    main()
