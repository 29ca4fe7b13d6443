#!/usr/bin/env python3
"""Direct receive (one copy for large transfers, fabric/direct.rs) on the loopback fabric.

A reader blocked in recv with a buffer of at least direct_min bytes, on an empty ring,
while the writer's sends are that large too, has its buffer filled by the writer
directly. Every case checks the bytes (and their order) and, through `scictl stats`
(direct_received), whether the direct path was taken where it must be and not where it
must not. Run under sci-run, so every socket is AF_SCI (asserted through SCI_INFO).

usage: sci_direct.py semantics SCICTL
       sci_direct.py stream SCICTL SEED
       sci_direct.py kill SCICTL SEED
"""
import contextlib
import ctypes
import errno
import hashlib
import json
import mmap
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

SOL_SCI, SCI_INFO = 300, 1
MIN = 65536  # direct_min, set by main()
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def fail(what):
    sys.exit(f"FAIL: {what}")


def expect(cond, what):
    if not cond:
        fail(what)
    print(f"ok: {what}", flush=True)


def set_param(name, value):
    with open(f"/sys/module/af_sci/parameters/{name}", "w") as f:
        f.write(str(value))


def direct_received(scictl):
    r = subprocess.run([scictl, "stats", "--json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["direct_received"]


def pair():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.create_connection(srv.getsockname())
    acc, _ = srv.accept()
    srv.close()
    for s in (cli, acc):
        mode = struct.unpack("4I", s.getsockopt(SOL_SCI, SCI_INFO, 16))[0]
        if mode != 1:
            fail(f"socket in mode {mode}, not sci: is this run under sci-run?")
    return cli, acc


def pattern(seed, n):
    """n bytes that differ from any other seed's and offset's."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d:%d" % (seed, i)).digest() * 64
        i += 1
    return bytes(out[:n])


def recv_exact(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:])
        if k == 0:
            fail(f"end of stream after {got} of {n} bytes")
        got += k
    return bytes(buf)


def asleep_in_recv(tid):
    """The thread sleeps in its socket's wait (after posting, if it posts)."""
    try:
        with open(f"/proc/self/task/{tid}/wchan") as f:
            return f.read().strip() == "wait_woken"
    except FileNotFoundError:
        return False


def wait_until(cond, what, limit=60):
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            fail(f"timed out waiting for {what}")
        time.sleep(0.001)


def prime(w, r):
    """A large send read through the ring: the writer's sends are large from here on."""
    data = pattern(99, 4 * MIN)
    w.sendall(data)
    if recv_exact(r, len(data)) != data:
        fail("priming bytes garbled")


class Reader(threading.Thread):
    """One recv in a thread, into a new buffer of `bufs` bytes or into the buffers `bufs`
    (recvmsg_into when there are several); the caller waits for it to sleep."""

    def __init__(self, sock, bufs, flags=0):
        super().__init__(daemon=True)
        self.sock, self.flags = sock, flags
        self.bufs = [bytearray(bufs)] if isinstance(bufs, int) else bufs
        self.n, self.err, self.tid = None, None, None
        self.started_evt = threading.Event()

    def run(self):
        self.tid = threading.get_native_id()
        self.started_evt.set()
        try:
            if len(self.bufs) == 1:
                self.n = self.sock.recv_into(self.bufs[0], len(self.bufs[0]), self.flags)
            else:
                self.n = self.sock.recvmsg_into(self.bufs, 0, self.flags)[0]
        except OSError as e:
            self.err = e

    def start_and_sleep(self):
        self.start()
        self.started_evt.wait()
        wait_until(lambda: asleep_in_recv(self.tid), "the reader to sleep in recv")

    def data(self):
        self.join()
        if self.err:
            raise self.err
        return b"".join(bytes(b) for b in self.bufs)[: self.n]


def primed_pair():
    """A connected pair (client, accepted) whose writer's sends are large already."""
    cli, acc = pair()
    prime(cli, acc)
    return cli, acc


@contextlib.contextmanager
def sending(w, data):
    """`data` sent from `w` in a thread while the block receives it (the ring alone
    cannot hold it); the send has ended when the block has."""
    t = threading.Thread(target=w.sendall, args=(data,))
    t.start()
    try:
        yield
    finally:
        t.join()


def case_partial(scictl, cli, acc):
    r = Reader(acc, 1 << 20)
    r.start_and_sleep()
    before = direct_received(scictl)
    data = pattern(1, 200 * 1024)
    cli.sendall(data)
    got = r.data()
    expect(got == data, "a 1 MiB recv gets exactly the 200 KiB sent, in order")
    expect(direct_received(scictl) - before == len(data),
           "those 200 KiB were filled directly (direct_received +204800)")
    r = Reader(acc, 1 << 20)
    r.start_and_sleep()
    big = pattern(2, 3 << 20)
    with sending(cli, big):
        first = r.data()
        rest = recv_exact(acc, len(big) - len(first))
    expect(first + rest == big and len(first) == 1 << 20,
           "3 MiB sent into a waiting 1 MiB buffer: it gets the first MiB, the ring the rest")


class Interrupted(Exception):
    pass


def case_signal(scictl, cli, acc):
    main_tid = threading.get_native_id()

    def on_usr1(signum, frame):
        raise Interrupted()

    old = signal.signal(signal.SIGUSR1, on_usr1)
    before = direct_received(scictl)

    def interrupt():
        wait_until(lambda: asleep_in_recv(main_tid), "the reader to sleep in recv")
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    t = threading.Thread(target=interrupt)
    t.start()
    buf = bytearray(1 << 20)
    try:
        acc.recv_into(buf)
        fail("recv returned although nothing was sent")
    except Interrupted:
        pass
    t.join()
    signal.signal(signal.SIGUSR1, old)
    expect(direct_received(scictl) == before, "a signal ends a posted wait with nothing filled")
    data = pattern(3, 300 * 1024)
    with sending(cli, data):
        got = recv_exact(acc, len(data))
    expect(got == data, "the bytes sent after the interrupted wait all arrive, in order")


def case_timeout(scictl, cli, acc):
    acc.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200000))
    r = Reader(acc, 1 << 20)
    r.start()
    r.join()
    expect(isinstance(r.err, BlockingIOError), f"SO_RCVTIMEO ends a posted wait with EAGAIN ({r.err})")
    acc.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))
    r = Reader(acc, 1 << 20)
    r.start_and_sleep()
    before = direct_received(scictl)
    data = pattern(4, 500 * 1024)
    cli.sendall(data)
    got = r.data()
    expect(got == data and direct_received(scictl) - before == len(data),
           "after the timeout the next wait is filled directly, exactly with what was sent")


def case_peek(scictl, cli, acc):
    r = Reader(acc, 1 << 20, socket.MSG_PEEK)
    r.start_and_sleep()
    before = direct_received(scictl)
    data = pattern(5, 100 * 1024)
    cli.sendall(data)
    peeked = r.data()
    expect(data.startswith(peeked) and len(peeked) > 0, "MSG_PEEK sees the start of what was sent")
    expect(recv_exact(acc, len(data)) == data, "and the bytes are still there to read")
    expect(direct_received(scictl) == before, "MSG_PEEK never takes the direct path")


def case_waitall(scictl, cli, acc):
    total = 2 << 20
    r = Reader(acc, total, socket.MSG_WAITALL)
    r.start_and_sleep()
    data = pattern(6, total)
    rnd = random.Random(6)
    pos = 0
    while pos < total:
        n = rnd.choice([100, 3000, 100 * 1024, 700 * 1024])
        cli.sendall(data[pos : pos + n])
        pos += n
    got = r.data()
    expect(got == data, "MSG_WAITALL of 2 MiB from sends large and small: every byte, in order")


def case_small(scictl, cli, acc):
    before = direct_received(scictl)
    for i in range(50):
        cli.sendall(b"14 bytes, no.%02d"[:14])
        got = acc.recv(1 << 20)
        if len(got) != 14:
            fail(f"ping {i}: got {len(got)} bytes")
        acc.sendall(b"x" * 14)
        recv_exact(cli, 14)
    expect(direct_received(scictl) == before,
           "14 B messages into a 1 MiB buffer keep to the ring (the writer's sends are small)")


def guarded(size, good):
    """An anonymous mapping of `size` bytes whose bytes past `good` fault."""
    m = mmap.mmap(-1, size)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    if libc.mprotect(addr + good, size - good, 0) != 0:
        fail(f"mprotect: {os.strerror(ctypes.get_errno())}")
    return m


def case_faults(scictl, cli, acc):
    # The reader's buffer faults half-way: the writer fills what could be pinned.
    m = guarded(512 * 1024, 256 * 1024)
    r = Reader(acc, [memoryview(m)[: 256 * 1024]])
    r.start_and_sleep()
    data = pattern(7, 400 * 1024)
    with sending(cli, data):
        first = r.data()
        rest = recv_exact(acc, len(data) - len(first))
    expect(first + rest == data, "a reader's buffer pinned in part: every byte, in order")
    # A recv into the faulting part itself: EFAULT, as over TCP, and nothing lost (the
    # bytes fit in the ring: nobody reads while they are sent).
    data = data[: 100 * 1024]
    cli.sendall(data)
    try:
        acc.recv_into(memoryview(m)[256 * 1024 :])
        fail("recv into PROT_NONE memory succeeded")
    except OSError as e:
        expect(e.errno == errno.EFAULT, f"recv into a faulting buffer: EFAULT ({e})")
    expect(recv_exact(acc, len(data)) == data, "and the bytes wait intact for the next recv")
    # The writer's buffer faults half-way while the reader waits with a large buffer.
    r = Reader(acc, 1 << 20)
    r.start_and_sleep()
    before = direct_received(scictl)
    src = guarded(512 * 1024, 256 * 1024)
    src[: 256 * 1024] = pattern(8, 256 * 1024)
    n = cli.send(memoryview(src))
    got = r.data()
    expect(n == 256 * 1024 and got == pattern(8, 256 * 1024),
           f"a writer that faults half-way sends (and the reader gets) what was readable ({n})")
    expect(direct_received(scictl) - before == n, "filled directly")


def case_readv(scictl, cli, acc):
    """recvmsg into several buffers: only the first is ever posted, if large enough."""
    for first, direct in ((100, False), (1 << 20, True)):
        r = Reader(acc, [bytearray(first), bytearray(1 << 20)])
        r.start_and_sleep()
        before = direct_received(scictl)
        data = pattern(9, 300 * 1024)
        cli.sendall(data)
        got = r.data()
        n = len(got)
        moved = direct_received(scictl) - before
        expect(got == data[:n] and n > 0,
               f"recvmsg into {first} B + 1 MiB: {n} bytes, in order")
        expect((moved > 0) == direct,
               f"a first buffer of {first} B is {'' if direct else 'not '}filled directly ({moved})")
        rest = recv_exact(acc, len(data) - n)
        expect(got + rest == data, "and the rest follows")


def semantics(scictl):
    for case in (case_partial, case_signal, case_timeout, case_peek, case_waitall,
                 case_small, case_faults, case_readv):
        print(f"# {case.__name__}", flush=True)
        cli, acc = primed_pair()
        case(scictl, cli, acc)
        cli.close()
        acc.close()


def stream(scictl, seed):
    """Connections at once, both ways, sends and buffers of random sizes (seeded). Now
    and then (seeded) a writer whose last send was large waits for its reader to sleep
    in recv first, so that some fills are direct whatever the scheduler does."""
    print(f"seed {seed}", flush=True)
    conns, per_dir = 8, 12 << 20
    before = direct_received(scictl)
    errors = []
    waits = []

    def writer(s, rnd, data, reader):
        pos = 0
        prev_large = False
        while pos < len(data):
            n = min(rnd.choice([7, 1500, 64 * 1024, 300 * 1024, 1 << 20, 3 << 20]), len(data) - pos)
            if prev_large and rnd.random() < 0.25:
                reader.started_evt.wait()
                wait_until(lambda: asleep_in_recv(reader.tid), "a reader to sleep in recv")
                waits.append(n)
            s.sendall(data[pos : pos + n])
            prev_large = n >= MIN
            pos += n
        s.shutdown(socket.SHUT_WR)

    class StreamReader(threading.Thread):
        def __init__(self, s, rnd, want):
            super().__init__()
            self.s, self.rnd, self.want = s, rnd, want
            self.tid = None
            self.started_evt = threading.Event()

        def run(self):
            self.tid = threading.get_native_id()
            self.started_evt.set()
            h = hashlib.sha256()
            buf = bytearray(5 << 20)
            while True:
                off = self.rnd.randrange(0, 4096)
                size = self.rnd.choice([MIN, 200 * 1024, 1 << 20, 4 << 20])
                n = self.s.recv_into(memoryview(buf)[off : off + size])
                if n == 0:
                    break
                h.update(memoryview(buf)[off : off + n])
            if h.hexdigest() != hashlib.sha256(self.want).hexdigest():
                errors.append("digest mismatch")

    threads = []
    for i in range(conns):
        cli, acc = pair()
        for j, (w, r) in enumerate(((cli, acc), (acc, cli))):
            data = pattern(seed * 100 + i * 2 + j, per_dir)
            reader = StreamReader(r, random.Random(~seed - i * 2 - j), data)
            threads.append(reader)
            threads.append(threading.Thread(target=writer, args=(w, random.Random(seed + i * 2 + j), data, reader)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect(not errors, f"{conns} connections, {per_dir >> 20} MiB each way, random sizes: every digest matches")
    moved = direct_received(scictl) - before
    expect(len(waits) > 0 and moved >= len(waits),
           f"{len(waits)} sends waited for a sleeping reader: filled directly ({moved} bytes)")


def kill(scictl, seed):
    """A reader killed while it waits, or while a writer fills its buffer."""
    print(f"seed {seed}", flush=True)
    rnd = random.Random(seed)
    for round_ in range(12):
        cli, acc = primed_pair()
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            cli.close()
            os.close(rfd)
            buf = bytearray(4 << 20)
            while True:
                n = acc.recv_into(buf)
                if n == 0:
                    os._exit(0)
                os.write(wfd, b"%d\n" % n)
        os.close(wfd)
        acc.close()
        stop_after = rnd.randrange(0, 24 << 20)
        outcome = {}

        def write():
            data = pattern(round_, 4 << 20)
            try:
                while True:
                    cli.sendall(data)
            except OSError as e:
                outcome["err"] = e.errno

        t = threading.Thread(target=write)
        t.start()
        got = 0
        with os.fdopen(rfd) as progress:
            while got < stop_after:
                line = progress.readline()
                if not line:
                    fail("the reader stopped before it was killed")
                got += int(line)
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        t.join()
        if outcome.get("err") not in (errno.EPIPE, errno.ECONNRESET):
            fail(f"round {round_}: the writer ended with {outcome}, not EPIPE or ECONNRESET")
        cli.close()
    expect(True, "12 readers killed mid-transfer: each writer sees EPIPE/ECONNRESET, nothing hangs")


def main():
    global MIN
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    with open("/sys/module/af_sci/parameters/direct_min") as f:
        MIN = int(f.read())
    if MIN == 0:
        fail("direct_min is 0: the direct path is off")
    cmd, scictl = sys.argv[1], sys.argv[2]
    if cmd == "semantics":
        semantics(scictl)
    elif cmd == "stream":
        stream(scictl, int(sys.argv[3]))
    elif cmd == "kill":
        kill(scictl, int(sys.argv[3]))
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
