#!/usr/bin/env python3
"""A connect whose SCI answer is lost, run under sci-run with af_sci loaded
(selftests/guest/guest-suite).

  sci_lost_answer.py blocking|epoll

The listener's node answers a connect request (its end of the connection is queued for
accept() and the server takes it), but the answer never reaches the connecting end: the
`test_drop_answers` module parameter drops the next one, as a full mailbox or a peer that
went away loses it on a real fabric. The connect waits for it (5 s), then falls back to
TCP from the same port, as designed; that TCP connection arrives at the listener from the
port of the SCI connection the server holds.

The server is an ordinary echo server that greets each connection first (a line, as
SMTP or FTP servers do): `blocking` accepts in a loop and serves each connection in a
thread; `epoll` runs one level-triggered epoll loop over the listener and its
connections. Checks:

- the connect falls back (SCI_INFO: native, reason timeout) and its echo comes back
  intact: the TCP connection reached accept() (it is not taken for the SCI connection
  moving onto TCP, which would start with a resume header);
- the same for a client that says nothing until the server greets it (its connection is
  given to accept() once a moving peer would have sent its header: failover_ms);
- the server's SCI end of the lost connect is reset (ECONNRESET), as TCP resets a
  connection whose peer's port opened a new one, and nothing of it is left after close;
- a second connect right after takes the SCI path again.

Every wait is bounded (a hang fails the check that waits); exit status 0 only if every
check passed.
"""
import os
import select
import socket
import struct
import sys
import threading
import time

from sci_churn import recv_exact  # its bytes, short only at the end of the stream

SOL_SCI, SCI_INFO = 300, 1
MODES = {0: "native", 1: "sci"}
REASONS = {0: "none", 1: "no-fabric", 2: "not-mapped", 3: "port-excluded",
           4: "peer-rejected", 5: "no-memory", 6: "timeout", 7: "peer-tcp", 8: "failover"}
DROP = "/sys/module/af_sci/parameters/test_drop_answers"
LIMIT = 30  # seconds any one wait may take before it counts as a hang
BLOCK = bytes(range(256)) * 64
GREETING = b"220 echo\r\n"


def info(sock):
    mode, reason, _, _ = struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))
    return f"{MODES.get(mode, mode)}/{REASONS.get(reason, reason)}"


failed = False


def expect(cond, what):
    global failed
    print(f"{'ok' if cond else 'FAIL'}: {what}", flush=True)
    failed |= not cond


class Server:
    """An echo server; records how each accepted connection ended."""

    def __init__(self, style):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.ends = []  # (mode at accept, how it ended)
        self.lock = threading.Lock()
        target = self.run_blocking if style == "blocking" else self.run_epoll
        threading.Thread(target=target, daemon=True).start()

    def ended(self, mode, how):
        with self.lock:
            self.ends.append((mode, how))

    def run_blocking(self):
        while True:
            conn, _ = self.srv.accept()
            threading.Thread(target=self.echo, args=(conn,), daemon=True).start()

    def echo(self, conn):
        mode = info(conn)
        try:
            conn.sendall(GREETING)
            while data := conn.recv(1 << 16):
                conn.sendall(data)
            how = "EOF"
        except OSError as e:
            how = os.strerror(e.errno) if e.errno else type(e).__name__
        conn.close()
        self.ended(mode, how)

    def run_epoll(self):
        ep = select.epoll()
        self.srv.setblocking(False)
        ep.register(self.srv.fileno(), select.EPOLLIN)
        conns = {}
        while True:
            for fd, _ in ep.poll():
                if fd == self.srv.fileno():
                    try:
                        conn, _ = self.srv.accept()
                    except BlockingIOError:
                        continue
                    try:
                        conn.sendall(GREETING)
                    except OSError:
                        pass
                    conn.setblocking(False)
                    conns[conn.fileno()] = (conn, info(conn))
                    ep.register(conn.fileno(), select.EPOLLIN)
                    continue
                conn, mode = conns[fd]
                try:
                    data = conn.recv(1 << 16)
                    if data:
                        conn.setblocking(True)
                        conn.sendall(data)
                        conn.setblocking(False)
                        continue
                    how = "EOF"
                except BlockingIOError:
                    continue
                except OSError as e:
                    how = os.strerror(e.errno) if e.errno else type(e).__name__
                ep.unregister(fd)
                del conns[fd]
                conn.close()
                self.ended(mode, how)


def echo_once(addr, silent=False):
    """One connection: the greeting, then an echo of BLOCK (`silent`: the greeting is
    awaited before anything is sent). Returns the mode and the bytes back (None: hung)."""
    s = socket.create_connection(addr, timeout=LIMIT)
    s.settimeout(LIMIT)
    mode = info(s)
    try:
        if not silent:
            s.sendall(BLOCK)
        got = None if recv_exact(s, len(GREETING)) != GREETING else b""
        if got is not None:
            if silent:
                s.sendall(BLOCK)
            got = recv_exact(s, len(BLOCK))
    except socket.timeout:
        got = None
    s.close()
    return mode, got


def lose_answer(style, addr, silent):
    """A connect whose answer is dropped: it falls back and its echo comes back."""
    who = f"{style}{' (silent client)' if silent else ''}"
    with open(DROP, "w") as f:
        f.write("1")
    start = time.monotonic()
    mode, got = echo_once(addr, silent)
    took = time.monotonic() - start
    with open(DROP) as f:
        left = f.read().strip()
    expect(left == "0", f"{who}: the listener's answer was dropped (test_drop_answers now {left})")
    expect(mode == "native/timeout",
           f"{who}: the connect whose answer was lost fell back to TCP ({mode})")
    expect(got == BLOCK,
           f"{who}: its greeting and echo came back intact over TCP in {took:.1f} s "
           f"({'hung' if got is None else f'{len(got)} bytes'})")


def main():
    style = sys.argv[1]
    server = Server(style)
    addr = server.srv.getsockname()
    mode, got = echo_once(addr)
    expect(mode == "sci/none" and got == BLOCK, f"{style}: a first connection is SCI and echoes ({mode})")

    lose_answer(style, addr, silent=False)
    lose_answer(style, addr, silent=True)

    # The server's SCI ends of those connects: reset once the TCP connection showed its
    # peer had moved on, then closed by the server.
    end = time.monotonic() + LIMIT
    while time.monotonic() < end:
        with server.lock:
            sci_ends = [how for m, how in server.ends if m == "sci/none"]
        if len(sci_ends) >= 3:
            break
        time.sleep(0.05)
    expect(sorted(sci_ends) == ["Connection reset by peer"] * 2 + ["EOF"],
           f"{style}: the server's ends of the lost connects were reset, the first one "
           f"ended ({sci_ends})")

    mode, got = echo_once(addr)
    expect(mode == "sci/none" and got == BLOCK, f"{style}: the next connection is SCI again ({mode})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
