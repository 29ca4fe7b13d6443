#!/usr/bin/env python3
"""Datagrams that UDP holds to the link's MTU (DF kept, and segments) over an implicit
connection between two machines, as UDP holds them: run under `SCI_DGRAM=1 sci-run` against the UDP echo server (sci_udp_echo.py serve)
on another node whose link has Ethernet's MTU (pair-tests --sci: virtio-net, 1500).

    sci_udp_dontfrag.py HOST PORT

Once the socket's datagrams go over SCI (its fdinfo count of datagrams sent over SCI
grows), with IP_PMTUDISC_DO: a datagram of 1472 bytes (a 1500-byte packet) goes over SCI
and is echoed; one of 1473 bytes is refused with EMSGSIZE, as UDP refuses it on that
link, not sent over SCI. With IP_PMTUDISC_DONT a datagram of 3000 bytes goes over SCI
and is echoed. With UDP_SEGMENT 1472, a send of two segments goes over SCI as two
datagrams, both echoed; with UDP_SEGMENT 1473 a send of two segments is refused with
EMSGSIZE, as UDP refuses a segment whose packet exceeds the link's MTU, and nothing goes
over SCI. Prints one line of JSON; exits 1 when any of that does not hold.
"""

import errno
import json
import socket
import sys
import time

from sci_dgram_socket import counters

# <linux/in.h>
IP_MTU_DISCOVER, IP_PMTUDISC_DONT, IP_PMTUDISC_DO = 10, 0, 2
# <linux/udp.h>
SOL_UDP, UDP_SEGMENT = 17, 103


def sent(sock):
    return counters(sock).get("sent", 0)


def echo(sock, dest, data):
    """Sends `data` and waits for its echo (5 s): whether it came back intact."""
    sock.sendto(data, dest)
    try:
        return sock.recv(65535) == data
    except socket.timeout:
        return False


def echo_segments(sock, dest, segments):
    """Sends `segments` in one UDP_SEGMENT send and waits for their echoes (5 s each):
    whether each came back intact and in order, or the send's error name."""
    try:
        sock.sendto(b"".join(segments), dest)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    try:
        return all(sock.recv(65535) == seg for seg in segments)
    except socket.timeout:
        return False


def main():
    dest = (sys.argv[1], int(sys.argv[2]))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    report = {}
    end, i = time.monotonic() + 30, 0
    while sent(s) == 0 and time.monotonic() < end:
        echo(s, dest, b"warm-up %d" % i)
        i += 1
    report["warm_up"] = i
    if sent(s) == 0:
        print(json.dumps(dict(report, error="no datagram went over SCI in 30 s")))
        return 1
    before = sent(s)
    report["df_1472_echoed"] = echo(s, dest, b"a" * 1472)
    report["df_1472_over_sci"] = sent(s) - before == 1
    before = sent(s)
    try:
        s.sendto(b"b" * 1473, dest)
        report["df_1473"] = "sent"
    except OSError as e:
        report["df_1473"] = errno.errorcode.get(e.errno, str(e.errno))
    report["df_1473_over_sci"] = sent(s) - before
    s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
    before = sent(s)
    report["no_df_3000_echoed"] = echo(s, dest, b"c" * 3000)
    report["no_df_3000_over_sci"] = sent(s) - before == 1
    s.setsockopt(SOL_UDP, UDP_SEGMENT, 1472)
    before = sent(s)
    report["segments_1472_echoed"] = echo_segments(s, dest, [b"d" * 1472, b"e" * 1472])
    report["segments_1472_over_sci"] = sent(s) - before
    s.setsockopt(SOL_UDP, UDP_SEGMENT, 1473)
    before = sent(s)
    report["segments_1473"] = echo_segments(s, dest, [b"f" * 1473, b"g" * 1473])
    report["segments_1473_over_sci"] = sent(s) - before
    ok = (report["df_1472_echoed"] and report["df_1472_over_sci"]
          and report["df_1473"] == "EMSGSIZE" and report["df_1473_over_sci"] == 0
          and report["no_df_3000_echoed"] and report["no_df_3000_over_sci"]
          and report["segments_1472_echoed"] is True and report["segments_1472_over_sci"] == 2
          and report["segments_1473"] == "EMSGSIZE" and report["segments_1473_over_sci"] == 0)
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
