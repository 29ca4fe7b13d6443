#!/usr/bin/env python3
"""Checksummed stream both ways over one connection to 127.0.0.1, run under sci-run.

Asserts through SCI_INFO that both ends really are AF_SCI connections in mode
`expected` (sci or native), then moves MIB MiB in each direction at once and compares
the SHA-256 digest of what each end received with that of the stream sent to it. Exit
status 0 only if everything matched.

usage: sci_stream.py MIB sci|native
       sci_stream.py --digests MIB   (on the host: SCI_STREAM_DIGESTS for a MIB run)
"""
import hashlib
import os
import random
import socket
import struct
import sys
import threading

SOL_SCI, SCI_INFO = 300, 1
MODES = {"native": 0, "sci": 1}


def mode(sock):
    return struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))[0]


BLOCK = 1 << 17


def chunks(seed, total):
    """`total` seeded bytes in 128 KiB blocks, block k the first rotated by k * 7919: no
    two blocks alike (up to 16 GiB), so a span lost and another repeated cannot leave the
    digest unchanged, as they could in a stream that repeats itself. Each block is a view
    of the seeded bytes written twice, not a copy: in a TCG guest Python copies no faster
    than it hashes (less CPU per byte; the time it saves, selftests/README.md)."""
    base = random.Random(seed).randbytes(BLOCK)
    twice = memoryview(base + base)
    k = 0
    while k * BLOCK < total:
        r = (k * 7919) % BLOCK
        yield twice[r:r + min(BLOCK, total - k * BLOCK)]
        k += 1


def digest(seed, total):
    """SHA-256 (hex) of chunks(seed, total): what the receiver's digest must be. make test
    works out those of the 1 GiB run on the host (--digests), where SHA-256 is some fifty
    times faster than in a TCG guest, and hands them in as SCI_STREAM_DIGESTS, so that the
    senders need not hash what they send; any other is hashed here. Both use the same
    Python: the guest runs the host's root file system."""
    key = f"b{seed.hex()}:{total}"
    for item in os.environ.get("SCI_STREAM_DIGESTS", "").split():
        name, _, value = item.partition("=")
        if name == key:
            return value
    h = hashlib.sha256()
    for chunk in chunks(seed, total):
        h.update(chunk)
    return h.hexdigest()


SEEDS = (b"c", b"s")


def pump(sock, total, seed, result):
    """Send `total` pseudo-random bytes; record the digest they must arrive with."""
    for chunk in chunks(seed, total):
        sock.sendall(chunk)
    sock.shutdown(socket.SHUT_WR)
    result["sent"] = digest(seed, total)


def drain(sock, result):
    h = hashlib.sha256()
    while True:
        data = sock.recv(1 << 16)
        if not data:
            break
        h.update(data)
    result["got"] = h.hexdigest()


def main():
    if sys.argv[1] == "--digests":
        total = int(sys.argv[2]) << 20
        os.environ.pop("SCI_STREAM_DIGESTS", None)
        print(" ".join(f"b{seed.hex()}:{total}={digest(seed, total)}" for seed in SEEDS))
        return
    total = int(sys.argv[1]) << 20
    want = MODES[sys.argv[2]]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.create_connection(srv.getsockname())
    acc, _ = srv.accept()
    for name, s in (("client", cli), ("server", acc)):
        if mode(s) != want:
            sys.exit(f"{name} socket is in mode {mode(s)}, expected {want}")
    a, b = {}, {}
    threads = [
        threading.Thread(target=pump, args=(cli, total, SEEDS[0], a)),
        threading.Thread(target=drain, args=(acc, a)),
        threading.Thread(target=pump, args=(acc, total, SEEDS[1], b)),
        threading.Thread(target=drain, args=(cli, b)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = a.get("sent") == a.get("got") and b.get("sent") == b.get("got")
    print(f"{total >> 20} MiB each way, mode {sys.argv[2]}: {'digests match' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
