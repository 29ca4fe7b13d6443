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
import sys
import time

from memcached_udp import get_request, parse_answer, store, value_body

port = int(sys.argv[1])
host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
keys = {f"sci-key-{i}": f"value-{i * 7919}" for i in range(100)}
store((host, port), keys, 30)
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
        udp.send(get_request(rid, k))
        sends += 1
    udp.settimeout(2)
    try:
        while waiting:
            data = udp.recv(4096)
            rid, seq, total, body = parse_answer(data)
            assert (seq, total) == (0, 1), (seq, total)
            k = ids[rid]
            want = value_body(k, keys[k])
            assert body == want, (body, want)
            waiting.pop(rid, None)
    except socket.timeout:
        pass
print(f"memcached: {len(keys)} values read back over UDP ({sends} requests sent)")
