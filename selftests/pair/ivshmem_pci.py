"""The ivshmem PCI device (docs/specs/ivshmem-spec.rst in QEMU) from user space, through
sysfs and without a driver: what the pair tests check before af_sci has a driver for it.

BAR0 holds the registers, BAR1 (doorbell mode) the MSI-X table and pending bits, BAR2 the
shared memory.  MSI-X is enabled through the config space with every vector masked, so a
peer's doorbell only sets the vector's pending bit, which user space can read.
"""

import glob
import mmap
import os
import struct
import time

VENDOR, DEVICE = 0x1AF4, 0x1110
IVPOSITION, DOORBELL = 8, 12
PCI_COMMAND, PCI_COMMAND_MEMORY = 4, 2
PCI_CAP_MSIX = 0x11


def find():
    """The sysfs directories of every ivshmem device."""
    found = []
    for d in sorted(glob.glob("/sys/bus/pci/devices/*")):
        with open(f"{d}/vendor") as v, open(f"{d}/device") as i:
            if int(v.read(), 16) == VENDOR and int(i.read(), 16) == DEVICE:
                found.append(d)
    return found


def map_bar(dev, bar):
    """A shared mapping of a whole BAR (the kernel maps at least a page)."""
    fd = os.open(f"{dev}/resource{bar}", os.O_RDWR | os.O_SYNC)
    try:
        return mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED)
    finally:
        os.close(fd)


def reg32(m):
    """A 32-bit view: one 4-byte load or store per element, as the registers require."""
    return memoryview(m).cast("I")


class Device:
    def __init__(self, dev):
        self.path = dev
        with open(f"{dev}/config", "rb") as f:
            (command,) = struct.unpack_from("<H", f.read(8), PCI_COMMAND)
        if not command & PCI_COMMAND_MEMORY:  # let the PCI core turn memory decoding on
            with open(f"{dev}/enable", "w") as f:
                f.write("1")
        self.regs = reg32(map_bar(dev, 0))
        self.shared = map_bar(dev, 2)

    def ivposition(self):
        return self.regs[IVPOSITION // 4]

    def ring(self, peer, vector):
        """Interrupt `vector` of peer `peer` (the Doorbell register)."""
        self.regs[DOORBELL // 4] = (peer << 16) | vector


class Msix:
    """MSI-X of a device, every vector masked: a doorbell only sets its pending bit."""

    def __init__(self, dev):
        self.cfg = os.open(f"{dev}/config", os.O_RDWR)
        config = os.pread(self.cfg, 256, 0)
        cap = config[0x34] & ~3
        while cap and config[cap] != PCI_CAP_MSIX:
            cap = config[cap + 1] & ~3
        if not cap:
            raise RuntimeError("no MSI-X capability")
        self.ctl_at = cap + 2
        (self.ctl,) = struct.unpack_from("<H", config, self.ctl_at)
        table, pba = struct.unpack_from("<II", config, cap + 4)
        self.entries = (self.ctl & 0x7FF) + 1
        if table & 7 != pba & 7:
            raise RuntimeError("MSI-X table and pending bits in different BARs")
        self.regs = reg32(map_bar(dev, table & 7))
        self.table = (table & ~7) // 4
        self.pba = (pba & ~7) // 4

    def arm(self):
        """Mask every vector, then enable MSI-X (function mask off)."""
        for i in range(self.entries):
            self.regs[self.table + 4 * i + 3] |= 1  # vector control: masked
        os.pwrite(self.cfg, struct.pack("<H", (self.ctl | 0x8000) & ~0x4000), self.ctl_at)

    def pending(self):
        return [bool(self.regs[self.pba + v // 32] >> (v % 32) & 1) for v in range(self.entries)]

    def wait_pending(self, vector, timeout=10):
        """The pending bits once `vector`'s is set, or after `timeout` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.pending()[vector]:
            time.sleep(0.01)
        return self.pending()

    def disarm(self):
        os.pwrite(self.cfg, struct.pack("<H", self.ctl), self.ctl_at)
