"""What the pair tests' guest scripts share: TAP output, messages between the guests
through the control directory, the patterns each guest writes into its own half of the
shared memory for the other to read back, the seeded byte streams of the checksummed
transfers (Stream, from selftests/harness/seeded_stream.py), and the AF_SCI setup of the
guests (af_sci.ko on the ivshmem fabric, the node map, going on under sci-run, SCI_INFO,
the dmesg check)."""

import glob
import json
import os
import random
import re
import struct
import subprocess
import sys
import time

# How long a guest waits for the other's message by default (s).
WAIT = 240

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The checksummed transfers' streams, shared with the one-guest suite; the guest scripts
# take them from here.
sys.path.insert(0, f"{TOP}/selftests/harness")
from seeded_stream import Stream, print_stream_digests, stream_digest  # noqa: E402,F401

SCI_RUN = f"{TOP}/tools/sci-run"
DMESG_CLEAN = f"{TOP}/selftests/harness/dmesg-clean"
KMEMLEAK_CHECK = f"{TOP}/selftests/harness/kmemleak-check"
# A kernel-log line that reports a problem (the pattern of selftests/harness/dmesg-clean).
KERNEL_REPORT = re.compile(subprocess.run([DMESG_CLEAN, "--pattern"], capture_output=True,
                                          text=True, check=True).stdout.strip())
SCICTL = f"{TOP}/tools/target/release/scictl"
KO = f"{TOP}/af_sci.ko"
SOL_SCI, SCI_INFO = 300, 1
MODE = {0: "native", 1: "sci"}
REASON = {0: "none", 1: "no-fabric", 2: "not-mapped", 3: "port-excluded",
          4: "peer-rejected", 5: "no-memory", 6: "timeout", 7: "peer-tcp", 8: "failover"}
# Guest A is node 0, guest B node 1, guest C (vm-pair --c) node 2 (vm-pair's addresses).
A, B, C = "10.0.0.1", "10.0.0.2", "10.0.0.3"
NODE = {"a": 0, "b": 1, "c": 2}
# Guests in the run (vm-pair's SCI_PAIR_GUESTS): 2, or 3 with guest C.
GUESTS = int(os.environ.get("SCI_PAIR_GUESTS", "2"))
# The ivshmem device model of the run: doorbell or plain (vm-pair's SCI_PAIR_MODE).
DEVICE = os.environ.get("SCI_PAIR_MODE", "doorbell")


class Tap:
    """TAP lines named after the guest, with the plan last, so that a crash shows as a
    missing plan."""

    def __init__(self, name):
        self.name = name
        self.n = 0
        self.failed = 0
        # The console mixes kernel messages into a line now and then (a "not ok" can lose
        # its "not"), so every line also goes whole to $SCI_PAIR_CTL/tap.ROLE, which
        # vm-pair keeps in its log directory and pair-tests reads first.
        ctl, role = os.environ.get("SCI_PAIR_CTL"), os.environ.get("SCI_PAIR_ROLE")
        self.file = f"{ctl}/tap.{role.upper()}" if ctl and role else None

    def out(self, line):
        print(line, flush=True)
        if self.file:
            with open(self.file, "a") as f:
                f.write(line.replace("\n", " ") + "\n")

    def check(self, good, what):
        self.n += 1
        self.failed += not good
        self.out(f"{'ok' if good else 'not ok'} {self.n} - {self.name}: {what}")
        return good

    def skip(self, what, why):
        """A check that cannot run here: counted as passed, with TAP's SKIP directive."""
        self.n += 1
        self.out(f"ok {self.n} - {self.name}: {what} # SKIP {why}")

    def note(self, text):
        self.out(f"# {self.name}: {text}")

    def state(self):
        """Notes what a failure needs to be understood later: the kernel's last messages,
        the NIC's counters and the TCP sockets (the console keeps only what is printed)."""
        for cmd in ("dmesg | tail -n 25", "ip -s link show eth0", "ss -tinoa",
                    "grep -E 'virtio|ivshmem|CPU' /proc/interrupts"):
            out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout
            for line in out.splitlines():
                self.note(f"{cmd.split()[0]}: {line}")

    def done(self):
        self.out(f"1..{self.n}")
        sys.exit(1 if self.failed else 0)

    def run(self, main, done=True):
        """Runs main(); an exception is a failed check (and the plan goes missing).
        With done=False the plan is left to a later part (a program exec'd next)."""
        try:
            main()
        except Exception as e:
            self.check(False, f"{type(e).__name__}: {e}")
            self.state()
            sys.exit(1)
        if done:
            self.done()


def put(name, **obj):
    """Writes $SCI_PAIR_CTL/name atomically (the other guest polls for it)."""
    write_whole(name, json.dumps(obj))


def write_whole(name, text):
    """$SCI_PAIR_CTL/name with `text`, written whole and then renamed: whoever polls for
    the name (the other guest, vm-pair) never reads it half-written."""
    ctl = os.environ["SCI_PAIR_CTL"]
    tmp = f"{ctl}/.{name}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, f"{ctl}/{name}")


def ask_kill_b(freeze_ms=0):
    """Asks vm-pair to stop guest B at once ($SCI_PAIR_CTL/kill-b), or, with freeze_ms,
    to freeze its QEMU first and kill it that many milliseconds later. vm-pair removes the
    file once it read it: a request it read half-written was taken as a plain kill, and
    the write that followed failed (ENOENT; seen on the slow sanitizer kernel)."""
    write_whole("kill-b", f"freeze {freeze_ms}\n" if freeze_ms else "")


def read_text(name, timeout=WAIT):
    """Waits up to `timeout` s for $SCI_PAIR_CTL/name (written whole) and returns its text."""
    path = f"{os.environ['SCI_PAIR_CTL']}/{name}"
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(f"no {name} after {timeout} s")
        time.sleep(0.05)
    with open(path) as f:
        return f.read().strip()


IVSHMEM_PCI = ("0x1af4", "0x1110")


def pci_ivshmem():
    """This guest's ivshmem PCI devices (their sysfs directories)."""
    found = []
    for d in sorted(glob.glob("/sys/bus/pci/devices/*")):
        try:
            ids = tuple(open(f"{d}/{k}").read().strip() for k in ("vendor", "device"))
        except OSError:
            continue
        if ids == IVSHMEM_PCI:
            found.append(d)
    return found


def hotplug(what, role, timeout=240):
    """Unplugs or plugs (`what`) guest `role`'s ivshmem device and waits until it is done:
    (ok, what was said). With ivshmem-plain, QEMU does it (device_del / device_add through
    vm-pair and QMP); with ivshmem-doorbell, which QEMU 7.2 cannot unplug under TCG (see
    selftests/harness/vm-pair), this guest's own PCI core removes its device and finds it
    again (/sys/bus/pci/devices/*/remove, /sys/bus/pci/rescan): the same driver remove
    and probe, the device staying in QEMU."""
    if DEVICE == "doorbell":
        if role != os.environ.get("SCI_PAIR_ROLE"):
            return False, f"a doorbell guest removes only its own device, not {role}'s"
        if what == "unplug":
            devs = pci_ivshmem()
            for d in devs:
                with open(f"{d}/remove", "w") as f:
                    f.write("1")
            return bool(devs) and not pci_ivshmem(), f"removed {devs} through the PCI core"
        with open("/sys/bus/pci/rescan", "w") as f:
            f.write("1")
        end = time.monotonic() + timeout
        while not pci_ivshmem() and time.monotonic() < end:
            time.sleep(0.1)
        return bool(pci_ivshmem()), f"PCI rescan found {pci_ivshmem()}"
    try:
        os.unlink(f"{os.environ['SCI_PAIR_CTL']}/{what}-{role}.done")
    except FileNotFoundError:
        pass
    write_whole(f"{what}-{role}", "")
    text = read_text(f"{what}-{role}.done", timeout)
    return text == "ok", text


def get(name, timeout=WAIT):
    """Waits up to `timeout` s for $SCI_PAIR_CTL/name and returns what it holds."""
    return json.loads(read_text(name, timeout))


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


# --- AF_SCI in the guests -------------------------------------------------------------------

def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True)


PARAMS = "/sys/module/af_sci/parameters"


def param(name):
    """af_sci's module parameter `name`, as its sysfs file reads."""
    with open(f"{PARAMS}/{name}") as f:
        return f.read().strip()


def set_param(name, value):
    """Sets af_sci's module parameter `name`; returns what it was, to put back."""
    before = param(name)
    with open(f"{PARAMS}/{name}", "w") as f:
        f.write(str(value))
    return before


def info(sock):
    """(mode, fallback reason) from SCI_INFO; ("tcp", "-") for a plain TCP socket."""
    try:
        mode, reason, _, _ = struct.unpack("4I", sock.getsockopt(SOL_SCI, SCI_INFO, 16))
    except OSError:
        return "tcp", "-"
    return MODE.get(mode, str(mode)), REASON.get(reason, str(reason))


def sci_conn(sock):
    """The SCI connection's ends from the socket's fdinfo ("sci-conn:" line), as a dict
    of node, channel, generation and peer-channel; None for a socket not in mode sci."""
    with open(f"/proc/self/fdinfo/{sock.fileno()}") as f:
        for line in f:
            if line.startswith("sci-conn:"):
                words = line.split()[1:]
                return {k: int(v) for k, v in zip(words[::2], words[1::2])}
    return None


class Moment:
    """When a call with a socket timeout began, by CLOCK_MONOTONIC and by jiffies
    (os.times().elapsed counts them in clock ticks): the kernel counts those timeouts in
    jiffies, and a TCG guest's jiffies lag while the loaded host does not run the vCPU
    that advances them, so by CLOCK_MONOTONIC alone an honoured timeout can look early
    (selftests/semantics/harness.h, timeo_honoured)."""

    def __init__(self):
        self.mono, self.ticks = time.monotonic(), os.times().elapsed

    def honoured(self, s):
        """(whether a timeout of s seconds that ended now was honoured: at least s by
        jiffies, less a clock tick, and under 10 s by CLOCK_MONOTONIC; what both say)"""
        mono, ticks = time.monotonic() - self.mono, os.times().elapsed - self.ticks
        tick = 1 / os.sysconf("SC_CLK_TCK")
        return (ticks >= s - tick - 1e-9 and mono < 10,
                f"{mono:.3f} s by CLOCK_MONOTONIC, {ticks:.2f} s by jiffies")


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def load_node_map(tap, more_nodes=()):
    """scictl load: the guests' addresses and node ids, plus more_nodes ((address, node)
    pairs), as /tmp/nodes.conf."""
    guests = ((A, 0), (B, 1), (C, 2))[:GUESTS]
    with open("/tmp/nodes.conf", "w") as f:
        for addr, n in (*guests, *more_nodes):
            f.write(f"{addr} {n}\n")
    extra = "".join(f", {addr} node {n}" for addr, n in (*guests[2:], *more_nodes))
    tap.check(sh(f"{SCICTL} load --nodes /tmp/nodes.conf --ports /dev/null").returncode == 0,
              f"scictl load: 10.0.0.1 is node 0, 10.0.0.2 node 1{extra}")


def load_module(tap, role, more_nodes=(), wait_for=None, node_map=True):
    """insmod af_sci.ko on the ivshmem fabric (A node 0, B node 1, C node 2), the node map
    (the guests, plus more_nodes: (address, node) pairs; none with node_map=False: the
    guests' published addresses stand in for it), and a wait until this node is linked
    with every other guest's (or only with the nodes in wait_for: a node that joins later
    is not waited for)."""
    node = NODE[role]
    sh(f"{KMEMLEAK_CHECK} start")  # the sanitizer kernel: forget the boot's reports
    r = sh(f"insmod {KO} fabric=ivshmem node_id={node} ivshmem_nodes={GUESTS}")
    if not tap.check(r.returncode == 0, f"insmod af_sci.ko fabric=ivshmem node_id={node}"):
        tap.note(r.stderr.strip() + " / " + sh("dmesg | tail -n 5").stdout)
        raise RuntimeError("no module")
    if DEVICE == "doorbell":
        # Interrupts, not the jiffy poll (a guest kernel without APIC or MSI-X polls
        # silently: round trips ten times slower, found only by make bench).
        up = re.findall(r"ivshmem: node \d+ up .*", sh("dmesg").stdout)
        tap.check(bool(up) and "MSI-X doorbells" in up[-1],
                  f"the ivshmem-doorbell device takes MSI-X interrupts ({up[-1:]})")
    if node_map:
        load_node_map(tap, more_nodes)
    guests = ((A, 0), (B, 1), (C, 2))[:GUESTS]
    others = {n for _, n in guests if n != node}
    if wait_for is not None:
        others = set(wait_for) - {node}

    def linked():
        return {int(m) for m in re.findall(r"linked with node (\d+)", sh("dmesg").stdout)}
    end = time.monotonic() + WAIT
    while not others <= linked() and time.monotonic() < end:
        time.sleep(0.1)
    tap.check(others <= linked(), "the fabric links the two nodes" if GUESTS == 2 else
              f"the fabric links node {node} with nodes {sorted(others)}")


def exec_preloaded(tap, script, args):
    """Goes on as `script ARGS --loaded N FAILED` under sci-run, keeping the TAP count: the
    preload reads the family number once, when the program starts, so after insmod."""
    os.execv(SCI_RUN, [SCI_RUN, sys.executable, script, *args, "--loaded", str(tap.n),
                       str(tap.failed)])


def resume_preloaded(tap, argv):
    """In exec_preloaded's continuation: takes up the TAP count; False when not one."""
    if "--loaded" not in argv:
        return False
    at = argv.index("--loaded")
    tap.n, tap.failed = int(argv[at + 1]), int(argv[at + 2])
    return True


def note_fabric_log(tap):
    """af_sci's own kernel messages (links, nodes down, resets): what a failure needs."""
    for line in sh("dmesg").stdout.splitlines():
        if "af_sci" in line and "taints" not in line:
            tap.note(line)


def dmesg_clean(tap):
    note_fabric_log(tap)
    r = sh(DMESG_CLEAN)
    for line in r.stdout.splitlines()[:20]:
        tap.note(line)
    tap.check(r.returncode == 0, "dmesg has no warning, oops, sanitizer or lockdep report")


def unload_clean(tap):
    """The end of a guest's run: a clean kernel log, rmmod, and on the sanitizer kernel
    (make test-debug) kmemleak's scan with nothing allocated by the module."""
    dmesg_clean(tap)
    tap.check(sh("rmmod af_sci").returncode == 0, "rmmod af_sci")
    leak_check(tap)


def leak_check(tap):
    """After rmmod, on the sanitizer kernel: kmemleak finds nothing the module allocated
    (selftests/harness/kmemleak-check; nothing to do on a kernel without kmemleak)."""
    r = sh(f"{KMEMLEAK_CHECK} report")
    if r.returncode == 3:
        return  # no kmemleak in this kernel (the test kernel): make test-debug runs it
    for line in r.stdout.splitlines()[:60]:
        tap.note(line)
    tap.check(r.returncode == 0, "kmemleak: nothing allocated by af_sci is left after rmmod")
