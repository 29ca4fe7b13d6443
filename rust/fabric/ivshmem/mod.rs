// SPDX-License-Identifier: GPL-2.0

//! The inter-VM fabric: QEMU guests sharing one ivshmem BAR, laid out as
//! [`crate::proto::region`] describes.
//!
//! - **Segments** come from this node's heap in its area of the region ([`heap`]) and
//!   are published in its export directory under their channel; a peer maps one by
//!   reading the directory entry (validated to lie in this node's heap). When the heap
//!   is full a connection with another node is refused (`ENOMEM`) and falls back to TCP.
//! - **Doorbells**: count the ring of the channel in this node's doorbell block in the
//!   receiver's area ([`crate::proto::doorbell`]: per-sender counters, no word that two
//!   nodes read-modify-write), then, if the receiver takes interrupts and this device can
//!   send them, write the receiver's `Doorbell` register value; **control frames** go
//!   through the per-pair mailbox in the region and the same interrupt.
//! - **Receiving**: with MSI-X (`ivshmem-doorbell`) the interrupt's thread looks at the
//!   next slot of every linked mailbox and at every linked peer's doorbell block; without
//!   (`ivshmem-plain`) the poller kthread does it every jiffy (4 ms at HZ=250). Polling
//!   costs a wake-up per jiffy that reads one mailbox slot and one line of group counters
//!   per linked peer: about 250 wake-ups a second;
//!   `selftests/ivshmem/ivshmem-suite` measures the kthread's CPU time (see
//!   Documentation/af_sci.rst).
//! - **Liveness**: the poller heartbeats every [`TICK_MS`] and watches every peer
//!   ([`crate::proto::liveness`]); a peer whose heartbeat stands still for
//!   `ivshmem_timeout_ms` (default 2000) of this node's watch (time this node itself
//!   was not running does not count), that leaves, or that comes back as a new
//!   generation is *down*: its mappings are revoked, the layer above is told
//!   ([`FabricEvents::node_down`]) and moves or resets every connection to it, and only
//!   then this node drops its link, after which the peer may relink. A guest whose QEMU
//!   exits is marked down in the region by the ivshmem server (the fabric manager, see
//!   `tools/ivshmem-server`), so its peers see it leave at their next tick. The timeout
//!   is the backstop for a guest that hangs with its QEMU alive, and for
//!   `ivshmem-plain`, which has no server; it must outlast the longest time a guest's
//!   vCPUs may be kept off the host's CPUs while its peers run, or busy peers are reset
//!   for nothing.
//! - **The device comes and goes.** One device at a time is *attached* ([`attachment`]):
//!   joined to its region as this node. When it is hot-unplugged, the attachment leaves
//!   the region before the device's memory goes, so that connections with other nodes
//!   move onto TCP with every byte (see [`attachment`]); the fabric then serves only this
//!   node's own connections. When a device is plugged in again, the poller joins its
//!   region as the same node with a new generation, and new connections take the
//!   fabric again.
//! - **This node's own connections** never touch the region: their segments are kernel
//!   memory, which no peer can write (a peer that scribbles over the region can break
//!   its own connections, never this node's others), and their doorbells and frames are
//!   delivered directly, as the loopback fabric does. They outlive the device.

mod addresses;
mod attachment;
mod device;
mod heap;
mod node;
mod peer_test;
pub(crate) mod region_selftest;

use self::attachment::{Attachment, MIN_STILL_TICKS};
use self::device::{DevSlot, DevUser, IvshmemDev, IvshmemDriver};
use super::memory::SegMem;
use super::{Fabric, FabricEvents, NodeId};
use crate::config::rules::Ip;
use crate::proto::frame::FRAME_SIZE;
use crate::proto::liveness::LivenessParams;
use crate::proto::region::PAGE_SIZE;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::kthread::{self, SharedMain, SharedThread};
use crate::sys::params::FabricParams;
use crate::sys::pci::Registration;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex, SpinLock};

/// Heartbeat and liveness period.
const TICK_MS: u64 = 100;
/// Without interrupts the poller is the receive path. As NAPI does under load, it polls
/// every [`BUSY_POLL_US`] (to twice that) while anything goes or comes, and falls back to
/// a pass a jiffy once nothing did for [`BUSY_IDLE_MS`]: a round trip then costs two
/// short sleeps instead of two jiffies, and an idle node costs what it did.
const BUSY_POLL_US: u32 = 50;
const BUSY_IDLE_MS: u64 = 20;
/// How long the poller waits before it tries again to join the region of a device
/// plugged in whose join failed.
const REJOIN_RETRY_MS: u64 = 5000;

/// Milliseconds of the monotonic clock.
pub(super) fn now_ms() -> u64 {
    u64::try_from(kernel::time::Ktime::ktime_get().to_ms()).unwrap_or(0)
}

/// A segment this node exports under a channel.
#[derive(Clone)]
struct Export {
    seg: Arc<SegMem>,
    /// The generation of the attachment in whose directory it is published (`None`:
    /// kernel memory for this node's own connection, never published).
    published: Option<u32>,
}

/// The fabric across attachments of the device: what stays while devices come and go.
#[pin_data]
pub(crate) struct Backend {
    /// This node's id, fixed for the module's life.
    me: NodeId,
    /// Nodes of a region this node formats (`ivshmem_nodes`).
    nodes: u32,
    liveness: LivenessParams,
    channels: usize,
    events: Arc<dyn FabricEvents>,
    slot: Arc<DevSlot>,
    /// The attachment of the device in use, if any.
    #[pin]
    current: SpinLock<Option<Arc<Attachment>>>,
    /// Serializes joins and leaves (both sleep).
    #[pin]
    attach_lock: Mutex<()>,
    /// Every segment this node exports, by channel (local mappings come from here).
    #[pin]
    exports: SpinLock<KVec<Option<Export>>>,
    /// Attachments made (the first at load).
    joins: AtomicU32,
}

impl Backend {
    /// The attachment in use, if a device is attached.
    fn attached(&self) -> Option<Arc<Attachment>> {
        self.current.lock().clone()
    }

    /// Joins the region of `dev`, unless it is no longer the device in the slot (it was
    /// removed meanwhile).
    fn attach(&self, dev: &Arc<IvshmemDev>) -> Result<Arc<Attachment>> {
        let _g = self.attach_lock.lock();
        if !self.slot.get().is_some_and(|d| Arc::ptr_eq(&d, dev)) {
            return Err(ENODEV);
        }
        if let Some(a) = self.attached() {
            return Ok(a);
        }
        let a = Attachment::join(
            dev,
            self.me,
            self.nodes,
            self.liveness,
            self.events.clone(),
            self.channels,
        )?;
        *self.current.lock() = Some(a.clone());
        let joins = self.joins.fetch_add(1, Ordering::Relaxed) + 1;
        let (_, heap_pages) = a.heap.usage();
        pr_info!(
            "ivshmem: node {} up (generation {}), region of {} nodes, {} KiB heap, {}{}\n",
            self.me,
            a.generation,
            a.region.layout().nodes(),
            heap_pages * PAGE_SIZE / 1024,
            if a.interrupts {
                "MSI-X doorbells"
            } else {
                "polling"
            },
            if joins > 1 {
                ", device plugged in again"
            } else {
                ""
            }
        );
        Ok(a)
    }

    /// Joins the region of a device plugged in after the last one went.
    fn rejoin(&self) -> Result {
        let dev = self.slot.get().ok_or(ENODEV)?;
        self.attach(&dev)
            .inspect_err(|e| {
                pr_warn!(
                    "ivshmem: node {} cannot join the region of the new device ({:?}); trying again in {} s\n",
                    self.me,
                    e,
                    REJOIN_RETRY_MS / 1000
                )
            })
            .map(|_| ())
    }

    /// Ends the attachment: with `removed`, that device goes away (connections move off
    /// it first, if it is the one attached); without, the module unloads (nothing is
    /// left on it).
    fn detach(&self, removed: Option<&Arc<IvshmemDev>>) {
        let _g = self.attach_lock.lock();
        let a = {
            let mut current = self.current.lock();
            match (&*current, removed) {
                (Some(a), Some(dev)) if !Arc::ptr_eq(&a.dev, dev) => return,
                _ => current.take(),
            }
        };
        let Some(a) = a else {
            return;
        };
        if removed.is_some() {
            a.leave();
        } else {
            a.quit();
        }
        // Its exports are no longer published anywhere; the connections hold their own.
        let mut gone = KVec::with_capacity(self.channels, GFP_KERNEL).unwrap_or_default();
        {
            let mut table = self.exports.lock();
            for e in table.iter_mut() {
                if e.as_ref()
                    .is_some_and(|x| x.published == Some(a.generation))
                {
                    if let Some(x) = e.take() {
                        // Room was made above; without it the export is dropped here.
                        let _ = gone.push(x, GFP_ATOMIC);
                    }
                }
            }
        }
        drop(gone);
    }
}

impl DevUser for Backend {
    fn removing(&self, dev: &Arc<IvshmemDev>) {
        self.detach(Some(dev));
    }
}

impl SharedMain for Backend {
    fn main(&self) {
        // It delivers what arrived (the only receive path of a device without
        // interrupts) and beats the heartbeat: a CPU-bound task must delay neither, as
        // it delays neither an interrupt nor its threaded handler.
        kthread::run_as_interrupt_thread();
        let tick = kernel::time::msecs_to_jiffies(TICK_MS as u32) as core::ffi::c_long;
        let mut next_tick = 0u64;
        let mut retry_at = 0u64;
        while !kthread::should_stop() {
            let now = now_ms();
            match self.attached() {
                Some(a) => {
                    a.poll(now, &mut next_tick);
                    // With interrupts the poll is a safety net; without, it is the
                    // receive path. The attachment is not held while sleeping: a leave
                    // frees it (and the device) at once.
                    let busy = a.busy(now, BUSY_IDLE_MS);
                    let interval = if a.interrupts { tick } else { 1 };
                    drop(a);
                    if busy {
                        kthread::sleep_us(BUSY_POLL_US);
                    } else {
                        kthread::sleep(interval);
                    }
                }
                None => {
                    next_tick = 0;
                    if now >= retry_at && self.slot.get().is_some() && self.rejoin().is_err() {
                        retry_at = now.saturating_add(REJOIN_RETRY_MS);
                    }
                    kthread::sleep(tick);
                }
            }
        }
    }
}

/// The ivshmem fabric backend.
pub(crate) struct Ivshmem {
    backend: Arc<Backend>,
    poller: Option<SharedThread<Backend>>,
    /// Dropped last: unregistering the driver removes the device.
    driver: Registration<IvshmemDriver>,
}

impl Ivshmem {
    /// Registers the PCI driver and joins the region of the first ivshmem device, as
    /// node `node_id` (or the device's `IVPosition`). `ENODEV` if there is no device.
    pub(crate) fn open(
        events: Arc<dyn FabricEvents>,
        params: &FabricParams,
        channels: usize,
    ) -> Result<Arc<Self>> {
        let slot = DevSlot::new()?;
        let driver = Registration::<IvshmemDriver>::new(slot.clone())?;
        let dev = slot.get().ok_or(ENODEV)?;
        let me = if params.node_id >= 0 {
            NodeId::try_from(params.node_id).map_err(|_| EINVAL)?
        } else if dev.has_interrupts() {
            NodeId::try_from(dev.ivposition).map_err(|_| EINVAL)?
        } else {
            pr_err!("ivshmem: an ivshmem-plain device has no node id: load with node_id=N\n");
            return Err(EINVAL);
        };
        let liveness = LivenessParams {
            timeout_ms: u64::from(params.timeout_ms.max(2 * TICK_MS as u32)),
            min_ticks: MIN_STILL_TICKS,
            tick_ms: TICK_MS,
        };
        let exports = KVec::from_elem(None, channels, GFP_KERNEL)?;
        let backend_slot = slot.clone();
        let backend = Arc::pin_init(
            pin_init!(Backend {
                me,
                nodes: params.nodes,
                liveness,
                channels,
                events,
                slot: backend_slot,
                current <- kernel::new_spinlock!(None, "ivshmem::Backend::current"),
                attach_lock <- kernel::new_mutex!((), "ivshmem::Backend::attach_lock"),
                exports <- kernel::new_spinlock!(exports, "ivshmem::Backend::exports"),
                joins: AtomicU32::new(0),
            }),
            GFP_KERNEL,
        )?;
        backend.attach(&dev)?;
        let poller = match SharedThread::run(backend.clone(), kernel::c_str!("sci_ivshmem")) {
            Ok(p) => p,
            Err(e) => {
                backend.detach(None);
                return Err(e);
            }
        };
        // From now on a removal of the device runs the leave.
        slot.set_user(Some(backend.clone()));
        Ok(Arc::new(
            Self {
                backend,
                poller: Some(poller),
                driver,
            },
            GFP_KERNEL,
        )?)
    }

    /// The attachment in use (the self-tests look inside it).
    fn attached(&self) -> Option<Arc<Attachment>> {
        self.backend.attached()
    }
}

impl Drop for Ivshmem {
    fn drop(&mut self) {
        // A removal from now on only frees the device; the poller stops; then this
        // node leaves the region.
        self.driver.context().set_user(None);
        drop(self.poller.take());
        self.backend.detach(None);
    }
}

impl Fabric for Ivshmem {
    fn name(&self) -> &'static str {
        "ivshmem"
    }

    fn local_node(&self) -> NodeId {
        self.backend.me
    }

    fn reaches(&self, node: NodeId) -> bool {
        let b = &self.backend;
        node == b.me || b.current.lock().as_ref().is_some_and(|a| a.reaches(node))
    }

    fn drop_link(&self, node: NodeId) -> Result {
        self.attached()
            .ok_or(errno(bindings::ENOTCONN))?
            .drop_link(node)
    }

    fn node_with_address(&self, ip: Ip) -> Option<NodeId> {
        let a = self.attached()?;
        addresses::node_with_address(&a.region, a.linked_peers(), ip)
    }

    fn visit_published(&self, skip: usize, f: &mut dyn FnMut(Ip, NodeId) -> bool) {
        if let Some(a) = self.attached() {
            addresses::visit_published(&a.region, a.linked_peers(), skip, f);
        }
    }

    fn create_segment(&self, channel: u32, len: usize, peer: NodeId) -> Result<Arc<SegMem>> {
        let b = &self.backend;
        let slot = channel as usize;
        if slot >= b.channels {
            return Err(EINVAL);
        }
        let attached = b.attached();
        let (seg, entry) = if peer == b.me {
            // This node's own connection: private kernel memory, which no peer can
            // write, and nothing in the directory (the peer end is in this kernel).
            (SegMem::alloc(len)?, None)
        } else {
            let a = attached.as_ref().ok_or(errno(bindings::EHOSTUNREACH))?;
            match a.heap_segment(channel, len)? {
                Some((seg, entry)) => (seg, Some(entry)),
                None => return Err(ENOMEM),
            }
        };
        let export = Export {
            seg: seg.clone(),
            published: entry.and(attached.as_ref().map(|a| a.generation)),
        };
        let old = {
            let mut table = b.exports.lock();
            let old = table
                .as_mut_slice()
                .get_mut(slot)
                .ok_or(EINVAL)?
                .replace(export);
            // Published under the lock, so the directory follows the table's order.
            if let Some(a) = &attached {
                a.region.set_export(b.me, channel, entry);
            }
            old
        };
        // A stale export is freed outside the lock.
        drop(old);
        Ok(seg)
    }

    fn map_segment(&self, node: NodeId, channel: u32) -> Result<Arc<SegMem>> {
        let b = &self.backend;
        if node == b.me {
            let table = b.exports.lock();
            return table
                .as_slice()
                .get(channel as usize)
                .and_then(|e| e.as_ref().map(|e| e.seg.clone()))
                .ok_or(ENOENT);
        }
        self.attached()
            .ok_or(errno(bindings::EHOSTUNREACH))?
            .map_segment(node, channel)
    }

    fn unexport(&self, channel: u32) {
        let b = &self.backend;
        let attached = b.attached();
        let old = {
            let mut table = b.exports.lock();
            let old = table
                .as_mut_slice()
                .get_mut(channel as usize)
                .and_then(Option::take);
            if let (
                Some(a),
                Some(Export {
                    published: Some(g), ..
                }),
            ) = (&attached, &old)
            {
                if *g == a.generation {
                    a.region.set_export(b.me, channel, None);
                }
            }
            old
        };
        drop(old);
    }

    fn notify(&self, node: NodeId, channel: u32) {
        let b = &self.backend;
        if node == b.me {
            b.events.doorbell(channel);
        } else if let Some(a) = b.current.lock().as_ref() {
            if let Some(peer) = a.peer(node).filter(|_| a.reaches(node)) {
                a.ring_channel(peer, channel);
            }
        }
    }

    fn send_control(&self, node: NodeId, frame: &[u8; FRAME_SIZE]) -> Result {
        let b = &self.backend;
        if node == b.me {
            b.events.control(b.me, *frame);
            return Ok(());
        }
        let a = self.attached().ok_or(errno(bindings::EHOSTUNREACH))?;
        let peer = a.peer(node).ok_or(errno(bindings::EHOSTUNREACH))?;
        if !a.reaches(node) {
            return Err(errno(bindings::EHOSTUNREACH));
        }
        a.send_frame(peer, frame)
    }
}
