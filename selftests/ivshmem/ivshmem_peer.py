#!/usr/bin/env python3
"""The listening end of the two-guest ivshmem test (runs on node B, under sci-run).

A stream socket (AF_SCI through the preload) listens on 0.0.0.0:PORT; the peer
guest's self-test client
(fabric_selftest=1 ivshmem_test_peer=B) connects over the ivshmem fabric. Checks that
the accepted socket is in mode sci, that the payload arrives intact (the client's
pattern: byte i is i % 251), answers "ok", then waits in recv() for the end of the
connection and prints how it ended: "reset MONOTONIC_MS" (ECONNRESET: the peer node
went down), or "eof MONOTONIC_MS" (the peer closed).

usage: sci-run ivshmem_peer.py PORT READY_FILE
Output lines: "mode sci", "payload ok NBYTES", then "reset MS" or "eof MS".
"""
import socket
import struct
import sys
import time

SOL_SCI, SCI_INFO = 300, 1
PAYLOAD = 256 * 1024


def main():
    port, ready = int(sys.argv[1]), sys.argv[2]
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(4)
    srv.getsockopt(SOL_SCI, SCI_INFO, 16)  # fails unless the preload made it AF_SCI
    open(ready, "w").close()
    conn, _ = srv.accept()
    mode = struct.unpack("4I", conn.getsockopt(SOL_SCI, SCI_INFO, 16))[0]
    print("mode", "sci" if mode == 1 else f"native({mode})", flush=True)
    got = bytearray()
    while len(got) < PAYLOAD:
        data = conn.recv(65536)
        if not data:
            break
        got += data
    want = bytes(i % 251 for i in range(PAYLOAD))
    print("payload", "ok" if bytes(got) == want else "BAD", len(got), flush=True)
    conn.sendall(b"ok")
    try:
        data = conn.recv(1)
        how = "eof" if not data else "data"
    except ConnectionResetError:
        how = "reset"
    print(how, int(time.monotonic() * 1000), flush=True)


if __name__ == "__main__":
    main()
