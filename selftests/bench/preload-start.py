#!/usr/bin/env python3
"""What the preload costs a program at start: `make bench`'s preload row.

    preload-start.py LIB OUT-JSON [RUNS]

Starts /bin/true RUNS times (default 400) with LD_PRELOAD=LIB and as many times without,
alternating (so that a slow stretch of the host hits both alike), each timed from spawn to
exit; prints the medians and their difference, and writes them to OUT-JSON. The program
does nothing, so the difference is the preload's own work at start (its ELF constructor:
dlsym, the environment, the family file) plus the loader mapping it. The aim (issue 16):
under 1 ms. Exits 1 if a run failed, else 0: the aim is reported, not asserted.
"""

import json
import os
import statistics
import sys
import time


def one(env):
    """Spawn to exit of /bin/true, in microseconds."""
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn("/bin/true", ["true"], env)
    _, status = os.waitpid(pid, 0)
    t1 = time.perf_counter_ns()
    if status != 0:
        raise RuntimeError(f"/bin/true exited with status {status}")
    return (t1 - t0) / 1000.0


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2])
    lib, out = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) == 4 else 400
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    pre = {**base, "LD_PRELOAD": lib}
    # One of each first, not counted: the page cache and the loader's first look.
    one(base), one(pre)
    plain, preloaded = [], []
    for _ in range(runs):
        plain.append(one(base))
        preloaded.append(one(pre))
    p, q = statistics.median(plain), statistics.median(preloaded)
    diff = q - p
    result = {"runs": runs, "plain_us": p, "preloaded_us": q, "cost_us": diff,
              "aim_us": 1000, "met": diff < 1000}
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"preload at program start: /bin/true median {p:.0f} us plain, {q:.0f} us under the "
          f"preload ({runs} runs each, alternating): the preload costs {diff:.0f} us "
          f"(aim: under 1000 us: {'met' if diff < 1000 else 'not met'})")


if __name__ == "__main__":
    main()
