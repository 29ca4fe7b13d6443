#!/usr/bin/env python3
"""A UDP echo server and its checking client, both plain UDP programs: run them under
`SCI_DGRAM=1 sci-run` and their sockets are AF_SCI datagram sockets, whose datagrams to
each other take an implicit SCI connection once it is up.

Usage: sci_udp_echo.py serve PORT
       sci_udp_echo.py client HOST PORT [ROUNDS [BURST]]
       sci_udp_echo.py probe HOST PORT

serve   echoes every datagram to its source, blocking in recvfrom (no poll), forever.
client  sends ROUNDS (default 500) numbered datagrams of varying sizes one at a time,
        each echoed back whole before the next, then BURST (default 64) at once and their
        echoes; every echo must be the datagram sent (payload and order within the
        burst). It waits (at most 20 s) for its socket's SCI_INFO to say mode sci before
        the burst when SCI_EXPECT_SCI=1. Prints one JSON line: rounds, the round at which
        the socket was first in mode sci (-1: never), its mode at the end and its
        fdinfo counters (sent, received and dropped over SCI). Exits 1 on a lost, torn or
        misordered echo.
probe   one socket, driven through standard input: each line "round SECONDS" sends one
        datagram and waits that long for its echo, then prints a JSON line: whether the
        echo came ({"echo": true}), and the socket's mode (for a test that watches the
        socket's implicit connection end when the peer's node dies, and come back).
"""

import json
import os
import socket
import struct
import sys
import time

from sci_dgram_socket import counters, mode_of


def payload(i):
    """Datagram i: its number, then bytes derived from it (1 to 1400 bytes in all)."""
    n = 8 + (i * 131) % 1393
    body = bytes((i * 7 + k) & 0xFF for k in range(n - 8))
    return struct.pack("!Q", i) + body


def serve(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(65535)
        s.sendto(data, peer)


def client(host, port, rounds, burst):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    dest = (host, port)
    first_sci = -1
    for i in range(rounds):
        s.sendto(payload(i), dest)
        data = s.recv(65535)
        if data != payload(i):
            print(f"round {i}: echo differs ({len(data)} bytes)", file=sys.stderr)
            return 1
        if first_sci < 0 and mode_of(s) == "sci":
            first_sci = i
    if os.environ.get("SCI_EXPECT_SCI") == "1":
        i, end = rounds, time.monotonic() + 20
        while mode_of(s) != "sci" and time.monotonic() < end:
            s.sendto(payload(i), dest)
            if s.recv(65535) != payload(i):
                print(f"round {i}: echo differs", file=sys.stderr)
                return 1
            i += 1
    base = rounds * 2 + 1000
    for k in range(burst):
        s.sendto(payload(base + k), dest)
    for k in range(burst):
        data = s.recv(65535)
        if data != payload(base + k):
            got = struct.unpack("!Q", data[:8])[0] if len(data) >= 8 else None
            print(f"burst {k}: got datagram {got}, expected {base + k}", file=sys.stderr)
            return 1
    print(json.dumps({"rounds": rounds, "first_sci": first_sci, "mode": mode_of(s),
                      **counters(s)}))
    return 0


def probe(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    n = 0
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["round"]:
            continue
        s.settimeout(float(words[1]))
        s.sendto(payload(n), (host, port))
        echo = False
        try:
            while not echo:
                echo = s.recv(65535) == payload(n)
        except OSError:
            pass
        n += 1
        print(json.dumps({"echo": echo, "mode": mode_of(s), **counters(s)}), flush=True)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) in (4, 5, 6) and sys.argv[1] == "client":
        rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 500
        burst = int(sys.argv[5]) if len(sys.argv) > 5 else 64
        sys.exit(client(sys.argv[2], int(sys.argv[3]), rounds, burst))
    elif len(sys.argv) == 4 and sys.argv[1] == "probe":
        probe(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
