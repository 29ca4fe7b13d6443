#!/usr/bin/env python3
"""The two ends of the test that a datagram socket's first datagrams over SCI do not
overtake those it sent over UDP while its implicit connection came up (the pair's
check_udp_follow). Both are plain UDP programs: under `SCI_DGRAM=1 sci-run` their sockets
are AF_SCI datagram sockets.

Usage: sci_udp_follow.py receive PORT COUNT
       sci_udp_follow.py send HOST PORT

receive  binds 0.0.0.0:PORT, takes COUNT datagrams (numbered ones of SIZE bytes, as send
         sends them), then prints one JSON line: their numbers in the order they came,
         whether each was intact, and its fdinfo counters (how many came over SCI).
send     one unconnected socket, bound to a port of its own, driven through standard input: each line "send FIRST
         LAST" sends datagrams FIRST to LAST to HOST:PORT with sendto, a line "state" sends
         nothing; after each it prints one JSON line: the socket's local port, its fdinfo
         counters (sent over SCI) and its outbound implicit connections still starting
         (fdinfo's sci-implicit-starting: node, port, answered or waiting, and the
         datagrams sent over UDP meanwhile).
"""

import json
import socket
import struct
import sys

from sci_dgram_socket import counters

SIZE = 1000


def payload(i):
    """Datagram i: its number, then SIZE - 8 bytes derived from it."""
    return struct.pack("!Q", i) + bytes((i * 11 + k) & 0xFF for k in range(SIZE - 8))


def starting(sock):
    """The socket's fdinfo lines "sci-implicit-starting: node N port P STATE over-udp K"
    as dicts."""
    found = []
    with open(f"/proc/self/fdinfo/{sock.fileno()}") as f:
        for line in f:
            if line.startswith("sci-implicit-starting:"):
                w = line.split()
                found.append({"node": int(w[2]), "port": int(w[4]), "state": w[5],
                              "over_udp": int(w[7])})
    return found


def receive(port, count):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    seqs, intact = [], True
    while len(seqs) < count:
        data = sock.recv(65536)
        i = struct.unpack("!Q", data[:8])[0] if len(data) >= 8 else -1
        intact = intact and data == payload(i)
        seqs.append(i)
    print(json.dumps({"seqs": seqs, "intact": intact, "counters": counters(sock)}), flush=True)


def send(host, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Bound first, so that the first datagram starts the implicit connection (an unbound
    # socket's first one binds it, and its second starts the connection).
    sock.bind(("0.0.0.0", 0))
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["send"]:
            for i in range(int(words[1]), int(words[2]) + 1):
                sock.sendto(payload(i), (host, port))
        print(json.dumps({"port": sock.getsockname()[1], "counters": counters(sock),
                          "starting": starting(sock)}), flush=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "receive":
        receive(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
