#!/usr/bin/env python3
"""A crowd of UDP clients against one unmodified server socket, as a load generator
drives memcached's UDP port: more client sockets than one socket takes peers over SCI,
so the receiver's cap on inbound implicit connections (64) and the sender's cap on
destinations (16) are both reached while every datagram still arrives. Run it under
`SCI_DGRAM=1 sci-run` against memcached under the same (its worker threads all read the
one UDP socket from their own epoll loops).

Usage: sci_udp_crowd.py PORT [SERVER_PID] [--host H] [--sockets N] [--rounds R]
                          [--depth D] [--seed S]

Stores KEYS values of seeded random lengths over memcached's TCP port, then opens N UDP
sockets (default 80), half of them connected to the server and half sending with
`sendto`, all in one epoll loop, half of each edge-triggered (read until EAGAIN) and half
level-triggered (one read a wake-up). Each socket keeps D requests in flight (default 2), each a `get` of
a seeded random key with an id of its own, until R answers came back (default 30) and,
while SERVER_PID's datagram socket has not yet been seen at both caps, on. Every answer
must carry an id in flight and the value stored; a request unanswered for 2 s is sent
again (UDP may drop one at a full buffer), and only an answer to a request sent again may
come twice. SERVER_PID's fdinfo is read every 0.2 s: its `sci-implicit: out O in I` may
never exceed the caps and must reach both. Without SERVER_PID (the server in another
guest) the clients' own fdinfo stands for it: the server's peers in are the client
sockets with a connection out, its destinations the ones with a connection in. Then
only the cap on peers in is held to "never exceeded": a client ends its own connection
out before the server's slot is free, but the server ends its connections out (idle
ones) before their clients see them end, so for a moment the clients may count one more.

Prints the seed first, then one JSON line: the answers, requests sent again, duplicates,
the server's peak connections both ways, and how many client sockets sent and received
over SCI (their fdinfo counters). Exits 1 when an answer is wrong, one is missing after
240 s, a cap was exceeded or not reached, or fewer sockets than the caps allow took SCI.
"""

import argparse
import glob
import json
import os
import random
import select
import socket
import sys
import time

from memcached_udp import get_request, parse_answer, store, value_body
from sci_dgram_socket import counters, implicit_conns

# The caps of one AF_SCI datagram socket (rust/socket/dgram/inbound.rs MAX_IN,
# rust/socket/dgram/implicit.rs MAX_OUT; Documentation/af_sci.rst, "What stays UDP").
MAX_IN, MAX_OUT = 64, 16
KEYS = 40
RESEND_S, DEADLINE_S, SAMPLE_S = 2.0, 240.0, 0.2

ap = argparse.ArgumentParser()
ap.add_argument("port", type=int)
ap.add_argument("server_pid", type=int, nargs="?")
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--sockets", type=int, default=80)
ap.add_argument("--rounds", type=int, default=30)
ap.add_argument("--depth", type=int, default=2)
ap.add_argument("--seed", type=int, default=int(time.time()))
args = ap.parse_args()
print(f"seed {args.seed}", flush=True)
rng = random.Random(args.seed)
server = (args.host, args.port)

values = {f"crowd-{i}": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                                for _ in range(rng.randint(1, 900)))
          for i in range(KEYS)}
store(server, values, 60)
keys = list(values)


def server_conns():
    """The implicit connections (out, in) of the server's busiest datagram socket.

    The caps are per socket, and a server may hold one socket under several fds
    (memcached dup()s its UDP socket once per worker thread), so each socket is
    read once, by its inode, and the largest counts are what is returned."""
    seen = {}
    for path in glob.glob(f"/proc/{args.server_pid}/fdinfo/*"):
        try:
            ino = os.stat(path.replace("/fdinfo/", "/fd/")).st_ino
        except OSError:
            continue
        seen[ino] = implicit_conns(path)
    return (max((o for o, _ in seen.values()), default=0),
            max((i for _, i in seen.values()), default=0))


def clients_view():
    """The server's (out, in) as its clients see them: the client sockets with an
    implicit connection from the server, and the ones with one to it."""
    out = inn = 0
    for c in clients:
        to_server, from_server = implicit_conns(f"/proc/self/fdinfo/{c.sock.fileno()}")
        out += from_server
        inn += to_server
    return out, inn


class Client:
    """One UDP socket and its requests in flight: id -> [key, last sent]."""

    def __init__(self, n):
        self.n = n
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.connected = n % 2 == 0
        if self.connected:
            self.sock.connect(server)
        self.sock.setblocking(False)
        # Both kinds of socket, each edge- and level-triggered.
        self.edge = (n // 2) % 2 == 0
        self.next_id = 1
        self.flight = {}
        self.answered = 0
        self.resent = 0
        self.duplicates = 0
        self.resent_ids = set()

    def send(self, rid, key):
        data = get_request(rid, key)
        if self.connected:
            self.sock.send(data)
        else:
            self.sock.sendto(data, server)

    def ask(self):
        rid, self.next_id = self.next_id, self.next_id % 65535 + 1
        key = rng.choice(keys)
        self.flight[rid] = [key, time.monotonic()]
        self.send(rid, key)

    def take(self, data):
        """One answer: checked against the request in flight, else a duplicate of one
        that was sent again and already answered (the only duplicate UDP may show)."""
        rid, seq, total, body = parse_answer(data)
        req = self.flight.pop(rid, None)
        if req is None:
            if rid in self.resent_ids:
                self.duplicates += 1
                return
            sys.exit(f"socket {self.n}: an answer with id {rid}, not in flight")
        key = req[0]
        if (seq, total) != (0, 1) or body != value_body(key, values[key]):
            sys.exit(f"socket {self.n}: wrong answer to {key}: {data[:80]!r}...")
        self.answered += 1


clients = [Client(n) for n in range(args.sockets)]
ep = select.epoll()
by_fd = {}
for c in clients:
    ep.register(c.sock.fileno(), select.EPOLLIN | (select.EPOLLET if c.edge else 0))
    by_fd[c.sock.fileno()] = c
for c in clients:
    for _ in range(args.depth):
        c.ask()

start = time.monotonic()
view = server_conns if args.server_pid else clients_view
want_out, want_in = min(MAX_OUT, args.sockets), min(MAX_IN, args.sockets)
peak_out = peak_in = 0
over = None
last_sample = 0.0
while True:
    now = time.monotonic()
    if now - last_sample >= SAMPLE_S:
        last_sample = now
        out, inn = view()
        peak_out, peak_in = max(peak_out, out), max(peak_in, inn)
        if (out > MAX_OUT and args.server_pid) or inn > MAX_IN:
            over = over or (out, inn)
    caps = peak_out >= want_out and peak_in >= want_in
    if caps and all(c.answered >= args.rounds for c in clients):
        break
    if now - start > DEADLINE_S:
        break
    for fd, _ in ep.poll(SAMPLE_S):
        c = by_fd[fd]
        # Edge-triggered: read until EAGAIN, or the next datagram wakes nobody.
        # Level-triggered: one read per wake-up, as an event loop takes them.
        while True:
            try:
                data = c.sock.recv(2048)
            except BlockingIOError:
                break
            c.take(data)
            if c.answered < args.rounds or not caps:
                c.ask()
            if not c.edge:
                break
    now = time.monotonic()
    for c in clients:
        for rid, req in c.flight.items():
            if now - req[1] >= RESEND_S:
                req[1] = now
                c.resent += 1
                c.resent_ids.add(rid)
                c.send(rid, req[0])

out_now, in_now = view()
over_sci = [counters(c.sock) for c in clients]
sent_sci = sum(1 for n in over_sci if n.get("sent", 0) > 0)
got_sci = sum(1 for n in over_sci if n.get("received", 0) > 0)
report = {
    "seed": args.seed, "sockets": args.sockets,
    "answers": sum(c.answered for c in clients),
    "short": sum(1 for c in clients if c.answered < args.rounds),
    "resent": sum(c.resent for c in clients),
    "duplicates": sum(c.duplicates for c in clients),
    "view": "server" if args.server_pid else "clients",
    "server_peak": {"out": peak_out, "in": peak_in}, "server_end": {"out": out_now, "in": in_now},
    "sockets_sent_over_sci": sent_sci, "sockets_received_over_sci": got_sci,
    "seconds": round(time.monotonic() - start, 1),
}
print(json.dumps(report), flush=True)
bad = []
if report["short"]:
    bad.append(f"{report['short']} sockets short of {args.rounds} answers after {DEADLINE_S:.0f} s")
if over:
    bad.append(f"the server's socket had out {over[0]} in {over[1]} implicit connections, "
               f"over the caps {MAX_OUT} and {MAX_IN}")
if peak_out < want_out or peak_in < want_in:
    bad.append(f"the server's socket never reached out {want_out} in {want_in} "
               f"(peak out {peak_out} in {peak_in})")
if sent_sci < want_in or got_sci < want_out:
    bad.append(f"{sent_sci} sockets sent and {got_sci} received over SCI, fewer than "
               f"{want_in} and {want_out}")
if bad:
    sys.exit("; ".join(bad))
