#!/usr/bin/env python3
"""A DNS client that asks one name many times over one UDP socket, as a resolver library
or a load generator keeps its socket: run it under `SCI_DGRAM=1 sci-run` against an
unmodified DNS server (dnsmasq) under the same, and its queries and the server's answers
take implicit SCI connections once they are up. DNS servers bound to the wildcard address
read IP_PKTINFO with each query and answer with it (from the address the query came to),
so this is what shows the packet information over the fabric, both ways.

Usage: sci_dns_client.py HOST PORT NAME ADDRESS [QUERIES]

Sends QUERIES (default 200) A queries for NAME, one at a time; each answer must carry the
query's id and ADDRESS. With SCI_EXPECT_SCI=1 it then goes on asking (at most 20 s) until
an answer came over SCI, and asks 50 more, every one of which must come over SCI: its
query sent over SCI and its answer received over SCI (the socket's fdinfo counters).
Prints one JSON line: queries, the socket's mode, its fdinfo counters, and how many of the
last 50 queries and answers went over SCI. Exits 1 on a wrong or missing answer, or when
the SCI path was expected and not taken.
"""

import json
import os
import socket
import struct
import sys
import time

from sci_dgram_socket import counters, mode_of

# Queries at the end that must all go, and be answered, over SCI.
LAST = 50


def query(qid, name):
    """An A query for name, recursion desired."""
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p)
    return struct.pack("!6H", qid, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", 1, 1)


def skip_name(data, i):
    """The offset after the (possibly compressed) name at offset i."""
    while True:
        n = data[i]
        if n & 0xC0 == 0xC0:
            return i + 2
        if n == 0:
            return i + 1
        i += n + 1


def answer_address(data, qid):
    """The first A record's address in the answer to query qid (None if it is not one)."""
    if len(data) < 12:
        return None
    rid, flags, qd, an = struct.unpack("!4H", data[:8])
    if rid != qid or not flags & 0x8000 or flags & 0xF:
        return None
    i = 12
    for _ in range(qd):
        i = skip_name(data, i) + 4
    for _ in range(an):
        i = skip_name(data, i)
        rtype, _, _, rdlen = struct.unpack("!HHIH", data[i:i + 10])
        i += 10
        if rtype == 1 and rdlen == 4:
            return socket.inet_ntoa(data[i:i + 4])
        i += rdlen
    return None


def ask(sock, dest, qid, name, address):
    """One query and its answer; False (and a message) when the answer is wrong."""
    sock.sendto(query(qid, name), dest)
    try:
        data = sock.recv(4096)
    except OSError as e:
        print(f"query {qid}: no answer ({e})", file=sys.stderr)
        return False
    got = answer_address(data, qid)
    if got != address:
        print(f"query {qid}: answer {got!r}, expected {address}", file=sys.stderr)
        return False
    return True


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    host, port, name, address = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    queries = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.settimeout(10)
    dest = (host, port)
    qid = 1
    for _ in range(queries):
        if not ask(s, dest, qid, name, address):
            return 1
        qid = qid % 65535 + 1
    result = {"queries": queries}
    if os.environ.get("SCI_EXPECT_SCI") == "1":
        end = time.monotonic() + 20
        while counters(s).get("received", 0) == 0 and time.monotonic() < end:
            if not ask(s, dest, qid, name, address):
                return 1
            qid = qid % 65535 + 1
        before = counters(s)
        for _ in range(LAST):
            if not ask(s, dest, qid, name, address):
                return 1
            qid = qid % 65535 + 1
        after = counters(s)
        result["queries_over_sci"] = after.get("sent", 0) - before.get("sent", 0)
        result["answers_over_sci"] = after.get("received", 0) - before.get("received", 0)
    result.update(mode=mode_of(s), **counters(s))
    print(json.dumps(result))
    if "answers_over_sci" in result and not (
            result["queries_over_sci"] == LAST and result["answers_over_sci"] == LAST):
        print(f"of the last {LAST} queries, {result['queries_over_sci']} went and "
              f"{result['answers_over_sci']} answers came over SCI", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
