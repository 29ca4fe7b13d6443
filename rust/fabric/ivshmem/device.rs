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
//! the fabric picks it up (at load, or at its next tick after a hot-plug); only one
//! device is used at a time (another one fails its probe with `EBUSY`). Remove first
//! lets the fabric leave the device's region ([`DevUser::removing`]: the device is still
//! there while it runs), then frees the interrupt and the vectors while the device is
//! still bound; the mappings go when their last user does.

use crate::fabric::memory::DeviceMem;
use crate::sys::pci::{
    self, BusMaster, DeviceId, Enabled, IoMem, IrqHandler, IrqVectors, Regions, ThreadedIrq,
};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex, SpinLock};

/// BAR0 register: the device's id on the server (doorbell model), else 0.
pub(super) const REG_IVPOSITION: usize = 8;
/// BAR0 register: write `(peer << 16) | vector` to interrupt a peer.
pub(super) const REG_DOORBELL: usize = 12;
/// Bytes of BAR0.
const REGS_LEN: usize = 256;

/// A requested interrupt, whoever handles it (freed when the last reference goes). The
/// device holds its handler's interrupt without naming the handler: the attachment,
/// which sits above the device, handles it.
trait RequestedIrq: Send + Sync {}

impl<T: IrqHandler> RequestedIrq for ThreadedIrq<T> {}

/// One bound ivshmem device.
#[pin_data]
pub(super) struct IvshmemDev {
    /// BAR0.
    pub(super) regs: Arc<IoMem>,
    /// BAR2, mapped write-back.
    pub(super) mem: Arc<DeviceMem>,
    /// `IVPosition` as read at probe time.
    pub(super) ivposition: u32,
    /// The fabric's interrupt handler, while it runs (freed before the vectors; the
    /// device holds the only reference).
    #[pin]
    irq: Mutex<Option<Arc<dyn RequestedIrq>>>,
    /// The MSI-X vector (doorbell model only).
    #[pin]
    vectors: Mutex<Option<IrqVectors>>,
    /// Bus mastering, the BARs' regions and the enabled device, given back in the
    /// device's `remove` (in this order), whoever still holds this.
    #[pin]
    held: Mutex<Option<(Option<BusMaster>, Regions, Enabled)>>,
}

impl IvshmemDev {
    /// Whether the device delivers interrupts (MSI-X vectors were allocated).
    pub(super) fn has_interrupts(&self) -> bool {
        self.vectors.lock().is_some()
    }

    /// Registers `handler` as the handler of vector 0.
    pub(super) fn request_irq<H: IrqHandler>(&self, handler: Arc<H>) -> Result {
        let vectors = self.vectors.lock();
        let v = vectors.as_ref().ok_or(ENODEV)?;
        let irq = ThreadedIrq::request(v, 0, kernel::c_str!("af_sci-ivshmem"), handler)?;
        // On failure the interrupt is freed here, as `irq` goes.
        let irq: Arc<dyn RequestedIrq> = Arc::new(irq, GFP_KERNEL)?;
        *self.irq.lock() = Some(irq);
        Ok(())
    }

    /// Frees the interrupt handler (waiting for a running one).
    pub(super) fn free_irq(&self) {
        let irq = self.irq.lock().take();
        drop(irq);
    }

    /// The device is going away: interrupts off and its resources given back while it is
    /// still bound (the mappings stay until their last user, which no longer touches
    /// them).
    fn detach(&self) {
        self.free_irq();
        let vectors = self.vectors.lock().take();
        drop(vectors);
        let held = self.held.lock().take();
        drop(held);
    }
}

/// What the fabric does when its device is removed.
pub(super) trait DevUser: Send + Sync {
    /// `dev` is being removed; it stays there until this returns (process context).
    fn removing(&self, dev: &Arc<IvshmemDev>);
}

/// Where probe parks the device for the fabric, and who is told when it goes.
#[pin_data]
pub(super) struct DevSlot {
    #[pin]
    dev: SpinLock<Option<Arc<IvshmemDev>>>,
    /// The fabric using the device (cleared before the fabric goes: the slot and the
    /// fabric refer to each other while both live).
    #[pin]
    user: SpinLock<Option<Arc<dyn DevUser>>>,
}

impl DevSlot {
    /// An empty slot.
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                dev <- kernel::new_spinlock!(None, "ivshmem::DevSlot::dev"),
                user <- kernel::new_spinlock!(None, "ivshmem::DevSlot::user"),
            }),
            GFP_KERNEL,
        )
    }

    /// The bound device, if any.
    pub(super) fn get(&self) -> Option<Arc<IvshmemDev>> {
        self.dev.lock().clone()
    }

    /// Sets who is told when the device is removed.
    pub(super) fn set_user(&self, user: Option<Arc<dyn DevUser>>) {
        let old = core::mem::replace(&mut *self.user.lock(), user);
        drop(old);
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
        // With struct pages, read_sock hands kernel readers the ring's bytes in place.
        match dev.memory_pages(2) {
            Ok(()) => mem.set_has_pages(),
            Err(e) => pr_info!(
                "{}: no struct pages for the shared memory ({:?}): read_sock copies it\n",
                dev.name(),
                e
            ),
        }
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
                held <- kernel::new_mutex!(Some((master, regions, enabled)), "IvshmemDev::held"),
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
        let user = slot.user.lock().clone();
        if let (Some(user), Some(_)) = (user, &mine) {
            pr_info!("ivshmem: the device in use is being removed\n");
            user.removing(&data);
        }
        data.detach();
        drop(mine);
        // The memory's struct pages go once this returns: no buffer lent from them may
        // be left (a kernel reader that keeps one holds the removal up).
        crate::sys::read_actor::drain_lends();
    }
}
