"""The seeded byte streams of the checksummed transfers, in one guest and between two
(selftests/guest/sci_stream.py, selftests/pair/): Stream, the bytes to send or to check
received ones against, and stream_digest, the SHA-256 a receiver must find, worked out on
the host where it can be (SCI_STREAM_DIGESTS)."""

import hashlib
import os
import random

STREAM_BLOCK = 1 << 20


class Stream:
    """The bytes of stream `seed` (an int or bytes), to send or to check, in order: 1 MiB
    of seeded bytes, block k of the stream being it rotated by k * 7919 (mod 1 MiB), so no
    two blocks are alike and a lost or repeated span of any length shows as a wrong byte
    and a different digest.

    Block k is the 1 MiB at k * 7919 (mod 1 MiB) of the seeded bytes written twice, so a
    span is a view of them, not a copy. In a TCG guest (2026-12-03) spans made as copies
    came at 28 MiB/s and checked against received bytes at 30, as views at 153 and 110:
    the copies had cost each end of a 1 GiB transfer about as much CPU as its SHA-256
    (19 to 25 MiB/s)."""

    def __init__(self, seed):
        once = random.Random(seed).randbytes(STREAM_BLOCK)
        self.twice = memoryview(once + once)

    def views(self, pos, n):
        """The n bytes at pos, as read-only views: one per block the span touches."""
        while n > 0:
            k, off = divmod(pos, STREAM_BLOCK)
            take = min(n, STREAM_BLOCK - off)
            start = (k * 7919) % STREAM_BLOCK + off
            yield self.twice[start:start + take]
            pos += take
            n -= take

    def view(self, pos, n):
        """The n bytes at pos to send or hash: a view when they are in one block (a
        span of at most a block at a multiple of its size is), else a copy."""
        parts = list(self.views(pos, n))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def at(self, pos, n):
        """The n bytes at pos, as bytes."""
        return b"".join(self.views(pos, n))

    def first_wrong(self, pos, data):
        """The offset in data of its first byte that is not the stream's at pos + offset,
        or None: compared in place, byte by byte only in a part that differs."""
        data, i = memoryview(data), 0
        for part in self.views(pos, len(data)):
            got = data[i:i + len(part)]
            if got != part:
                return i + next(j for j in range(len(part)) if got[j] != part[j])
            i += len(part)
        return None


def stream_key(seed, total):
    """How SCI_STREAM_DIGESTS names the first `total` bytes of stream `seed` (an int, or
    bytes written as b and their hex)."""
    return f"{'b' + seed.hex() if isinstance(seed, bytes) else seed}:{total}"


def stream_digest(seed, total):
    """SHA-256 (hex) of the first `total` bytes of stream `seed`: what a receiver's digest
    of it must be. make test works out those of its long transfers on the host (a guest
    script's --stream-digests), where SHA-256 takes about a second a GiB against 45 in a
    TCG guest, and hands them in as SCI_STREAM_DIGESTS; so a sender need not hash what
    it sends, and each end of a 1 GiB transfer hashes 1 GiB, not 2. Any other stream is
    hashed here. Both use the same Python and this same Stream: the guests run the
    host's root file system."""
    key = stream_key(seed, total)
    for item in os.environ.get("SCI_STREAM_DIGESTS", "").split():
        name, _, digest = item.partition("=")
        if name == key:
            return digest
    h = hashlib.sha256()
    for part in Stream(seed).views(0, total):
        h.update(part)
    return h.hexdigest()


def print_stream_digests(streams):
    """A guest script's --stream-digests, run on the host before its guests boot:
    SCI_STREAM_DIGESTS for `streams`, (seed, total) pairs, worked out here."""
    os.environ.pop("SCI_STREAM_DIGESTS", None)
    print(" ".join(f"{stream_key(s, t)}={stream_digest(s, t)}" for s, t in streams))
