#!/usr/bin/env python3
"""Checksummed stream both ways over one connection to 127.0.0.1, run under sci-run.

Asserts through SCI_INFO that both ends really are AF_SCI connections in mode
`expected` (sci or native), then moves MIB MiB in each direction at once and compares
the SHA-256 digest of what each end received with that of the stream sent to it
(selftests/harness/seeded_stream.py). Exit status 0 only if everything matched.

usage: sci_stream.py MIB sci|native
       sci_stream.py --digests MIB   (on the host: SCI_STREAM_DIGESTS for a MIB run)
"""
import hashlib
import os
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from seeded_stream import Stream, print_stream_digests, stream_digest  # noqa: E402

SOL_SCI, SCI_INFO = 300, 1
MODES = {"native": 0, "sci": 1}
# The client's stream and the server's.
SEEDS = (b"c", b"s")


def mode(sock):
    return struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))[0]


def pump(sock, total, seed, result):
    """Send the first `total` bytes of stream `seed`; record the digest they must arrive
    with."""
    for part in Stream(seed).views(0, total):
        sock.sendall(part)
    sock.shutdown(socket.SHUT_WR)
    result["sent"] = stream_digest(seed, total)


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
        print_stream_digests([(seed, total) for seed in SEEDS])
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
