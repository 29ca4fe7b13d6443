// SPDX-License-Identifier: GPL-2.0

//! A thin PCI driver wrapper (Linux 6.12 has no Rust PCI abstractions).
//!
//! It adapts the C `struct pci_driver` ops table to the [`Driver`] trait the way the
//! kernel's `rust/kernel/net/phy.rs` adapts `phy_driver`: a [`Registration`] owns a
//! pinned `pci_driver` whose `probe`/`remove` are trampolines into `T::probe` /
//! `T::remove`, and the value `probe` returns lives in the device's drvdata until
//! `remove`. Device resources are RAII guards that a driver keeps in its data, dropped
//! in reverse order of acquisition: [`Enabled`] (`pci_enable_device`), [`Regions`]
//! (`pci_request_regions`), [`BusMaster`] (`pci_set_master`), [`IoMem`] (`pci_iomap`),
//! [`IrqVectors`] (`pci_alloc_irq_vectors`) and [`ThreadedIrq`] (`request_threaded_irq`
//! with a softirq stage between its halves, whose handler is an [`IrqHandler`]). All
//! `unsafe` of PCI lives here.

use crate::sys::bindings;
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// A vendor/device pair a driver binds to.
#[derive(Clone, Copy)]
pub(crate) struct DeviceId {
    /// PCI vendor id.
    pub(crate) vendor: u16,
    /// PCI device id.
    pub(crate) device: u16,
}

/// A PCI driver: what `probe` and `remove` do.
pub(crate) trait Driver: 'static {
    /// Shared by all devices of one registration (handed to [`Registration::new`]).
    type Context: Send + Sync;
    /// What `probe` sets up for one device and `remove` tears down.
    type Data: Send + Sync;
    /// Driver name (`/sys/bus/pci/drivers/NAME`).
    const NAME: &'static CStr;
    /// The devices it binds to.
    const IDS: &'static [DeviceId];

    /// A matching device appeared (or the driver was registered while it was there).
    fn probe(dev: &Device, ctx: &Self::Context) -> Result<Self::Data>;

    /// The device goes away (driver unregistered, or the device removed).
    fn remove(data: Self::Data, ctx: &Self::Context) {
        let _ = ctx;
        drop(data);
    }
}

/// A PCI device, borrowed for the duration of a `probe` or `remove` call.
pub(crate) struct Device(NonNull<bindings::pci_dev>);

/// A reference on a PCI device (`pci_dev_get`/`pci_dev_put`), kept by the guards.
struct DevRef(NonNull<bindings::pci_dev>);

// SAFETY: a counted `pci_dev` reference may be used and dropped from any thread.
unsafe impl Send for DevRef {}
// SAFETY: `&DevRef` allows nothing but reading the pointer.
unsafe impl Sync for DevRef {}

impl DevRef {
    fn new(dev: &Device) -> Self {
        // SAFETY: `dev` is a live device (borrowed from a probe/remove call); the
        // reference taken here keeps the struct alive until `drop`.
        unsafe { bindings::pci_dev_get(dev.0.as_ptr()) };
        Self(dev.0)
    }

    fn as_ptr(&self) -> *mut bindings::pci_dev {
        self.0.as_ptr()
    }
}

impl Drop for DevRef {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `new`.
        unsafe { bindings::pci_dev_put(self.0.as_ptr()) };
    }
}

impl Device {
    fn as_ptr(&self) -> *mut bindings::pci_dev {
        self.0.as_ptr()
    }

    /// The device's name (`0000:00:04.0`).
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: `pci_name` returns the device's NUL-terminated name, which lives as
        // long as the device, so at least as long as this borrow.
        unsafe { CStr::from_char_ptr(bindings::sci_pci_name(self.as_ptr()).cast()) }
    }

    /// `pci_enable_device`: wakes the device and enables its BARs.
    pub(crate) fn enable(&self) -> Result<Enabled> {
        // SAFETY: a live device.
        to_result(unsafe { bindings::pci_enable_device(self.as_ptr()) })?;
        Ok(Enabled(DevRef::new(self)))
    }

    /// `pci_request_regions`: claims all BARs for `name`.
    pub(crate) fn request_regions(&self, name: &'static CStr) -> Result<Regions> {
        // SAFETY: a live device; `name` outlives the claim.
        to_result(unsafe {
            bindings::pci_request_regions(self.as_ptr(), name.as_char_ptr().cast())
        })?;
        Ok(Regions(DevRef::new(self)))
    }

    /// `pci_set_master`: lets the device master the bus (MSI-X messages are bus writes:
    /// without it QEMU drops a device's interrupts).
    pub(crate) fn set_master(&self) -> BusMaster {
        // SAFETY: a live, enabled device.
        unsafe { bindings::pci_set_master(self.as_ptr()) };
        BusMaster(DevRef::new(self))
    }

    /// Physical start and length of BAR `bar` (length 0: no such BAR).
    pub(crate) fn resource(&self, bar: u32) -> (u64, usize) {
        let bar = bar as c_int;
        // SAFETY: a live device; the helpers only read its resource table.
        let (start, len) = unsafe {
            (
                bindings::sci_pci_resource_start(self.as_ptr(), bar),
                bindings::sci_pci_resource_len(self.as_ptr(), bar),
            )
        };
        (start, usize::try_from(len).unwrap_or(0))
    }

    /// `struct page`s for memory BAR `bar` (`ZONE_DEVICE`), so that its bytes can be page
    /// frags of socket buffers; they go with the driver's binding, after `remove`.
    pub(crate) fn memory_pages(&self, bar: u32) -> Result {
        // SAFETY: a live device being probed; the helper ties the pages to its binding.
        to_result(unsafe { bindings::sci_pci_bar_pages(self.as_ptr(), bar as c_int) })
    }

    /// `pci_iomap` of the first `len` bytes of BAR `bar` (registers, uncached).
    pub(crate) fn iomap(&self, bar: u32, len: usize) -> Result<IoMem> {
        let (_, bar_len) = self.resource(bar);
        if bar_len < len || len == 0 {
            return Err(ENODEV);
        }
        // SAFETY: a live device whose regions the caller requested.
        let addr = unsafe { bindings::pci_iomap(self.as_ptr(), bar as c_int, len as _) };
        let addr = NonNull::new(addr).ok_or(ENOMEM)?;
        Ok(IoMem {
            addr,
            len,
            dev: DevRef::new(self),
        })
    }

    /// `pci_alloc_irq_vectors(min, max, flags)`; `flags` as `PCI_IRQ_MSIX`.
    pub(crate) fn alloc_irq_vectors(&self, min: u32, max: u32, flags: u32) -> Result<IrqVectors> {
        // SAFETY: a live device.
        let n = unsafe { bindings::pci_alloc_irq_vectors(self.as_ptr(), min, max, flags) };
        to_result(n)?;
        Ok(IrqVectors {
            count: n as u32,
            dev: DevRef::new(self),
        })
    }
}

/// An enabled device (`pci_disable_device` on drop).
pub(crate) struct Enabled(DevRef);

impl Drop for Enabled {
    fn drop(&mut self) {
        // SAFETY: enabled by `Device::enable`, once.
        unsafe { bindings::pci_disable_device(self.0.as_ptr()) };
    }
}

/// Claimed BARs (`pci_release_regions` on drop).
pub(crate) struct Regions(DevRef);

impl Drop for Regions {
    fn drop(&mut self) {
        // SAFETY: claimed by `Device::request_regions`.
        unsafe { bindings::pci_release_regions(self.0.as_ptr()) };
    }
}

/// Bus mastering on (`pci_clear_master` on drop).
pub(crate) struct BusMaster(DevRef);

impl Drop for BusMaster {
    fn drop(&mut self) {
        // SAFETY: set by `Device::set_master`.
        unsafe { bindings::pci_clear_master(self.0.as_ptr()) };
    }
}

/// An `ioremap`ped register BAR (`pci_iounmap` on drop); 32-bit accesses only.
pub(crate) struct IoMem {
    addr: NonNull<c_void>,
    len: usize,
    dev: DevRef,
}

// SAFETY: MMIO registers may be accessed from any thread; each access is one
// `ioread32`/`iowrite32`.
unsafe impl Send for IoMem {}
// SAFETY: as above.
unsafe impl Sync for IoMem {}

impl IoMem {
    fn reg(&self, off: usize) -> Option<*mut c_void> {
        if off % 4 != 0 || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: `off + 4 <= len`, inside the mapping.
        Some(unsafe { self.addr.as_ptr().cast::<u8>().add(off).cast() })
    }

    /// Reads the 32-bit register at `off` (all ones if out of range, as a missing
    /// device reads).
    pub(crate) fn read32(&self, off: usize) -> u32 {
        match self.reg(off) {
            // SAFETY: an aligned register inside the mapping.
            Some(p) => unsafe { bindings::ioread32(p) },
            None => u32::MAX,
        }
    }

    /// Writes the 32-bit register at `off` (ignored if out of range).
    pub(crate) fn write32(&self, off: usize, v: u32) {
        if let Some(p) = self.reg(off) {
            // SAFETY: an aligned register inside the mapping.
            unsafe { bindings::iowrite32(v, p) };
        }
    }
}

impl Drop for IoMem {
    fn drop(&mut self) {
        // SAFETY: mapped by `Device::iomap` for this device.
        unsafe { bindings::pci_iounmap(self.dev.as_ptr(), self.addr.as_ptr()) };
    }
}

/// Allocated interrupt vectors (`pci_free_irq_vectors` on drop; every [`ThreadedIrq`]
/// on them must be gone first).
pub(crate) struct IrqVectors {
    count: u32,
    dev: DevRef,
}

impl IrqVectors {
    /// The Linux IRQ number of vector `index`.
    pub(crate) fn irq(&self, index: u32) -> Result<u32> {
        if index >= self.count {
            return Err(EINVAL);
        }
        // SAFETY: the vectors are allocated for this device.
        let irq = unsafe { bindings::pci_irq_vector(self.dev.as_ptr(), index) };
        to_result(irq)?;
        Ok(irq as u32)
    }
}

impl Drop for IrqVectors {
    fn drop(&mut self) {
        // SAFETY: allocated by `Device::alloc_irq_vectors`.
        unsafe { bindings::pci_free_irq_vectors(self.dev.as_ptr()) };
    }
}

/// What an interrupt does, in two stages after the hard-IRQ half (which only queues
/// the first): [`IrqHandler::softirq`] in softirq context (a BH work item on the CPU that
/// took the interrupt, as a network driver's NAPI poll runs), then, only if it asks,
/// [`IrqHandler::handle`] in the IRQ's kernel thread (process context, may sleep). What
/// `softirq` does costs no context switch; the locks it takes must be taken with bottom
/// halves off everywhere else (`SpinLockBh`).
pub(crate) trait IrqHandler: Send + Sync + 'static {
    /// The interrupt fired (softirq context: no sleeping, no mutex). Returns whether
    /// [`IrqHandler::handle`] must run.
    fn softirq(&self) -> bool;
    /// What needs process context (the IRQ's thread, woken by `softirq`).
    fn handle(&self);
}

/// An interrupt handler in three stages (`sci_irq_request`: a hard-IRQ half that queues
/// a work item on `system_bh_highpri_wq`, which calls [`IrqHandler::softirq`] and may
/// wake the IRQ's thread, which calls [`IrqHandler::handle`]). `free_irq` and
/// `cancel_work_sync` on drop, which wait for a running stage.
pub(crate) struct ThreadedIrq<T: IrqHandler> {
    /// The C side's state (its work item and what the stages call); pinned, as the IRQ
    /// and the workqueue hold its address.
    state: Pin<KBox<Opaque<bindings::sci_irq>>>,
    /// What the stages call (their `data`), kept alive until the IRQ is freed.
    _handler: Arc<T>,
}

// SAFETY: the state is only touched by the C stages and by `drop`, which frees the IRQ
// and waits for the work before it goes; `T` is `Send + Sync`.
unsafe impl<T: IrqHandler> Send for ThreadedIrq<T> {}
// SAFETY: as for `Send`; `&ThreadedIrq` gives access to nothing.
unsafe impl<T: IrqHandler> Sync for ThreadedIrq<T> {}

/// # Safety
///
/// `data` is the `Arc<T>` pointer registered by [`ThreadedIrq::request`], alive until
/// `sci_irq_free` returns.
unsafe extern "C" fn irq_softirq<T: IrqHandler>(data: *mut c_void) -> bool {
    // SAFETY: see the function's contract.
    let handler = unsafe { &*data.cast_const().cast::<T>() };
    handler.softirq()
}

/// # Safety
///
/// As for [`irq_softirq`].
unsafe extern "C" fn irq_thread<T: IrqHandler>(data: *mut c_void) {
    // SAFETY: see the function's contract.
    let handler = unsafe { &*data.cast_const().cast::<T>() };
    handler.handle();
}

impl<T: IrqHandler> ThreadedIrq<T> {
    /// Requests vector `index` of `vectors` for `handler`, named `name` in
    /// `/proc/interrupts`.
    pub(crate) fn request(
        vectors: &IrqVectors,
        index: u32,
        name: &'static CStr,
        handler: Arc<T>,
    ) -> Result<Self> {
        let irq = vectors.irq(index)?;
        let state = KBox::pin(Opaque::<bindings::sci_irq>::uninit(), GFP_KERNEL)?;
        let data = core::ptr::from_ref::<T>(&handler)
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `state` is pinned and outlives the IRQ (`drop` frees it first); the
        // trampolines match `T`; `data` stays valid while `self` holds the `Arc`; `name`
        // is 'static.
        to_result(unsafe {
            bindings::sci_irq_request(
                state.get(),
                irq,
                name.as_char_ptr().cast(),
                data,
                Some(irq_softirq::<T>),
                Some(irq_thread::<T>),
            )
        })?;
        Ok(Self {
            state,
            _handler: handler,
        })
    }
}

impl<T: IrqHandler> Drop for ThreadedIrq<T> {
    fn drop(&mut self) {
        // SAFETY: requested in `request` with this state; `sci_irq_free` waits for every
        // running stage, after which the state and the `Arc` may go.
        unsafe { bindings::sci_irq_free(self.state.get()) };
    }
}

/// The registered driver: `pci_driver` first, so the trampolines find the context from
/// the `pci_driver` pointer of a device.
#[repr(C)]
struct Inner<T: Driver> {
    drv: Opaque<bindings::pci_driver>,
    ids: KVec<bindings::pci_device_id>,
    ctx: T::Context,
}

/// A registered PCI driver (`pci_unregister_driver` on drop, which removes its devices).
pub(crate) struct Registration<T: Driver> {
    inner: Pin<KBox<Inner<T>>>,
}

// SAFETY: the registration only unregisters on drop, which is allowed from any thread;
// the context is `Send + Sync`.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: `&Registration` gives access to the `Sync` context only.
unsafe impl<T: Driver> Sync for Registration<T> {}

impl<T: Driver> Inner<T> {
    /// The registration of the driver `pdev` is bound to.
    ///
    /// # Safety
    ///
    /// `pdev` is being probed or removed by a driver registered by [`Registration`]
    /// with this `T`.
    unsafe fn of<'a>(pdev: *mut bindings::pci_dev) -> &'a Self {
        // SAFETY: per the contract, the device's driver is the `drv` field, first in a
        // `repr(C)` `Inner<T>` that lives while the driver is registered, which outlasts
        // any probe or remove call.
        unsafe {
            &*bindings::sci_pci_driver_of(pdev)
                .cast_const()
                .cast::<Self>()
        }
    }

    /// # Safety
    ///
    /// Called by the PCI core for a device matching this driver.
    unsafe extern "C" fn probe(
        pdev: *mut bindings::pci_dev,
        _id: *const bindings::pci_device_id,
    ) -> c_int {
        let Some(ptr) = NonNull::new(pdev) else {
            return EINVAL.to_errno();
        };
        let dev = Device(ptr);
        // SAFETY: see the function's contract.
        let inner = unsafe { Self::of(pdev) };
        // The box first: once `T::probe` succeeds, nothing may fail before the drvdata
        // owns its result (`remove` is only called for a successful probe).
        let slot = match KBox::<T::Data>::new_uninit(GFP_KERNEL) {
            Ok(slot) => slot,
            Err(e) => return Error::from(e).to_errno(),
        };
        match T::probe(&dev, &inner.ctx).map(|d| slot.write(d)) {
            Ok(data) => {
                // SAFETY: a device being probed; the pointer is taken back in `remove`.
                unsafe { bindings::sci_pci_set_drvdata(pdev, KBox::into_raw(data).cast()) };
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by the PCI core for a device this driver probed successfully.
    unsafe extern "C" fn remove(pdev: *mut bindings::pci_dev) {
        // SAFETY: set by a successful `probe` of this driver.
        let data = unsafe { bindings::sci_pci_get_drvdata(pdev) }.cast::<T::Data>();
        if data.is_null() {
            return;
        }
        // SAFETY: the `KBox` leaked in `probe`, taken back once.
        let data = unsafe { KBox::from_raw(data) };
        // SAFETY: the drvdata no longer owns anything.
        unsafe { bindings::sci_pci_set_drvdata(pdev, core::ptr::null_mut()) };
        // SAFETY: see the function's contract.
        let inner = unsafe { Self::of(pdev) };
        T::remove(KBox::into_inner(data), &inner.ctx);
    }
}

impl<T: Driver> Registration<T> {
    /// Registers the driver; devices present now are probed before this returns.
    pub(crate) fn new(ctx: T::Context) -> Result<Self> {
        let mut ids = KVec::with_capacity(T::IDS.len() + 1, GFP_KERNEL)?;
        for id in T::IDS {
            ids.push(
                bindings::pci_device_id {
                    vendor: id.vendor.into(),
                    device: id.device.into(),
                    subvendor: !0,
                    subdevice: !0,
                    ..Default::default()
                },
                GFP_KERNEL,
            )?;
        }
        // The table ends with an all-zero entry.
        ids.push(bindings::pci_device_id::default(), GFP_KERNEL)?;
        let mut drv = bindings::pci_driver {
            name: T::NAME.as_char_ptr().cast(),
            id_table: ids.as_ptr(),
            probe: Some(Inner::<T>::probe),
            remove: Some(Inner::<T>::remove),
            ..Default::default()
        };
        // No bind/unbind through sysfs: the fabric built on a device cannot be torn
        // down under its connections.
        drv.driver.suppress_bind_attrs = true;
        let inner = KBox::pin(
            Inner {
                drv: Opaque::new(drv),
                ids,
                ctx,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `drv` is pinned in `inner`, which lives until `drop` unregisters it;
        // its `id_table` points into `ids`, whose buffer does not move with the box.
        to_result(unsafe { bindings::sci_pci_register_driver(inner.drv.get()) })?;
        Ok(Self { inner })
    }

    /// The context handed to `new`.
    pub(crate) fn context(&self) -> &T::Context {
        &self.inner.ctx
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: registered in `new`; removes every bound device first.
        unsafe { bindings::pci_unregister_driver(self.inner.drv.get()) };
    }
}
