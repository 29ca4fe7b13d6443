"""What a datagram socket of a test program says of its path: its SCI_INFO mode and its
fdinfo counters of datagrams over SCI (for the UDP test clients of selftests/guest, run
under `SCI_DGRAM=1 sci-run`, whose sockets are then AF_SCI datagram sockets)."""

import struct

SOL_SCI, SCI_INFO = 300, 1


def mode_of(sock):
    """The socket's SCI_INFO mode ("sci", "native"), or "udp" for a plain socket."""
    try:
        mode = struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))[0]
    except OSError:
        return "udp"
    return {0: "native", 1: "sci"}.get(mode, str(mode))


def fdinfo_fields(path, tag):
    """The NAME VALUE pairs of the fdinfo file `path`'s line `tag` ("sci-datagrams:",
    "sci-implicit:"), as a dict of ints ({} when the file or the line is not there)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(tag):
                    words = line.split()[1:]
                    return {k: int(v) for k, v in zip(words[::2], words[1::2])}
    except OSError:
        pass
    return {}


def counters(sock):
    """The fdinfo "sci-datagrams:" counters of the socket ({} for a plain socket)."""
    return fdinfo_fields(f"/proc/self/fdinfo/{sock.fileno()}", "sci-datagrams:")


def implicit_conns(path):
    """The fdinfo file `path`'s "sci-implicit:" counts, (out, in): the socket's implicit
    connections up to destinations and from peers ((0, 0) for a plain socket)."""
    conns = fdinfo_fields(path, "sci-implicit:")
    return conns.get("out", 0), conns.get("in", 0)
