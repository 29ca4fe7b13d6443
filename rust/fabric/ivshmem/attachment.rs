// SPDX-License-Identifier: GPL-2.0

//! One ivshmem device joined to its region: the links with the other nodes, the poll and
//! interrupt paths that deliver what arrives, and the leave when the device goes.
//!
//! An attachment lives from the join ([`Attachment::join`]) until the device is removed
//! or the module unloads ([`Attachment::leave`], [`Attachment::quit`]: `leave.rs`). The
//! liveness tick that links and unlinks the other nodes is in `links.rs`.
use super::addresses::{HostAddrs, Published};
use super::device::{IvshmemDev, REG_DOORBELL};
use super::heap::Heap;
use super::node;
use super::{now_ms, TICK_MS};
use crate::fabric::memory::{Lease, SegMem, SegOwner};
use crate::fabric::{FabricEvents, NodeId};
use crate::proto::doorbell::{DoorbellRx, DoorbellTx};
use crate::proto::frame::{Frame, FRAME_SIZE};
use crate::proto::liveness::{LivenessParams, PeerTracker, PeerView};
use crate::proto::mailbox::{MailboxError, MailboxPeek, MailboxRx, MailboxTx, MB_FIRST_SEQ};
use crate::proto::region::{DirEntry, NodeState, NodeWord, Region, PAGE_SIZE};
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::pci::{IoMem, IrqHandler};
use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex, SpinLock};

mod leave;
mod links;

/// Observations a heartbeat must stand still for, besides the timeout.
pub(super) const MIN_STILL_TICKS: u32 = 3;
/// `Doorbell` vector this backend uses (it allocates one).
const VECTOR: u32 = 0;
/// Peer doorbell word: the peer takes interrupts.
const DOORBELL_ON: u32 = 1 << 16;

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
pub(super) struct Peer {
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
    /// Doorbells from the peer: its block in this node's area. Taken in softirq
    /// context (the interrupt's first stage rings the channels).
    #[pin]
    bell_rx: SpinLockBh<BellRx>,
    /// A look at the peer's mailbox to this node that needs no lock: the interrupt's
    /// softirq stage wakes the thread only when a frame waits.
    mb_peek: Option<MailboxPeek<RegionSeg>>,
    /// The sequence number `link.rx` expects next, as its last poll left it.
    mb_expected: AtomicU32,
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
        let mb_peek = region.mailbox_peek(me, id).ok();
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
                bell_rx <- new_spinlock_bh!(bell_rx, "ivshmem::Peer::bell_rx"),
                mb_peek,
                mb_expected: AtomicU32::new(MB_FIRST_SEQ),
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

    /// Starts a fresh mailbox from the peer (`rx`: none if the region has none for it).
    fn open_rx(&self, link: &mut Link, rx: Option<Rx>) {
        self.mb_expected.store(MB_FIRST_SEQ, Ordering::Release);
        link.rx = rx;
    }

    /// Whether a frame from the peer waits for the thread (a lock-free look; may say yes
    /// once too often, never no while one waits).
    fn frame_waiting(&self) -> bool {
        self.mb_peek
            .as_ref()
            .is_some_and(|p| p.frame_waiting(self.mb_expected.load(Ordering::Acquire)))
    }

    /// Nothing flows any more: no new mapping, frame or doorbell, and the mappings made
    /// are revoked (before the connections are told).
    fn cut(&self, link: &mut Link) {
        self.reachable.store(false, Ordering::Release);
        link.tx = None;
        link.rx = None;
        let fresh = Lease::new();
        let mut lease = self.lease.lock();
        lease.revoke();
        if let Ok(fresh) = fresh {
            *lease = fresh;
        }
    }

    /// Ends the link from this side, which is leaving the region (the poller no longer
    /// runs for it).
    fn unlink(&self, me: NodeId, region: &Region<RegionSeg>, my_gen: u32) {
        let mut link = self.link.lock();
        let view = PeerView::read(region, me, self.id);
        let _ = link.tracker.unlink(&view, my_gen);
        self.cut(&mut link);
    }
}

/// One device joined to its region: what the fabric calls, the poller thread and the
/// interrupt thread share while the device is there.
#[pin_data]
pub(super) struct Attachment {
    pub(super) region: Region<RegionSeg>,
    /// BAR0: the `Doorbell` register.
    regs: Arc<IoMem>,
    pub(super) dev: Arc<IvshmemDev>,
    pub(super) me: NodeId,
    /// This node's generation in the region (new for every attachment).
    pub(super) generation: u32,
    /// This node's word (its doorbell capability and id).
    word: NodeWord,
    /// This device can send and take interrupts.
    pub(super) interrupts: bool,
    liveness: LivenessParams,
    pub(super) events: Arc<dyn FabricEvents>,
    peers: KVec<Arc<Peer>>,
    pub(super) heap: Arc<Heap>,
    beat: AtomicU64,
    /// The addresses this node published (the poller looks again now and then).
    #[pin]
    pub(super) published: Mutex<Published>,
    /// This node's own word was changed under it (reported once).
    word_changed: AtomicBool,
    /// The device is being removed ([`Attachment::leave`]): no tick, no delivery, no
    /// doorbell.
    leaving: AtomicBool,
    /// Held by a poll of the poller thread (the leave waits for a running one).
    #[pin]
    polling: Mutex<()>,
    /// Interrupts taken, polls done, frames and doorbells delivered (for the self-test
    /// and the logs).
    pub(super) irqs: AtomicU64,
    polls: AtomicU64,
    frames: AtomicU64,
    doorbells: AtomicU64,
    /// When this node last sent or took a frame or a doorbell (ms): without interrupts
    /// the poller is the receive path, and polls busily until it has been idle a while.
    active_ms: AtomicU64,
}

impl Attachment {
    /// Joins the region of `dev` as node `me` (the device's id on the ivshmem server is
    /// its doorbell id) and starts taking its interrupts.
    pub(super) fn join(
        dev: &Arc<IvshmemDev>,
        me: NodeId,
        nodes: u32,
        liveness: LivenessParams,
        events: Arc<dyn FabricEvents>,
        channels: usize,
    ) -> Result<Arc<Self>> {
        let interrupts = dev.has_interrupts();
        let word = NodeWord {
            state: NodeState::Up,
            doorbell: interrupts,
            doorbell_id: u16::try_from(dev.ivposition).unwrap_or(0),
            generation: 0,
        };
        let whole = SegMem::device(&dev.mem, 0, dev.mem.len(), None, None)?;
        let addrs = HostAddrs::now(&*events);
        let joined = node::join(&whole, me, word, nodes, liveness, addrs.as_slice())?;
        let word = NodeWord {
            generation: joined.generation,
            ..word
        };
        let region = joined.region.clone();
        let attached = Self::new(dev, joined.region, me, word, liveness, events, channels)
            .inspect_err(|_| node::leave(&region, me, word))?;
        attached.published.lock().record(me, addrs, now_ms());
        if interrupts {
            if let Err(e) = dev.request_irq(attached.clone()) {
                // Polling still delivers (every tick); say so.
                pr_warn!(
                    "ivshmem: no interrupt ({:?}); polling every {} ms\n",
                    e,
                    TICK_MS
                );
            }
        }
        Ok(attached)
    }

    fn new(
        dev: &Arc<IvshmemDev>,
        region: Region<RegionSeg>,
        me: NodeId,
        word: NodeWord,
        liveness: LivenessParams,
        events: Arc<dyn FabricEvents>,
        channels: usize,
    ) -> Result<Arc<Self>> {
        let layout = *region.layout();
        let interrupts = word.doorbell;
        let mut peers = KVec::with_capacity(layout.nodes(), GFP_KERNEL)?;
        for n in 0..layout.nodes() {
            peers.push(Peer::new(&region, me, n as NodeId)?, GFP_KERNEL)?;
        }
        // This node's own mailbox (the self-test sends through it).
        if let Some(me_peer) = peers.as_slice().get(usize::from(me)) {
            let mut link = me_peer.link.lock();
            link.tx = region.mailbox_tx(me, me).ok();
            me_peer.open_rx(&mut link, region.mailbox_rx(me, me).ok());
            me_peer.doorbell.store(
                u32::from(word.doorbell_id) | if interrupts { DOORBELL_ON } else { 0 },
                Ordering::Release,
            );
        }
        let heap = Heap::new(layout.heap_pages(), channels.min(layout.channels()))?;
        Arc::pin_init(
            pin_init!(Self {
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
                beat: AtomicU64::new(0),
                published <- kernel::new_mutex!(Published::new(), "ivshmem::Attachment::published"),
                word_changed: AtomicBool::new(false),
                leaving: AtomicBool::new(false),
                polling <- kernel::new_mutex!((), "ivshmem::Attachment::polling"),
                irqs: AtomicU64::new(0),
                polls: AtomicU64::new(0),
                frames: AtomicU64::new(0),
                doorbells: AtomicU64::new(0),
                active_ms: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
    }

    pub(super) fn peer(&self, node: NodeId) -> Option<&Arc<Peer>> {
        self.peers.as_slice().get(usize::from(node))
    }

    /// Whether `node` is linked both ways (frames, doorbells and mappings may flow).
    pub(super) fn reaches(&self, node: NodeId) -> bool {
        self.peer(node)
            .is_some_and(|p| p.reachable.load(Ordering::Acquire))
    }

    /// The linked peers, in node order.
    pub(super) fn linked_peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.region.layout().nodes())
            .filter_map(|n| NodeId::try_from(n).ok())
            .filter(move |&n| n != self.me && self.reaches(n))
    }

    /// Rings `peer`'s interrupt, if it takes them and this device can send them.
    fn ring(&self, peer: &Peer) {
        let d = peer.doorbell.load(Ordering::Acquire);
        if self.interrupts && d & DOORBELL_ON != 0 && !self.leaving.load(Ordering::Acquire) {
            self.regs
                .write32(REG_DOORBELL, ((d & 0xffff) << 16) | VECTOR);
        }
    }

    /// Delivers what arrived: frames from every linked mailbox, rung channels from
    /// every linked peer's doorbell block. True if anything did. Process context (the
    /// IRQ's thread, or the poller).
    fn drain(&self) -> bool {
        let mut delivered = false;
        for peer in self.peers.iter().filter(|p| self.linked(p)) {
            delivered |= self.take_frames(peer);
            delivered |= self.ring_channels(peer);
        }
        delivered
    }

    /// Hands every linked mailbox's frames to the control plane (the IRQ's thread).
    fn take_all_frames(&self) {
        for peer in self.peers.iter().filter(|p| self.linked(p)) {
            self.take_frames(peer);
        }
    }

    /// Whether frames and doorbells may flow from `peer` (linked both ways, or this
    /// node itself).
    fn linked(&self, peer: &Peer) -> bool {
        peer.id == self.me || peer.reachable.load(Ordering::Acquire)
    }

    /// Hands the frames in `peer`'s mailbox to the control plane. True if there were.
    fn take_frames(&self, peer: &Peer) -> bool {
        let mut delivered = false;
        let mut link = peer.link.lock();
        let Some(rx) = link.rx.as_mut() else {
            return false;
        };
        let slots = self.region.layout().mailbox().slots();
        for _ in 0..slots {
            match rx.poll() {
                Ok(Some(frame)) => {
                    delivered = true;
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
        peer.mb_expected.store(rx.expected(), Ordering::Release);
        delivered
    }

    /// Rings the channels `peer` rang (any context: softirq, the thread, the poller).
    /// True if it rang any.
    fn ring_channels(&self, peer: &Peer) -> bool {
        let mut delivered = false;
        peer.bell_rx.lock().take(|ch| {
            delivered = true;
            self.doorbells.fetch_add(1, Ordering::Relaxed);
            self.events.doorbell(ch);
        });
        delivered
    }

    /// Something was sent or taken just now (only the poller of a device without
    /// interrupts asks: see [`Attachment::busy`]).
    fn touch(&self) {
        if !self.interrupts {
            self.active_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    /// Whether the poller should poll again soon rather than a jiffy from now: this
    /// device takes no interrupts, and something went or came within `idle_ms`.
    pub(super) fn busy(&self, now: u64, idle_ms: u64) -> bool {
        !self.interrupts && now.saturating_sub(self.active_ms.load(Ordering::Relaxed)) < idle_ms
    }

    /// Sends `frame` to `peer` through the region (also to this node itself: the
    /// self-test's path).
    pub(super) fn send_frame(&self, peer: &Peer, frame: &[u8; FRAME_SIZE]) -> Result {
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
        self.touch();
        self.ring(peer);
        Ok(())
    }

    /// Rings `peer`'s `channel` through the region (also for this node itself: the
    /// self-test's path).
    pub(super) fn ring_channel(&self, peer: &Peer, channel: u32) {
        self.touch();
        if peer.bell_tx.lock().ring(channel) {
            self.ring(peer);
        }
    }
}

impl Attachment {
    /// One pass of the poller thread at `now` (ms): a liveness tick when `next_tick` is
    /// due, then whatever arrived. Nothing once the attachment is leaving.
    pub(super) fn poll(&self, now: u64, next_tick: &mut u64) {
        let _polling = self.polling.lock();
        if self.leaving.load(Ordering::Acquire) {
            return;
        }
        if now >= *next_tick {
            let late = now.saturating_sub(*next_tick);
            if *next_tick != 0 && late >= self.liveness.timeout_ms / 2 {
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
            *next_tick = now.saturating_add(TICK_MS);
        }
        self.polls.fetch_add(1, Ordering::Relaxed);
        if self.drain() {
            self.touch();
        }
    }

    /// A segment of `len` bytes from this node's heap, with its directory entry for
    /// `channel`, or `None` if the heap is full.
    pub(super) fn heap_segment(
        &self,
        channel: u32,
        len: usize,
    ) -> Result<Option<(Arc<SegMem>, DirEntry)>> {
        let pages = len.div_ceil(PAGE_SIZE).max(1);
        let Some(alloc) = self.heap.alloc(pages) else {
            return Ok(None);
        };
        let span = self
            .region
            .heap_span(self.me, alloc.page, alloc.pages)
            .ok_or(EINVAL)?;
        let entry = DirEntry {
            page: u32::try_from(alloc.page).map_err(|_| EINVAL)?,
            pages: u32::try_from(alloc.pages).map_err(|_| EINVAL)?,
            generation: self.heap.next_export_gen(channel as usize),
        };
        let owner: Arc<dyn SegOwner> = Arc::new(alloc, GFP_KERNEL)?;
        let seg = SegMem::device(&self.dev.mem, span.off, span.len, Some(owner), None)?;
        seg.zero();
        Ok(Some((seg, entry)))
    }

    /// Maps the segment `node` exported under `channel`, under the peer's lease.
    pub(super) fn map_segment(&self, node: NodeId, channel: u32) -> Result<Arc<SegMem>> {
        let peer = self.peer(node).ok_or(errno(bindings::EHOSTUNREACH))?;
        if !peer.reachable.load(Ordering::Acquire) {
            return Err(errno(bindings::EHOSTUNREACH));
        }
        let lease = peer.lease.lock().clone();
        let (span, _) = self.region.lookup(node, channel).ok_or(ENOENT)?;
        SegMem::device(&self.dev.mem, span.off, span.len, None, Some(lease))
    }

    /// Drops the link with `node` as if it had failed (the administrator's request).
    pub(super) fn drop_link(&self, node: NodeId) -> Result {
        let peer = self
            .peer(node)
            .filter(|p| p.id != self.me)
            .ok_or(errno(bindings::ENOTCONN))?;
        if !peer.reachable.load(Ordering::Acquire) {
            return Err(errno(bindings::ENOTCONN));
        }
        pr_info!(
            "ivshmem: dropping the link with node {} (administrator's request)\n",
            node
        );
        // The poller unlinks it at its next tick, as a link whose peer broke the rules.
        peer.broken.store(true, Ordering::Release);
        Ok(())
    }
}

/// An interrupt: a peer rang channels or sent frames. The channels are rung at once, in
/// softirq context, so that a doorbell wakes its socket (or a kernel user's
/// `sk_data_ready`) with no context switch in between, as a NIC's NAPI poll delivers a
/// TCP segment; frames go to the control plane, which takes mutexes, from the thread.
impl IrqHandler for Attachment {
    fn softirq(&self) -> bool {
        self.irqs.fetch_add(1, Ordering::Relaxed);
        if self.leaving.load(Ordering::Acquire) {
            return false;
        }
        let mut frames = false;
        for peer in self.peers.iter().filter(|p| self.linked(p)) {
            self.ring_channels(peer);
            frames |= peer.frame_waiting();
        }
        frames
    }

    fn handle(&self) {
        if !self.leaving.load(Ordering::Acquire) {
            self.take_all_frames();
        }
    }
}
