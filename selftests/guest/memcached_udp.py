"""memcached's text protocol as the UDP test clients use it (sci_memcached_udp.py,
sci_udp_crowd.py): values stored over TCP, then read back over UDP, whose datagrams
carry an 8-byte frame header (request id, sequence number, datagrams in the message,
reserved)."""

import socket
import struct
import sys


def store(server, values, timeout):
    """Sets every key of `values` over memcached's TCP port; exits on a reply other than
    STORED."""
    tcp = socket.create_connection(server, timeout=timeout)
    for k, v in values.items():
        tcp.sendall(f"set {k} 0 0 {len(v)}\r\n{v}\r\n".encode())
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += tcp.recv(100)
        if reply != b"STORED\r\n":
            sys.exit(f"memcached: set {k}: {reply!r}")
    tcp.close()


def get_request(rid, key):
    """A one-datagram `get` of `key` with request id `rid`."""
    return struct.pack("!HHHH", rid, 0, 1, 0) + f"get {key}\r\n".encode()


def parse_answer(data):
    """An answer's (request id, sequence number, datagrams in it, body)."""
    rid, seq, total, _ = struct.unpack("!HHHH", data[:8])
    return rid, seq, total, data[8:]


def value_body(key, value):
    """The body of the answer to a `get` of `key` that holds `value`."""
    return f"VALUE {key} 0 {len(value)}\r\n{value}\r\nEND\r\n".encode()
