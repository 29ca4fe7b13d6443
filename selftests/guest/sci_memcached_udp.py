#!/usr/bin/env python3
"""memcached over UDP from an unmodified client socket (run under SCI_DGRAM=1 sci-run).

Usage: sci_memcached_udp.py PORT [HOST]     (HOST: default 127.0.0.1)

Stores 100 keys over memcached's TCP port, then reads each back over its UDP port (the
8-byte UDP frame header: request id, sequence 0, 1 datagram, reserved), many requests
in flight at once on one socket, and checks every answer's id and value. A request not
answered within 2 s is sent again, as a memcached UDP client must (UDP, between two
machines, may lose one; an answer that comes twice counts once). Exits 0 when all 100
came back intact within 60 s.
"""

import socket
import struct
import sys
import time

port = int(sys.argv[1])
host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
keys = {f"sci-key-{i}": f"value-{i * 7919}" for i in range(100)}
tcp = socket.create_connection((host, port), timeout=30)
for k, v in keys.items():
    tcp.sendall(f"set {k} 0 0 {len(v)}\r\n{v}\r\n".encode())
    reply = b""
    while not reply.endswith(b"\r\n"):
        reply += tcp.recv(100)
    assert reply == b"STORED\r\n", reply
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.connect((host, port))
ids = {n + 1: k for n, k in enumerate(keys)}
waiting = dict(ids)
sends = 0
end = time.monotonic() + 60
while waiting:
    if time.monotonic() > end:
        sys.exit(f"memcached: {len(waiting)} of {len(keys)} values not read back in 60 s")
    for rid, k in waiting.items():
        udp.send(struct.pack("!HHHH", rid, 0, 1, 0) + f"get {k}\r\n".encode())
        sends += 1
    udp.settimeout(2)
    try:
        while waiting:
            data = udp.recv(4096)
            rid, seq, total, _ = struct.unpack("!HHHH", data[:8])
            assert (seq, total) == (0, 1), (seq, total)
            k = ids[rid]
            want = f"VALUE {k} 0 {len(keys[k])}\r\n{keys[k]}\r\nEND\r\n".encode()
            assert data[8:] == want, (data[8:], want)
            waiting.pop(rid, None)
    except socket.timeout:
        pass
print(f"memcached: {len(keys)} values read back over UDP ({sends} requests sent)")
