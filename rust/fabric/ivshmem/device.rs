// SPDX-License-Identifier: GPL-2.0

//! The ivshmem PCI device (QEMU's inter-VM shared memory, vendor 0x1af4 device 0x1110),
//! bound through [`crate::sys::pci`].
//!
//! BAR0 holds four registers (`IntrMask` 0, `IntrStatus` 4, `IVPosition` 8, `Doorbell`
//! 12); BAR2 is the shared memory. Two device models exist:
//!
//! - `ivshmem-doorbell` (connected to an ivshmem server): MSI-X vectors, `IVPosition` is
//!   the id the server gave this guest, and writing `(peer << 16) | vector` to
//!   `Doorbell` interrupts a peer. Probe enables MSI-X (one vector) and bus mastering:
//!   an MSI-X message is a bus write, and without bus mastering QEMU drops it.
//! - `ivshmem-plain` (just a shared memory backend): no MSI-X, `IVPosition` reads 0 and
//!   `Doorbell` writes are ignored. The fabric polls instead.
//!
//! Probe maps both BARs and parks the device in the registration's [`DevSlot`], where
//! the fabric picks it up; only the first device is used (a second one fails its probe
//! with `EBUSY`). Remove frees the interrupt and the vectors while the device is still
//! bound; the mappings go when their last user does.

use super::Shared;
use crate::fabric::memory::DeviceMem;
use crate::sys::pci::{
    self, BusMaster, DeviceId, Enabled, IoMem, IrqVectors, Regions, ThreadedIrq,
};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex, SpinLock};

/// BAR0 register: the device's id on the server (doorbell model), else 0.
pub(super) const REG_IVPOSITION: usize = 8;
/// BAR0 register: write `(peer << 16) | vector` to interrupt a peer.
pub(super) const REG_DOORBELL: usize = 12;
/// Bytes of BAR0.
const REGS_LEN: usize = 256;

/// One bound ivshmem device.
#[pin_data]
pub(super) struct IvshmemDev {
    /// BAR0.
    pub(super) regs: Arc<IoMem>,
    /// BAR2, mapped write-back.
    pub(super) mem: Arc<DeviceMem>,
    /// `IVPosition` as read at probe time.
    pub(super) ivposition: u32,
    /// The fabric's interrupt handler, while it runs (freed before the vectors).
    #[pin]
    irq: Mutex<Option<ThreadedIrq<Shared>>>,
    /// The MSI-X vector (doorbell model only).
    #[pin]
    vectors: Mutex<Option<IrqVectors>>,
    /// The device was removed under a running fabric.
    detached: AtomicBool,
    _master: Option<BusMaster>,
    _regions: Regions,
    _enabled: Enabled,
}

impl IvshmemDev {
    /// Whether the device delivers interrupts (MSI-X vectors were allocated).
    pub(super) fn has_interrupts(&self) -> bool {
        self.vectors.lock().is_some()
    }

    /// Registers `shared` as the handler of vector 0.
    pub(super) fn request_irq(&self, shared: Arc<Shared>) -> Result {
        let vectors = self.vectors.lock();
        let v = vectors.as_ref().ok_or(ENODEV)?;
        let irq = ThreadedIrq::request(v, 0, kernel::c_str!("af_sci-ivshmem"), shared)?;
        *self.irq.lock() = Some(irq);
        Ok(())
    }

    /// Frees the interrupt handler (waiting for a running one).
    pub(super) fn free_irq(&self) {
        let irq = self.irq.lock().take();
        drop(irq);
    }

    /// Whether the device was removed.
    pub(super) fn detached(&self) -> bool {
        self.detached.load(Ordering::Acquire)
    }

    /// The device is going away: interrupts off while it is still bound.
    fn detach(&self) {
        self.detached.store(true, Ordering::Release);
        self.free_irq();
        let vectors = self.vectors.lock().take();
        drop(vectors);
    }
}

/// Where probe parks the device for the fabric.
#[pin_data]
pub(super) struct DevSlot {
    #[pin]
    dev: SpinLock<Option<Arc<IvshmemDev>>>,
}

impl DevSlot {
    /// An empty slot.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self { dev <- kernel::new_spinlock!(None, "ivshmem::DevSlot") }),
            GFP_KERNEL,
        )
    }

    /// The bound device, if any.
    pub(super) fn get(&self) -> Option<Arc<IvshmemDev>> {
        self.dev.lock().clone()
    }
}

/// The PCI driver.
pub(super) struct IvshmemDriver;

impl pci::Driver for IvshmemDriver {
    type Context = Arc<DevSlot>;
    type Data = Arc<IvshmemDev>;
    const NAME: &'static CStr = kernel::c_str!("af_sci_ivshmem");
    const IDS: &'static [DeviceId] = &[DeviceId {
        vendor: 0x1af4,
        device: 0x1110,
    }];

    fn probe(dev: &pci::Device, slot: &Arc<DevSlot>) -> Result<Arc<IvshmemDev>> {
        if slot.get().is_some() {
            pr_info!("{}: ivshmem device ignored (one is in use)\n", dev.name());
            return Err(EBUSY);
        }
        let enabled = dev.enable()?;
        let regions = dev.request_regions(kernel::c_str!("af_sci"))?;
        let regs = Arc::new(dev.iomap(0, REGS_LEN)?, GFP_KERNEL)?;
        let (phys, len) = dev.resource(2);
        if len == 0 {
            pr_err!(
                "{}: ivshmem device without shared memory (BAR2)\n",
                dev.name()
            );
            return Err(ENODEV);
        }
        let mem = DeviceMem::map_wb(phys, len)?;
        // MSI-X only: the doorbell model has it, the plain model does not (and INTx of
        // the old revision-0 device is not worth a handler: it falls back to polling).
        let vectors = dev
            .alloc_irq_vectors(1, 1, crate::sys::bindings::PCI_IRQ_MSIX)
            .ok();
        let master = vectors.as_ref().map(|_| dev.set_master());
        let ivposition = regs.read32(REG_IVPOSITION);
        let d = Arc::pin_init(
            pin_init!(IvshmemDev {
                regs,
                mem,
                ivposition,
                irq <- kernel::new_mutex!(None, "IvshmemDev::irq"),
                vectors <- kernel::new_mutex!(vectors, "IvshmemDev::vectors"),
                detached: AtomicBool::new(false),
                _master: master,
                _regions: regions,
                _enabled: enabled,
            }),
            GFP_KERNEL,
        )?;
        pr_info!(
            "{}: ivshmem device, {} KiB shared memory, {}, IVPosition {}\n",
            dev.name(),
            len / 1024,
            if d.has_interrupts() {
                "MSI-X doorbells"
            } else {
                "no interrupts (polling)"
            },
            ivposition
        );
        *slot.dev.lock() = Some(d.clone());
        Ok(d)
    }

    fn remove(data: Arc<IvshmemDev>, slot: &Arc<DevSlot>) {
        let mine = {
            let mut g = slot.dev.lock();
            match &*g {
                Some(d) if Arc::ptr_eq(d, &data) => g.take(),
                _ => None,
            }
        };
        data.detach();
        drop(mine);
    }
}
