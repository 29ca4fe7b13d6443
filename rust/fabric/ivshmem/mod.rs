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
//!   ([`FabricEvents::node_down`]) and resets every connection to it, and only then
//!   this node drops its link, after which the peer may relink. A guest whose QEMU
//!   exits is marked down in the region by the ivshmem server (the fabric manager, see
//!   `tools/ivshmem-server`), so its peers see it leave at their next tick. The timeout
//!   is the backstop for a guest that hangs with its QEMU alive, and for
//!   `ivshmem-plain`, which has no server; it must outlast the longest time a guest's
//!   vCPUs may be kept off the host's CPUs while its peers run, or busy peers are reset
//!   for nothing.
//! - **This node's own connections** never touch the region: their segments are kernel
//!   memory, which no peer can write (a peer that scribbles over the region can break
//!   its own connections, never this node's others), and their doorbells and frames are
//!   delivered directly, as the loopback fabric does.

mod device;
mod heap;
mod node;
mod peer_test;
pub(crate) mod region_selftest;

use self::device::{DevSlot, IvshmemDev, IvshmemDriver, REG_DOORBELL};
use self::heap::Heap;
use super::memory::{Lease, SegMem, SegOwner};
use super::{Fabric, FabricEvents, NodeId, NodeLoss};
use crate::proto::doorbell::{DoorbellRx, DoorbellTx};
use crate::proto::frame::{Frame, FRAME_SIZE};
use crate::proto::liveness::{LivenessParams, PeerAction, PeerTracker, PeerView};
use crate::proto::mailbox::{MailboxError, MailboxRx, MailboxTx};
use crate::proto::region::{DirEntry, LinkWord, NodeWord, Region, PAGE_SIZE};
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::kthread::{self, SharedMain, SharedThread};
use crate::sys::params::FabricParams;
use crate::sys::pci::{IoMem, IrqHandler, Registration};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex, SpinLock};

/// Heartbeat and liveness period.
const TICK_MS: u64 = 100;
/// Observations a heartbeat must stand still for, besides the timeout.
const MIN_STILL_TICKS: u32 = 3;
/// `Doorbell` vector this backend uses (it allocates one).
const VECTOR: u32 = 0;
/// Peer doorbell word: the peer takes interrupts.
const DOORBELL_ON: u32 = 1 << 16;

/// Milliseconds of the monotonic clock.
pub(super) fn now_ms() -> u64 {
    u64::try_from(kernel::time::Ktime::ktime_get().to_ms()).unwrap_or(0)
}

type RegionSeg = Arc<SegMem>;
type Tx = MailboxTx<RegionSeg, RegionSeg>;
type Rx = MailboxRx<RegionSeg, RegionSeg>;
type BellTx = DoorbellTx<RegionSeg, KVec<u32>>;
type BellRx = DoorbellRx<RegionSeg, KVec<u32>>;

/// The link with one peer: liveness, and the mailboxes while linked.
struct Link {
    tracker: PeerTracker,
    tx: Option<Tx>,
    rx: Option<Rx>,
}

/// One node of the region as this node sees it.
#[pin_data]
struct Peer {
    id: NodeId,
    #[pin]
    link: Mutex<Link>,
    /// Linked both ways (frames, doorbells and mappings may flow).
    reachable: AtomicBool,
    /// Its doorbell id, and [`DOORBELL_ON`] if it takes interrupts.
    doorbell: AtomicU32,
    /// It broke the mailbox protocol (or the administrator dropped the link): the
    /// poller ends the link.
    broken: AtomicBool,
    /// Its mailbox no longer reads as the protocol wrote it: the region was written
    /// outside the protocol, so its connections are reset, not moved ([`NodeLoss`]).
    corrupt: AtomicBool,
    /// Guards this node's mappings of the peer's segments.
    #[pin]
    lease: SpinLock<Arc<Lease>>,
    /// Doorbells to the peer: this node's block in the peer's area.
    #[pin]
    bell_tx: SpinLock<BellTx>,
    /// Doorbells from the peer: its block in this node's area.
    #[pin]
    bell_rx: SpinLock<BellRx>,
}

impl Peer {
    fn new(region: &Region<RegionSeg>, me: NodeId, id: NodeId) -> Result<Arc<Self>> {
        let lease = Lease::new()?;
        let words = region.layout().bells().words();
        let bell_tx = region
            .doorbell_tx(me, id, KVec::from_elem(0u32, words, GFP_KERNEL)?)
            .map_err(|_| EINVAL)?;
        let bell_rx = region
            .doorbell_rx(me, id, KVec::from_elem(0u32, words, GFP_KERNEL)?)
            .map_err(|_| EINVAL)?;
        Arc::pin_init(
            pin_init!(Self {
                id,
                link <- kernel::new_mutex!(
                    Link { tracker: PeerTracker::new(), tx: None, rx: None },
                    "ivshmem::Peer::link"
                ),
                reachable: AtomicBool::new(false),
                doorbell: AtomicU32::new(0),
                broken: AtomicBool::new(false),
                corrupt: AtomicBool::new(false),
                lease <- kernel::new_spinlock!(lease, "ivshmem::Peer::lease"),
                bell_tx <- kernel::new_spinlock!(bell_tx, "ivshmem::Peer::bell_tx"),
                bell_rx <- kernel::new_spinlock!(bell_rx, "ivshmem::Peer::bell_rx"),
            }),
            GFP_KERNEL,
        )
    }

    /// Its mailbox no longer reads as the protocol wrote it: the poller ends the link
    /// and reports the region corrupted ([`NodeLoss::Corrupted`]).
    fn mailbox_broke(&self) {
        self.corrupt.store(true, Ordering::Release);
        self.broken.store(true, Ordering::Release);
    }
}

/// What the fabric calls, the poller thread and the interrupt thread share.
#[pin_data]
pub(crate) struct Shared {
    region: Region<RegionSeg>,
    /// BAR0: the `Doorbell` register.
    regs: Arc<IoMem>,
    /// The device was removed (set by its `remove`).
    dev: Arc<IvshmemDev>,
    me: NodeId,
    generation: u32,
    /// This node's word (its doorbell capability and id).
    word: NodeWord,
    /// This device can send and take interrupts.
    interrupts: bool,
    liveness: LivenessParams,
    events: Arc<dyn FabricEvents>,
    peers: KVec<Arc<Peer>>,
    heap: Arc<Heap>,
    /// Every segment this node exports, by channel (local mappings come from here).
    #[pin]
    exports: SpinLock<KVec<Option<Arc<SegMem>>>>,
    beat: AtomicU64,
    /// This node's own word was changed under it (reported once).
    word_changed: AtomicBool,
    /// Interrupts taken, polls done, frames and doorbells delivered (for the self-test
    /// and the logs).
    irqs: AtomicU64,
    polls: AtomicU64,
    frames: AtomicU64,
    doorbells: AtomicU64,
}

impl Shared {
    fn peer(&self, node: NodeId) -> Option<&Arc<Peer>> {
        self.peers.as_slice().get(usize::from(node))
    }

    /// Rings `peer`'s interrupt, if it takes them and this device can send them.
    fn ring(&self, peer: &Peer) {
        let d = peer.doorbell.load(Ordering::Acquire);
        if self.interrupts && d & DOORBELL_ON != 0 {
            self.regs
                .write32(REG_DOORBELL, ((d & 0xffff) << 16) | VECTOR);
        }
    }

    /// One liveness tick: heartbeat, then a look at every peer.
    fn tick(&self, now: u64) {
        let beat = self.beat.fetch_add(1, Ordering::Relaxed) + 1;
        self.region.set_heartbeat(self.me, beat);
        if self.region.node_word(self.me) != Some(self.word)
            && !self.word_changed.swap(true, Ordering::Relaxed)
        {
            // Someone else wrote this node's word: the fabric manager (the ivshmem
            // server) marking it down because it took this guest for gone, or a peer
            // writing garbage. Peers no longer link with it; reloading the module rejoins.
            pr_info!(
                "ivshmem: node {} found its node word changed by another party (marked down by the ivshmem server, or overwritten); peers will not link with it until af_sci is loaded again\n",
                self.me
            );
        }
        for peer in self.peers.iter() {
            if peer.id != self.me {
                self.tick_peer(peer, now);
            }
        }
    }

    fn tick_peer(&self, peer: &Peer, now: u64) {
        let view = PeerView::read(&self.region, self.me, peer.id);
        if let Some(w) = view.word {
            let on = if w.doorbell { DOORBELL_ON } else { 0 };
            peer.doorbell
                .store(u32::from(w.doorbell_id) | on, Ordering::Release);
        }
        let was_reachable = peer.reachable.load(Ordering::Acquire);
        let mut link = peer.link.lock();
        let mut action = link
            .tracker
            .observe(now, &view, self.generation, self.liveness);
        if action == PeerAction::None && peer.broken.swap(false, Ordering::AcqRel) {
            if let Some(g) = link.tracker.unlink(&view, self.generation) {
                action = PeerAction::Down(g);
            }
        }
        let (last_beat, still_ms) = (link.tracker.last_beat_ms(), link.tracker.still_ms());
        let down = match action {
            PeerAction::None => None,
            PeerAction::Down(g) => {
                // Nothing flows any more: no new mapping, frame or doorbell, and the
                // mappings made are revoked before the connections are reset.
                peer.reachable.store(false, Ordering::Release);
                link.tx = None;
                link.rx = None;
                let fresh = Lease::new();
                let mut lease = peer.lease.lock();
                lease.revoke();
                if let Ok(fresh) = fresh {
                    *lease = fresh;
                }
                Some(g)
            }
            PeerAction::Link(g) => {
                // What the peer writes here starts afresh, before the link is published;
                // so does what this node writes there (the peer resets it on its side).
                let _ = self.region.reset_inbound(self.me, peer.id);
                peer.bell_rx.lock().reset();
                peer.bell_tx.lock().reset();
                peer.corrupt.store(false, Ordering::Release);
                link.tx = self.region.mailbox_tx(self.me, peer.id).ok();
                link.rx = self.region.mailbox_rx(self.me, peer.id).ok();
                self.region
                    .set_link(self.me, peer.id, link.tracker.link_word());
                pr_info!(
                    "ivshmem: node {} linked with node {} (generation {})\n",
                    self.me,
                    peer.id,
                    g
                );
                None
            }
        };
        peer.reachable
            .store(link.tracker.reachable(), Ordering::Release);
        drop(link);
        if let (Some(g), false) = (down, was_reachable) {
            // Never linked both ways: nothing of the peer's was used. Usually a link the
            // peer did not return in time, remade at the next tick.
            pr_info!(
                "ivshmem: link with node {} (generation {}) dropped before it was returned\n",
                peer.id,
                g
            );
            self.region.set_link(self.me, peer.id, LinkWord::NONE);
        } else if let Some(g) = down {
            // The last heartbeat seen, on this node's monotonic clock (CLOCK_MONOTONIC
            // in ms): tests measure how soon after it the connections failed.
            let silent_ms = now.saturating_sub(last_beat);
            let loss = if peer.corrupt.swap(false, Ordering::AcqRel) || view.word.is_none() {
                NodeLoss::Corrupted
            } else {
                NodeLoss::Lost
            };
            pr_info!(
                "ivshmem: node {} (generation {}) is down, last heartbeat seen at {} ms ({} ms ago, {} ms of them watched; {}); {}\n",
                peer.id,
                g,
                last_beat,
                silent_ms,
                still_ms,
                down_cause(&view, g, still_ms >= self.liveness.timeout_ms),
                match loss {
                    NodeLoss::Lost => "moving or resetting its connections",
                    NodeLoss::Corrupted => "resetting its connections",
                }
            );
            self.events.node_down(peer.id, loss);
            // Only now may the peer relink: its old mappings and connections are gone.
            self.region.set_link(self.me, peer.id, LinkWord::NONE);
        }
    }

    /// Delivers what arrived: frames from every linked mailbox, rung channels from
    /// every linked peer's doorbell block.
    fn drain(&self) {
        for peer in self.peers.iter() {
            if peer.id != self.me && !peer.reachable.load(Ordering::Acquire) {
                continue;
            }
            let mut link = peer.link.lock();
            let Some(rx) = link.rx.as_mut() else {
                continue;
            };
            let slots = self.region.layout().mailbox().slots();
            for _ in 0..slots {
                match rx.poll() {
                    Ok(Some(frame)) => {
                        self.frames.fetch_add(1, Ordering::Relaxed);
                        self.events.control(peer.id, frame.encode_bytes());
                    }
                    Ok(None) => break,
                    // A frame that does not decode is dropped; the slot is consumed.
                    Err(MailboxError::Frame(_)) => {}
                    Err(_) => {
                        peer.mailbox_broke();
                        break;
                    }
                }
            }
            drop(link);
            peer.bell_rx.lock().take(|ch| {
                self.doorbells.fetch_add(1, Ordering::Relaxed);
                self.events.doorbell(ch);
            });
        }
    }

    /// Sends `frame` to `peer` through the region (also to this node itself: the
    /// self-test's path).
    fn send_frame(&self, peer: &Peer, frame: &[u8; FRAME_SIZE]) -> Result {
        let frame = Frame::decode_bytes(frame).map_err(|_| EINVAL)?;
        let mut link = peer.link.lock();
        let tx = link.tx.as_mut().ok_or(errno(bindings::EHOSTUNREACH))?;
        match tx.send(&frame) {
            Ok(_) => {}
            Err(MailboxError::Full) => return Err(EAGAIN),
            Err(_) => {
                peer.mailbox_broke();
                return Err(errno(bindings::EHOSTUNREACH));
            }
        }
        drop(link);
        self.ring(peer);
        Ok(())
    }

    /// Rings `peer`'s `channel` through the region (also for this node itself: the
    /// self-test's path).
    fn ring_channel(&self, peer: &Peer, channel: u32) {
        if peer.bell_tx.lock().ring(channel) {
            self.ring(peer);
        }
    }
}

/// Why the link with a peer's generation `g` ended, as its last view shows (for the
/// log); `timed_out`: its heartbeat stood still for the timeout.
fn down_cause(view: &PeerView, g: u32, timed_out: bool) -> &'static str {
    use crate::proto::region::NodeState;
    match view.word {
        None => "its node word is unreadable",
        Some(w) if w.generation != g && w.state == NodeState::Up => {
            "it came back as a new generation"
        }
        Some(w) if w.generation != g => "it is rejoining",
        Some(w) => match w.state {
            NodeState::Up if timed_out => "heartbeat timeout",
            // Alive, but it dropped or remade its link: usually it counted this node down.
            NodeState::Up => "it ended the link",
            NodeState::Down => "it left or was marked down",
            NodeState::Joining => "it is rejoining",
            NodeState::Absent => "its entry was cleared",
        },
    }
}

impl SharedMain for Shared {
    fn main(&self) {
        let tick = kernel::time::msecs_to_jiffies(TICK_MS as u32) as core::ffi::c_long;
        let mut next_tick = 0u64;
        while !kthread::should_stop() {
            let now = now_ms();
            if now >= next_tick && !self.dev.detached() {
                let late = now.saturating_sub(next_tick);
                if next_tick != 0 && late >= self.liveness.timeout_ms / 2 {
                    // Peers may count this node down (its heartbeat stood still): say
                    // why, on this side (a vCPU or host stall, not the fabric).
                    pr_info!(
                        "ivshmem: node {} heartbeat {} ms late (the poller did not run); peers time out after {} ms\n",
                        self.me,
                        late,
                        self.liveness.timeout_ms
                    );
                }
                self.tick(now);
                next_tick = now.saturating_add(TICK_MS);
            }
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.drain();
            // With interrupts the poll is a safety net; without, it is the receive path.
            kthread::sleep(if self.interrupts { tick } else { 1 });
        }
    }
}

impl IrqHandler for Shared {
    fn handle(&self) {
        self.irqs.fetch_add(1, Ordering::Relaxed);
        self.drain();
    }
}

/// The ivshmem fabric backend.
pub(crate) struct Ivshmem {
    shared: Arc<Shared>,
    poller: Option<SharedThread<Shared>>,
    dev: Arc<IvshmemDev>,
    /// Dropped last: unregistering the driver removes the device.
    _driver: Registration<IvshmemDriver>,
}

impl Ivshmem {
    /// Registers the PCI driver and joins the region of the first ivshmem device, as
    /// node `node_id` (or the device's `IVPosition`). `ENODEV` if there is no device.
    pub(crate) fn open(
        events: Arc<dyn FabricEvents>,
        params: &FabricParams,
        channels: usize,
    ) -> Result<Arc<Self>> {
        let driver = Registration::<IvshmemDriver>::new(DevSlot::new()?)?;
        let dev = driver.context().get().ok_or(ENODEV)?;
        let interrupts = dev.has_interrupts();
        let me = if params.node_id >= 0 {
            NodeId::try_from(params.node_id).map_err(|_| EINVAL)?
        } else if interrupts {
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
        let word = NodeWord {
            state: crate::proto::region::NodeState::Up,
            doorbell: interrupts,
            doorbell_id: u16::try_from(dev.ivposition).unwrap_or(0),
            generation: 0,
        };
        let whole = Arc::new(
            SegMem::device(&dev.mem, 0, dev.mem.len(), None, None)?,
            GFP_KERNEL,
        )?;
        let joined = node::join(&whole, me, word, params.nodes, liveness)?;
        let word = NodeWord {
            generation: joined.generation,
            ..word
        };
        let shared = match Self::shared(
            &dev,
            joined.region.clone(),
            me,
            word,
            liveness,
            events,
            channels,
            interrupts,
        ) {
            Ok(s) => s,
            Err(e) => {
                node::leave(&joined.region, me, word);
                return Err(e);
            }
        };
        let poller = match SharedThread::run(shared.clone(), kernel::c_str!("sci_ivshmem")) {
            Ok(t) => t,
            Err(e) => {
                node::leave(&joined.region, me, word);
                return Err(e);
            }
        };
        let fabric = Arc::new(
            Self {
                shared: shared.clone(),
                poller: Some(poller),
                dev: dev.clone(),
                _driver: driver,
            },
            GFP_KERNEL,
        )?;
        if interrupts {
            if let Err(e) = dev.request_irq(shared) {
                // Polling still delivers (every tick); say so.
                pr_warn!(
                    "ivshmem: no interrupt ({:?}); polling every {} ms\n",
                    e,
                    TICK_MS
                );
            }
        }
        let (_, heap_pages) = fabric.shared.heap.usage();
        pr_info!(
            "ivshmem: node {} up (generation {}), region of {} nodes, {} KiB heap, {}\n",
            me,
            joined.generation,
            joined.region.layout().nodes(),
            heap_pages * PAGE_SIZE / 1024,
            if interrupts {
                "MSI-X doorbells"
            } else {
                "polling"
            }
        );
        Ok(fabric)
    }

    #[allow(clippy::too_many_arguments)]
    fn shared(
        dev: &Arc<IvshmemDev>,
        region: Region<RegionSeg>,
        me: NodeId,
        word: NodeWord,
        liveness: LivenessParams,
        events: Arc<dyn FabricEvents>,
        channels: usize,
        interrupts: bool,
    ) -> Result<Arc<Shared>> {
        let layout = *region.layout();
        let mut peers = KVec::with_capacity(layout.nodes(), GFP_KERNEL)?;
        for n in 0..layout.nodes() {
            peers.push(Peer::new(&region, me, n as NodeId)?, GFP_KERNEL)?;
        }
        // This node's own mailbox (the self-test sends through it).
        if let Some(me_peer) = peers.as_slice().get(usize::from(me)) {
            let mut link = me_peer.link.lock();
            link.tx = region.mailbox_tx(me, me).ok();
            link.rx = region.mailbox_rx(me, me).ok();
            me_peer.doorbell.store(
                u32::from(word.doorbell_id) | if interrupts { DOORBELL_ON } else { 0 },
                Ordering::Release,
            );
        }
        let channels = channels.min(layout.channels());
        let heap = Heap::new(layout.heap_pages(), channels)?;
        let exports = KVec::from_elem(None, channels, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Shared {
                region,
                regs: dev.regs.clone(),
                dev: dev.clone(),
                me,
                generation: word.generation,
                word,
                interrupts,
                liveness,
                events,
                peers,
                heap,
                exports <- kernel::new_spinlock!(exports, "ivshmem::exports"),
                beat: AtomicU64::new(0),
                word_changed: AtomicBool::new(false),
                irqs: AtomicU64::new(0),
                polls: AtomicU64::new(0),
                frames: AtomicU64::new(0),
                doorbells: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// A segment of `len` bytes from this node's heap, or `None` if it is full.
    fn heap_segment(&self, channel: u32, len: usize) -> Result<Option<(Arc<SegMem>, DirEntry)>> {
        let s = &self.shared;
        let pages = len.div_ceil(PAGE_SIZE).max(1);
        let Some(alloc) = s.heap.alloc(pages) else {
            return Ok(None);
        };
        let span = s
            .region
            .heap_span(s.me, alloc.page, alloc.pages)
            .ok_or(EINVAL)?;
        let entry = DirEntry {
            page: u32::try_from(alloc.page).map_err(|_| EINVAL)?,
            pages: u32::try_from(alloc.pages).map_err(|_| EINVAL)?,
            generation: s.heap.next_export_gen(channel as usize),
        };
        let owner: Arc<dyn SegOwner> = Arc::new(alloc, GFP_KERNEL)?;
        let seg = SegMem::device(&s.dev.mem, span.off, span.len, Some(owner), None)?;
        seg.zero();
        Ok(Some((Arc::new(seg, GFP_KERNEL)?, entry)))
    }
}

impl Drop for Ivshmem {
    fn drop(&mut self) {
        let s = &self.shared;
        // Interrupts off, poller stopped: nothing delivers any more.
        self.dev.free_irq();
        drop(self.poller.take());
        node::leave(&s.region, s.me, s.word);
        pr_info!(
            "ivshmem: node {} left (polls {}, interrupts {}, frames {}, doorbells {})\n",
            s.me,
            s.polls.load(Ordering::Relaxed),
            s.irqs.load(Ordering::Relaxed),
            s.frames.load(Ordering::Relaxed),
            s.doorbells.load(Ordering::Relaxed)
        );
    }
}

impl Fabric for Ivshmem {
    fn name(&self) -> &'static str {
        "ivshmem"
    }

    fn local_node(&self) -> NodeId {
        self.shared.me
    }

    fn reaches(&self, node: NodeId) -> bool {
        node == self.shared.me
            || self
                .shared
                .peer(node)
                .is_some_and(|p| p.reachable.load(Ordering::Acquire))
    }

    fn drop_link(&self, node: NodeId) -> Result {
        let peer = self
            .shared
            .peer(node)
            .filter(|p| p.id != self.shared.me)
            .ok_or(crate::sys::errno::errno(crate::sys::bindings::ENOTCONN))?;
        if !peer.reachable.load(Ordering::Acquire) {
            return Err(crate::sys::errno::errno(crate::sys::bindings::ENOTCONN));
        }
        pr_info!(
            "ivshmem: dropping the link with node {} (administrator's request)\n",
            node
        );
        // The poller unlinks it at its next tick, as a link whose peer broke the rules.
        peer.broken.store(true, Ordering::Release);
        Ok(())
    }

    fn create_segment(&self, channel: u32, len: usize, peer: NodeId) -> Result<Arc<SegMem>> {
        let s = &self.shared;
        let slot = channel as usize;
        if slot >= s.exports.lock().len() {
            return Err(EINVAL);
        }
        let (seg, entry) = if peer == s.me {
            // This node's own connection: private kernel memory, which no peer can
            // write, and nothing in the directory (the peer end is in this kernel).
            (Arc::new(SegMem::alloc(len)?, GFP_KERNEL)?, None)
        } else {
            match self.heap_segment(channel, len)? {
                Some((seg, entry)) => (seg, Some(entry)),
                None => return Err(ENOMEM),
            }
        };
        let old = {
            let mut table = s.exports.lock();
            let old = table
                .as_mut_slice()
                .get_mut(slot)
                .ok_or(EINVAL)?
                .replace(seg.clone());
            // Published under the lock, so the directory follows the table's order.
            s.region.set_export(s.me, channel, entry);
            old
        };
        // A stale export is freed outside the lock.
        drop(old);
        Ok(seg)
    }

    fn map_segment(&self, node: NodeId, channel: u32) -> Result<Arc<SegMem>> {
        let s = &self.shared;
        if node == s.me {
            let table = s.exports.lock();
            return table
                .as_slice()
                .get(channel as usize)
                .and_then(Clone::clone)
                .ok_or(ENOENT);
        }
        let peer = s.peer(node).ok_or(errno(bindings::EHOSTUNREACH))?;
        if !peer.reachable.load(Ordering::Acquire) {
            return Err(errno(bindings::EHOSTUNREACH));
        }
        let lease = peer.lease.lock().clone();
        let (span, _) = s.region.lookup(node, channel).ok_or(ENOENT)?;
        let seg = SegMem::device(&s.dev.mem, span.off, span.len, None, Some(lease))?;
        Ok(Arc::new(seg, GFP_KERNEL)?)
    }

    fn unexport(&self, channel: u32) {
        let s = &self.shared;
        let old = {
            let mut table = s.exports.lock();
            let old = table
                .as_mut_slice()
                .get_mut(channel as usize)
                .and_then(Option::take);
            if old.is_some() {
                s.region.set_export(s.me, channel, None);
            }
            old
        };
        drop(old);
    }

    fn notify(&self, node: NodeId, channel: u32) {
        let s = &self.shared;
        if node == s.me {
            s.events.doorbell(channel);
        } else if let Some(peer) = s.peer(node) {
            if peer.reachable.load(Ordering::Acquire) {
                s.ring_channel(peer, channel);
            }
        }
    }

    fn send_control(&self, node: NodeId, frame: &[u8; FRAME_SIZE]) -> Result {
        let s = &self.shared;
        if node == s.me {
            s.events.control(s.me, *frame);
            return Ok(());
        }
        let peer = s.peer(node).ok_or(errno(bindings::EHOSTUNREACH))?;
        if !peer.reachable.load(Ordering::Acquire) {
            return Err(errno(bindings::EHOSTUNREACH));
        }
        s.send_frame(peer, frame)
    }
}
