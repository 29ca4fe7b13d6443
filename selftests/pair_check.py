"""What the pair tests' guest scripts share: TAP output, messages between the guests
through the control directory, and the patterns each guest writes into its own half of the
shared memory for the other to read back."""

import json
import os
import random
import sys
import time

# How long a guest waits for the other's message by default (s).
WAIT = 240


class Tap:
    """TAP lines named after the guest, with the plan last, so that a crash shows as a
    missing plan."""

    def __init__(self, name):
        self.name = name
        self.n = 0
        self.failed = 0

    def check(self, good, what):
        self.n += 1
        self.failed += not good
        print(f"{'ok' if good else 'not ok'} {self.n} - {self.name}: {what}", flush=True)
        return good

    def note(self, text):
        print(f"# {self.name}: {text}", flush=True)

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)

    def run(self, main, done=True):
        """Runs main(); an exception is a failed check (and the plan goes missing).
        With done=False the plan is left to a later part (a program exec'd next)."""
        try:
            main()
        except Exception as e:
            self.check(False, f"{type(e).__name__}: {e}")
            sys.exit(1)
        if done:
            self.done()


def put(name, **obj):
    """Writes $SCI_PAIR_CTL/name atomically (the other guest polls for it)."""
    ctl = os.environ["SCI_PAIR_CTL"]
    tmp = f"{ctl}/.{name}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, f"{ctl}/{name}")


def get(name, timeout=WAIT):
    """Waits up to `timeout` s for $SCI_PAIR_CTL/name and returns what it holds."""
    path = f"{os.environ['SCI_PAIR_CTL']}/{name}"
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(f"no {name} after {timeout} s")
        time.sleep(0.05)
    with open(path) as f:
        return json.load(f)


def half(size, owner):
    """The half of a `size`-byte region that guest `owner` ("a" or "b") writes."""
    return (0 if owner == "a" else size // 2), size // 2


def blocks(size, owner):
    """A block at the start of the owner's half and a page at its end."""
    base, length = half(size, owner)
    return [(base, min(65536, length // 2)), (base + length - 4096, 4096)]


def write_pattern(mem, owner, seed):
    for i, (off, n) in enumerate(blocks(len(mem), owner)):
        mem[off:off + n] = random.Random(seed + i).randbytes(n)


def pattern_ok(mem, owner, seed):
    return all(mem[off:off + n] == random.Random(seed + i).randbytes(n)
               for i, (off, n) in enumerate(blocks(len(mem), owner)))
