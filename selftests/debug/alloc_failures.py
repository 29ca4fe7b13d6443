#!/usr/bin/env python3
"""Allocation failures on every path of af_sci that allocates, on the sanitizer kernel
(kernel/debug.config: failslab, fail_page_alloc, debugfs). Run by selftests/debug/alloc-guest
with the module loaded (loopback fabric). Prints TAP lines ("ok N - ...") and a summary.

Two ways of failing, both deterministic:

* **In the caller's task: every allocation in turn** (the fail-nth walk syzkaller uses,
  Documentation/fault-injection/fault-injection.rst). For each operation -- socket
  creation, bind, listen, connect over the SCI path, connect that falls back to TCP (the
  handover), accept, send and receive, SCI_INFO, the netlink dumps; and for datagram
  sockets creation, bind, the first datagram to a node of the fabric (which starts an
  implicit connection in the sender's task) and datagrams over an implicit connection --
  write N to
  /proc/thread-self/fail-nth, run the operation once, and read the file back: 0 means the
  Nth allocation of the call failed (failslab or fail_page_alloc), so try N+1; non-zero
  means the call made fewer than N allocations and the walk of that operation is done.
  Every call must either succeed or fail with an error that says memory ran out
  (ENOMEM, ENOBUFS), or, for a connect, fall back to TCP and work; never hang (each call
  has a timeout), and the module must work afterwards (a fresh SCI connection carries
  data intact after every step).

* **In the module's kthreads** (the listener and the connector, which allocate on behalf
  of connections): make-it-fail on those tasks, failslab and
  fail_page_alloc with the task filter, every INTERVALth allocation failing, while 200
  connections are made; each must connect (over SCI or by falling back) and carry its data
  intact, or be refused with a clear error. Then, still failing, 100 datagram senders each
  start an implicit connection to a receiver of its own (the listener kthread serves the
  request and allocates the receiving end): every datagram arrives once, over SCI or over
  UDP when the connection could not be made.

usage: alloc_failures.py [--max-n N] [--interval K]
"""
import argparse
import errno
import importlib.machinery
import os
import socket
import struct
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DBG = "/sys/kernel/debug"
SOL_SCI, SCI_INFO = 300, 1
SCI_CMD_SOCK_GET = 5  # uapi/linux/af_sci.h
MODE_NAMES = {0: "native", 1: "sci"}  # enum sci_mode
# An allocation failure must reach the caller as one of these. ENFILE is how the socket
# layer reports a socket inode it could not allocate (sock_alloc, for socket() and
# accept()), as it does for TCP.
NO_MEMORY = (errno.ENOMEM, errno.ENOBUFS, errno.ENFILE)
# bind is TCP's: inet_csk_get_port() that cannot allocate its bind bucket reports the port
# as taken, and inet_bind() answers EADDRINUSE, for TCP sockets too.
BIND_NO_MEMORY = NO_MEMORY + (errno.EADDRINUSE,)
TIMEOUT = 10.0

# Runs under sci-run: Python's socket module does not know AF_SCI's number, so the script
# asks for AF_INET and the preload makes it AF_SCI (SCI_INFO proves it on every connection).
AF_SCI = socket.AF_INET
genl = importlib.machinery.SourceFileLoader(
    "sci_netlink_bad", f"{TOP}/selftests/guest/sci-netlink-bad").load_module()


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, good, name, detail=""):
        self.n += 1
        if good:
            print(f"ok {self.n} - {name}", flush=True)
        else:
            self.failed += 1
            print(f"not ok {self.n} - {name}{': ' + detail if detail else ''}", flush=True)
        return good

    def note(self, text):
        print(f"# {text}", flush=True)


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def module_text():
    """The address range of af_sci's code (its functions in /proc/kallsyms; the last one
    given a page)."""
    addrs = []
    with open("/proc/kallsyms") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[3] == "[af_sci]" and parts[1] in "tT":
                addrs.append(int(parts[0], 16))
    if not addrs or min(addrs) == 0:
        raise RuntimeError("no addresses of af_sci's code in /proc/kallsyms")
    return min(addrs), max(addrs) + 4096


def configure(task_filter, interval=1, times=-1, probability=100, stack_filter=True):
    """failslab and fail_page_alloc: only allocations made with af_sci's code on the stack
    (the stack filter: the interpreter's own allocations, and the kernel's before it
    reaches the module, do not count), sleeping allocations too (the defaults spare them),
    order-0 pages too, quietly (verbose 0: the log must stay clean)."""
    # No filter: the whole address space (lib/fault-inject.c's fail_stacktrace).
    start, end = module_text() if stack_filter else (0, (1 << 64) - 1)
    for kind in ("failslab", "fail_page_alloc"):
        d = f"{DBG}/{kind}"
        write(f"{d}/require-start", start)
        write(f"{d}/require-end", end)
        write(f"{d}/stacktrace-depth", 32)
        write(f"{d}/ignore-gfp-wait", "N")
        write(f"{d}/verbose", 0)
        write(f"{d}/task-filter", "Y" if task_filter else "N")
        write(f"{d}/interval", interval)
        write(f"{d}/times", times)
        write(f"{d}/probability", probability)
    write(f"{DBG}/fail_page_alloc/min-order", 0)
    write(f"{DBG}/fail_page_alloc/ignore-gfp-highmem", "N")


def info(s):
    mode, reason, _, _ = struct.unpack("4I", s.getsockopt(SOL_SCI, SCI_INFO, 16))
    return MODE_NAMES.get(mode, str(mode)), reason


def sci_socket():
    s = socket.socket(AF_SCI, socket.SOCK_STREAM, 0)
    s.settimeout(TIMEOUT)
    return s


class Listener:
    """An AF_SCI listener whose accepted connections echo what they get."""

    def __init__(self):
        self.s = socket.socket(AF_SCI, socket.SOCK_STREAM, 0)
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(256)
        self.port = self.s.getsockname()[1]
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(c,), daemon=True).start()

    def close(self):
        self.stop = True
        self.s.shutdown(socket.SHUT_RDWR)
        self.s.close()


class TcpListener:
    """A plain TCP echo listener: a process of its own, without the preload."""

    def __init__(self):
        code = ("import socket, threading\n"
                "def echo(c):\n"
                "    with c:\n"
                "        while b := c.recv(65536):\n"
                "            c.sendall(b)\n"
                "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(256)\n"
                "print(s.getsockname()[1], flush=True)\n"
                "while True:\n"
                "    c, _ = s.accept()\n"
                "    threading.Thread(target=echo, args=(c,), daemon=True).start()\n")
        env = dict(os.environ, SCI_DISABLE="1")
        env.pop("LD_PRELOAD", None)
        self.p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                  text=True)
        self.port = int(self.p.stdout.readline())

    def close(self):
        self.p.kill()
        self.p.wait()


def echo(c):
    c.settimeout(60)
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
    except OSError:
        pass
    c.close()


def exchange(s, size):
    """Sends `size` patterned bytes and reads them back: True when intact."""
    data = bytes((i * 7 + size) & 0xFF for i in range(size))
    s.sendall(data)
    got = b""
    while len(got) < size:
        b = s.recv(size - len(got))
        if not b:
            return False
        got += b
    return got == data


def works(port):
    """A fresh AF_SCI connection over the SCI path carries 4 KiB intact."""
    s = sci_socket()
    try:
        s.connect(("127.0.0.1", port))
        return info(s)[0] == "sci" and exchange(s, 4096)
    except OSError:
        return False
    finally:
        s.close()


def dgram_socket():
    """An AF_SCI datagram socket (the preload rewrites UDP sockets too)."""
    s = socket.socket(AF_SCI, socket.SOCK_DGRAM, 0)
    s.settimeout(TIMEOUT)
    return s


def dgram_pair():
    """A receiver and a sender, both bound to 127.0.0.1 (so both have their endpoint on the
    fabric)."""
    r, s = dgram_socket(), dgram_socket()
    r.bind(("127.0.0.1", 0))
    s.bind(("127.0.0.1", 0))
    return r, s


def deliver(s, r, payloads):
    """Sends `payloads` from `s` to `r` and reads as many datagrams back: None when each
    came exactly once, else what went wrong. Datagrams that raced over UDP and over SCI may
    come in either order (Documentation/af_sci.rst, "Datagram sockets"), so the set counts."""
    for p in payloads:
        s.sendto(p, r.getsockname())
    got = []
    try:
        while len(got) < len(payloads):
            got.append(r.recv(65536))
    except TimeoutError:
        return f"{len(payloads) - len(got)} of {len(payloads)} datagrams never came"
    if sorted(got) != sorted(payloads):
        return "the datagrams that came are not the ones sent"
    r.setblocking(False)
    try:
        extra = r.recv(65536)
        return f"a datagram came twice or uninvited ({extra[:16]!r})"
    except BlockingIOError:
        return None
    finally:
        r.settimeout(TIMEOUT)


def bring_up(s, r, limit=TIMEOUT):
    """Sends probes from `s` to `r` until one goes over an implicit connection (the
    sender's SCI_INFO says sci once a datagram took one), at most for `limit` s: the
    first probe starts the connection, and the ones before it is up go over UDP. Every
    probe must arrive once. Returns (up, what went wrong or None)."""
    end = time.monotonic() + limit
    i = 0
    while True:
        why = deliver(s, r, [f"probe-{i}".encode()])
        if why:
            return False, why
        if info(s)[0] == "sci":
            return True, None
        if time.monotonic() >= end:
            return False, None
        i += 1
        time.sleep(0.01)


def payloads(tag, n):
    """`n` distinct datagrams of different lengths, named by `tag`."""
    return [f"{tag}-{i}-".encode() + bytes(range(i % 200)) for i in range(n)]


class FailNth:
    """The calling thread's fail-nth file, opened once: reading and resetting it must not
    allocate in the kernel, or a count the call left over would fail that instead."""

    def __init__(self):
        self.fd = os.open("/proc/thread-self/fail-nth", os.O_RDWR)

    def arm(self, n):
        os.pwrite(self.fd, str(n).encode(), 0)

    def left(self):
        left = int(os.pread(self.fd, 32, 0))
        os.pwrite(self.fd, b"0", 0)
        return left


def walk(tap, name, prepare, op, check_result, max_n, clean=NO_MEMORY):
    """The fail-nth walk of one operation: prepare() builds its state (no failures), op(state)
    runs the call under the Nth failure, check_result(state, result) judges a success, and
    a failure must be one of the errors `clean`. Returns the number of failures injected."""
    fn = FailNth()
    bad = []
    injected = 0
    outcomes = {}
    n = 0
    while n < max_n:
        n += 1
        state = prepare()
        result = None
        t0 = time.monotonic()
        fn.arm(n)
        try:
            result = op(state)
            err = None
        except TimeoutError:
            err = errno.ETIMEDOUT
        except OSError as e:
            err = e.errno
        left = fn.left()
        took = time.monotonic() - t0
        if left == 0:
            injected += 1
        key = "ok" if err is None else errno.errorcode.get(err, str(err))
        outcomes[key] = outcomes.get(key, 0) + 1
        if took >= TIMEOUT:
            bad.append(f"n={n}: took {took:.1f} s (a hang)")
        elif err is not None and err not in clean:
            bad.append(f"n={n}: {os.strerror(err)} instead of an out-of-memory error")
        elif err is None:
            why = check_result(state, result)
            if why:
                bad.append(f"n={n}: succeeded but {why}")
        cleanup(state)
        if left != 0:
            break
    summary = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    tap.note(f"{name}: {injected} allocation(s) failed in turn ({summary})")
    for b in bad[:10]:
        tap.note(f"  {b}")
    tap.check(not bad and n < max_n,
              f"{name}: each of its {injected} allocations failing gives a clean error",
              "" if n < max_n else f"more than {max_n} allocations")
    return injected


def cleanup(state):
    if "genl" in state:
        state["genl"].s.close()
    for s in state.get("socks", []):
        try:
            s.close()
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-n", type=int, default=400)
    ap.add_argument("--interval", type=int, default=7)
    args = ap.parse_args()
    tap = Tap()
    configure(task_filter=True, probability=0)  # fail-nth only, nothing at random
    sci = Listener()
    tcp = TcpListener()
    tap.check(works(sci.port), "before any failure: an SCI connection carries data intact")
    total = 0

    def fresh():
        return {"socks": []}

    def with_socket():
        s = sci_socket()
        return {"socks": [s], "s": s}

    def with_bound():
        st = with_socket()
        st["s"].bind(("127.0.0.1", 0))
        return st

    def with_connected():
        st = with_socket()
        st["s"].connect(("127.0.0.1", sci.port))
        return st

    def new_socket(st):
        s = socket.socket(AF_SCI, socket.SOCK_STREAM, 0)
        st["socks"].append(s)
        return s

    def connect_to(port):
        def op(st):
            st["s"].connect(("127.0.0.1", port))
            return info(st["s"])
        return op

    def connected_ok(st, mode_reason):
        mode = mode_reason[0]
        if mode not in ("sci", "native"):
            return f"mode {mode}"
        if not exchange(st["s"], 4096):
            return "the data did not come back intact"
        return None

    def accept_op(st):
        c, _ = st["l"].accept()
        st["socks"].append(c)
        return c

    def with_pending():
        l = sci_socket()
        l.bind(("127.0.0.1", 0))
        l.listen(4)
        c = sci_socket()
        c.connect(l.getsockname())
        return {"socks": [l, c], "l": l, "c": c}

    def accepted_ok(st, c):
        st["c"].sendall(b"x" * 1000)
        got = b""
        while len(got) < 1000:
            b = c.recv(1000 - len(got))
            if not b:
                return "the accepted connection lost data"
            got += b
        return None

    def send_recv(st):
        return exchange(st["s"], 256 * 1024)

    def with_genl(connected):
        def prepare():
            st = with_connected() if connected else fresh()
            st["genl"] = genl.Genl()
            st["genl"].s.settimeout(TIMEOUT)
            return st
        return prepare

    def dump(cmd):
        return lambda st: st["genl"].dump(cmd)

    def with_dgram():
        d = dgram_socket()
        return {"socks": [d], "s": d}

    def new_dgram(st):
        d = socket.socket(AF_SCI, socket.SOCK_DGRAM, 0)
        st["socks"].append(d)
        return d

    def dgram_bound_ok(st, _):
        # The bound socket takes datagrams (over UDP, or over SCI once its endpoint is up).
        snd = dgram_socket()
        st["socks"].append(snd)
        return deliver(snd, st["s"], payloads("bound", 3))

    def with_dgram_pair():
        r, snd = dgram_pair()
        return {"socks": [r, snd], "r": r, "s": snd}

    def first_dgram(st):
        st["s"].sendto(b"first", st["r"].getsockname())

    def first_ok(st, _):
        # The first datagram went over UDP while the connection it started comes up (or
        # not, if its allocation failed): it arrives, and so do the ones after it, over
        # either path, each once.
        try:
            if st["r"].recv(65536) != b"first":
                return "another datagram came instead of the first"
        except TimeoutError:
            return "the first datagram never came"
        return deliver(st["s"], st["r"], payloads("after", 20))

    def with_implicit():
        st = with_dgram_pair()
        st["up"], st["why"] = bring_up(st["s"], st["r"])
        return st

    def over_implicit(st):
        return deliver(st["s"], st["r"], payloads("sci", 20))

    def over_implicit_ok(st, why):
        if not st["up"]:
            return st["why"] or "the implicit connection never came up"
        return why

    walks = [
        ("socket(AF_SCI)", fresh, new_socket, lambda st, s: None),
        ("bind", with_socket, lambda st: st["s"].bind(("127.0.0.1", 0)), lambda st, r: None),
        ("listen", with_bound, lambda st: st["s"].listen(8), lambda st, r: None),
        ("connect over the SCI path", with_socket, connect_to(sci.port), connected_ok),
        ("connect to a plain TCP listener (fallback, handover)", with_socket,
         connect_to(tcp.port), connected_ok),
        ("accept", with_pending, accept_op, accepted_ok),
        ("send and receive 256 KiB over SCI", with_connected, send_recv,
         lambda st, r: None if r else "the data did not come back intact"),
        ("getsockopt SCI_INFO", with_connected, lambda st: info(st["s"]), lambda st, r: None),
        ("socket(AF_SCI, SOCK_DGRAM)", fresh, new_dgram, lambda st, s: None),
        ("bind a datagram socket (its endpoint on the fabric)", with_dgram,
         lambda st: st["s"].bind(("127.0.0.1", 0)), dgram_bound_ok),
        ("the first datagram to a node of the fabric (starts an implicit connection)",
         with_dgram_pair, first_dgram, first_ok),
        ("20 datagrams over an implicit connection", with_implicit, over_implicit,
         over_implicit_ok),
    ]
    # A dump's messages are allocated by the netlink core before it calls the module's
    # dump callback (which then only fills them): walked without the stack filter, every
    # allocation of the request counts.
    dumps = [
        ("netlink dump of the sockets", with_genl(True), dump(SCI_CMD_SOCK_GET),
         lambda st, r: None if r else "no socket in the dump"),
        ("netlink dump of the node map", with_genl(False), dump(genl.NODE_GET),
         lambda st, r: None),
    ]
    for (name, prepare, op, judge), filtered in [(w, True) for w in walks] + \
            [(d, False) for d in dumps]:
        configure(task_filter=True, probability=0, stack_filter=filtered)
        clean = BIND_NO_MEMORY if name == "bind" else NO_MEMORY
        total += walk(tap, name, prepare, op, judge, args.max_n, clean)
        tap.check(works(sci.port), f"after {name}: a fresh SCI connection carries data intact")

    # The module's kthreads.
    pids = []
    for comm in ("sci_listener", "sci_connector"):
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open(f"/proc/{p}/comm") as f:
                        if f.read().strip() == comm:
                            pids.append((comm, int(p)))
                except OSError:
                    pass
    tap.check(len(pids) == 2, f"the module's kthreads found ({', '.join(c for c, _ in pids)})")
    for _, pid in pids:
        write(f"/proc/{pid}/make-it-fail", 1)
    budget = 1_000_000
    configure(task_filter=True, interval=args.interval, times=budget, probability=100)
    modes = {}
    broken = []
    for i in range(200):
        s = sci_socket()
        try:
            s.connect(("127.0.0.1", sci.port))
            mode = info(s)[0]
            modes[mode] = modes.get(mode, 0) + 1
            if not exchange(s, 2048 + i):
                broken.append(f"connection {i} ({mode}): data not intact")
        except OSError as e:
            key = errno.errorcode.get(e.errno, str(e.errno))
            modes[key] = modes.get(key, 0) + 1
            if e.errno not in NO_MEMORY + (errno.ECONNRESET, errno.ECONNREFUSED):
                broken.append(f"connection {i}: {os.strerror(e.errno)}")
        finally:
            s.close()
    def kthread_failed():
        n = 0
        for kind in ("failslab", "fail_page_alloc"):
            with open(f"{DBG}/{kind}/times") as f:
                n += budget - int(f.read())
        return n
    stream_failures = kthread_failed()
    # Datagram senders, each to a receiver of its own: the first datagrams go over UDP
    # and start an implicit connection, whose request the listener kthread serves (it
    # allocates the receiving end); the next ones go over SCI if it came up.
    dmodes = {}
    dbroken = []
    for i in range(100):
        r, snd = dgram_pair()
        try:
            # 2 s for the connection: one whose set-up failed is never up.
            up, why = bring_up(snd, r, 2)
            why = why or deliver(snd, r, payloads(f"k{i}", 8))
            mode = "sci" if up else "udp"
            dmodes[mode] = dmodes.get(mode, 0) + 1
            if why:
                dbroken.append(f"sender {i} ({mode}): {why}")
        except OSError as e:
            key = errno.errorcode.get(e.errno, str(e.errno))
            dmodes[key] = dmodes.get(key, 0) + 1
            if e.errno not in NO_MEMORY:
                dbroken.append(f"sender {i}: {os.strerror(e.errno)}")
        finally:
            r.close()
            snd.close()
    kthread_failures = kthread_failed()
    configure(task_filter=True, probability=0)
    for _, pid in pids:
        write(f"/proc/{pid}/make-it-fail", 0)
    tap.note(f"kthreads: every {args.interval}th allocation failed, {kthread_failures} in all "
             f"({stream_failures} under the connections, {kthread_failures - stream_failures} "
             f"under the datagram senders); connections: "
             f"{', '.join(f'{k} {v}' for k, v in sorted(modes.items()))}; datagram senders: "
             f"{', '.join(f'{k} {v}' for k, v in sorted(dmodes.items()))}")
    for b in (broken + dbroken)[:10]:
        tap.note(f"  {b}")
    tap.check(kthread_failures - stream_failures > 0,
              f"the kthreads' allocations did fail under the datagram senders "
              f"({kthread_failures - stream_failures})")
    tap.check(not broken, "200 connections while the module's kthreads' allocations fail: "
              "each connects and carries its data intact, or is refused cleanly")
    tap.check(not dbroken, "100 datagram senders while the module's kthreads' allocations "
              "fail: every datagram arrives exactly once, over SCI or over UDP")
    tap.check(works(sci.port), "after the kthreads' failures: a fresh SCI connection works")
    sci.close()
    tcp.close()
    tap.note(f"allocation failures injected: {total} in the callers' tasks, "
             f"{kthread_failures} in the kthreads")
    print(f"# summary: {tap.n - tap.failed} passed, {tap.failed} failed")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
