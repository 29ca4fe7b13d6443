#!/usr/bin/env python3
"""memcached over UDP from an unmodified client socket (run under SCI_DGRAM=1 sci-run).

Usage: sci_memcached_udp.py PORT

Stores 100 keys over memcached's TCP port, then reads each back over its UDP port (the
8-byte UDP frame header: request id, sequence 0, 1 datagram, reserved), many requests
in flight at once on one socket, and checks every answer's id and value. Exits 0 when
all 100 came back intact.
"""

import socket
import struct
import sys

port = int(sys.argv[1])
keys = {f"sci-key-{i}": f"value-{i * 7919}" for i in range(100)}
tcp = socket.create_connection(("127.0.0.1", port), timeout=30)
for k, v in keys.items():
    tcp.sendall(f"set {k} 0 0 {len(v)}\r\n{v}\r\n".encode())
    reply = b""
    while not reply.endswith(b"\r\n"):
        reply += tcp.recv(100)
    assert reply == b"STORED\r\n", reply
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.settimeout(10)
udp.connect(("127.0.0.1", port))
ids = {}
for n, k in enumerate(keys):
    ids[n + 1] = k
    udp.send(struct.pack("!HHHH", n + 1, 0, 1, 0) + f"get {k}\r\n".encode())
got = 0
while got < len(keys):
    data = udp.recv(4096)
    rid, seq, total, _ = struct.unpack("!HHHH", data[:8])
    assert (seq, total) == (0, 1), (seq, total)
    k = ids.pop(rid)
    want = f"VALUE {k} 0 {len(keys[k])}\r\n{keys[k]}\r\nEND\r\n".encode()
    assert data[8:] == want, (data[8:], want)
    got += 1
print(f"memcached: {got} values read back over UDP")
