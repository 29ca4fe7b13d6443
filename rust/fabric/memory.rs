// SPDX-License-Identifier: GPL-2.0

//! The bytes of a fabric segment, local or mapped from a peer.
//!
//! A thin wrapper: the only raw memory access of the data path. Words go through
//! [`Segment`] (Acquire loads, Release stores, the protocol core's contract; no
//! read-modify-write: no word of shared memory has two writers); payload bytes are copied
//! between a caller's `iov_iter` and a [`Span`] of the segment, one copy each way,
//! straight into or out of the peer's ring.
//!
//! A segment is either kernel memory (the loopback fabric) or a piece of a device
//! mapping ([`DeviceMem`]: the ivshmem BAR), which the segment keeps mapped. A mapping
//! of a *peer's* segment carries the peer's [`Lease`]: when the fabric declares the peer
//! down it revokes the lease, and from then on stores through the mapping are dropped
//! and loads read 0, as posted writes to a dead node vanish on a real interconnect.
//! So the memory of a peer that restarted can be handed to new segments without stale
//! stores from this node landing in them.
//!
//! A device can also go away under its segments (the ivshmem device hot-unplugged): the
//! fabric first *rehomes* the segments whose bytes are still needed ([`SegMem::rehome`]:
//! copied into kernel memory, which every later access uses), then *retires* the mapping
//! ([`DeviceMem::retire`]): every segment still on it behaves as one of a revoked lease,
//! so nothing reads or writes the bus addresses once the device is gone.

use super::direct::DirectRecv;
use super::seg_pool::{PooledBuf, SegPool};
use crate::proto::ring::Span;
use crate::proto::segment::Segment;
use crate::sys::bindings;
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

/// What a segment keeps alive and drops with it (for a segment of this node's heap: the
/// allocation that returns its pages).
pub(crate) trait SegOwner: Send + Sync {
    /// No peer will store into the segment any more (none ever had it, or the peer said
    /// it is done with it), so its memory needs no grace period before reuse.
    fn peer_done(&self) {}
}

/// The right to access a peer's memory; revoked when the peer is declared down.
pub(crate) struct Lease {
    revoked: AtomicBool,
}

impl Lease {
    /// A valid lease.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                revoked: AtomicBool::new(false),
            },
            GFP_KERNEL,
        )?)
    }

    /// Revokes it: every later access through a mapping holding it does nothing.
    pub(crate) fn revoke(&self) {
        self.revoked.store(true, Ordering::Release);
    }

    fn revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }
}

/// Device memory mapped into the kernel (`memremap`), unmapped when the last user goes.
pub(crate) struct DeviceMem {
    ptr: NonNull<u8>,
    len: usize,
    /// The device is gone ([`DeviceMem::retire`]): no segment on it touches it any more.
    retired: AtomicBool,
    /// The memory has `struct page`s ([`DeviceMem::set_has_pages`]).
    has_pages: AtomicBool,
}

// SAFETY: plain shared memory, valid from any thread while this lives.
unsafe impl Send for DeviceMem {}
// SAFETY: as above; all access goes through `SegMem`'s bounds-checked accessors.
unsafe impl Sync for DeviceMem {}

impl DeviceMem {
    /// Maps `len` bytes at physical address `phys` write-back cached, like RAM
    /// (`memremap(MEMREMAP_WB)`).
    ///
    /// Why write-back and not `ioremap_wc`: ivshmem's BAR *is* host RAM shared between
    /// the QEMU processes, coherent between guests, so the ordinary cached mapping gives
    /// what the protocol core assumes of a segment (single-copy atomic aligned words
    /// with Acquire/Release, `memcpy` for payload) at RAM speed. A write-combining
    /// mapping would make every load an uncached read. A real non-coherent NTB window
    /// would need WC plus explicit flushes in `Segment::fence` instead.
    pub(crate) fn map_wb(phys: u64, len: usize) -> Result<Arc<Self>> {
        if len == 0 || len % 4096 != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `memremap` validates the range itself and returns NULL on failure.
        let p = unsafe { bindings::memremap(phys, len, bindings::MEMREMAP_WB.into()) };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(ENOMEM)?;
        let mem = Self {
            ptr,
            len,
            retired: AtomicBool::new(false),
            has_pages: AtomicBool::new(false),
        };
        match Arc::new(mem, GFP_KERNEL) {
            Ok(mem) => Ok(mem),
            Err(e) => {
                // SAFETY: mapped just above, not used by anyone.
                unsafe { bindings::memunmap(p) };
                Err(e.into())
            }
        }
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The device is going away: from now on every segment on this mapping that was not
    /// rehomed reads 0 and drops its stores, as through a revoked lease (the mapping
    /// itself stays until its last user goes, never touched again).
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    fn retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// The device memory has `struct page`s (`ZONE_DEVICE`) until the device is removed,
    /// whose removal waits for every buffer lent from it: its bytes may be handed to a
    /// kernel reader in place ([`SegMem::lendable`]).
    pub(crate) fn set_has_pages(&self) {
        self.has_pages.store(true, Ordering::Release);
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        // SAFETY: mapped by `map_wb`; no segment refers to it any more (they hold `Arc`s).
        unsafe { bindings::memunmap(self.ptr.as_ptr().cast::<c_void>()) };
    }
}

/// What keeps a segment's memory valid.
enum Backing {
    /// Kernel memory this segment owns.
    Kernel { _buf: VVec<u64> },
    /// Kernel memory from a pool (the loopback fabric's), back to it when the segment
    /// goes, the chunks it was written in zeroed (`seg_pool.rs`).
    Pooled { buf: PooledBuf },
    /// A piece of a device mapping, kept mapped; `owner` goes with the segment.
    Device {
        map: Arc<DeviceMem>,
        owner: Option<Arc<dyn SegOwner>>,
    },
}

/// A segment's memory: `len` bytes at `ptr`, 8-byte aligned, valid while this lives.
///
/// `ptr` points into the backing, or, once the segment was rehomed, into `rehomed`; both
/// stay valid until the segment is dropped (a rehomed buffer is never replaced).
#[pin_data]
pub(crate) struct SegMem {
    ptr: AtomicPtr<u8>,
    len: usize,
    backing: Backing,
    /// For a mapping of a peer's segment: the peer's lease.
    lease: Option<Arc<Lease>>,
    /// The kernel copy a device segment was moved into ([`SegMem::rehome`]).
    #[pin]
    rehomed: Mutex<Option<VVec<u64>>>,
    /// `ptr` points into `rehomed`.
    is_rehomed: AtomicBool,
    /// A reader's buffer posted for a writer in this kernel (kernel memory only).
    #[pin]
    direct: DirectRecv,
}

impl SegMem {
    fn new(
        ptr: NonNull<u8>,
        len: usize,
        backing: Backing,
        lease: Option<Arc<Lease>>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                ptr: AtomicPtr::new(ptr.as_ptr()),
                len,
                backing,
                lease,
                rehomed <- kernel::new_mutex!(None, "SegMem::rehomed"),
                is_rehomed: AtomicBool::new(false),
                direct <- DirectRecv::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Allocates `len` zeroed bytes (rounded up to whole words) in kernel memory.
    ///
    /// Virtually contiguous (`vmalloc`), whole pages: a segment is a ring of a power of
    /// two plus a header page, and `kmalloc` (which `kvmalloc` tries first) would round
    /// 260 KiB up to a 512 KiB block, doubling what every connection end on this machine
    /// holds (`make bench` reports memory per connection).
    pub(crate) fn alloc(len: usize) -> Result<Arc<Self>> {
        let words = len.div_ceil(8);
        let mut buf = VVec::<u64>::from_elem(0, words, GFP_KERNEL)?;
        let ptr = NonNull::new(buf.as_mut_ptr().cast::<u8>()).ok_or(ENOMEM)?;
        Self::new(ptr, words * 8, Backing::Kernel { _buf: buf }, None)
    }

    /// As [`SegMem::alloc`], from `pool`: a buffer a segment of the same size gave back,
    /// if one is kept.
    pub(crate) fn alloc_pooled(len: usize, pool: &Arc<SegPool>) -> Result<Arc<Self>> {
        let mut buf = pool.take(len.div_ceil(8))?;
        let (ptr, bytes) = buf.memory().ok_or(ENOMEM)?;
        Self::new(ptr, bytes, Backing::Pooled { buf }, None)
    }

    /// Where the segment's memory starts (the self-test of the pool compares it).
    pub(super) fn first_byte(&self) -> *const u8 {
        self.base().cast_const()
    }

    /// Records that the `len` bytes at offset `off` may have been written, for a pooled
    /// segment's zeroing when it goes.
    fn wrote(&self, off: usize, len: usize) {
        if let Backing::Pooled { buf } = &self.backing {
            buf.wrote(off, len);
        }
    }

    /// The `len` bytes at offset `off` of the device mapping `map` (8-aligned), keeping
    /// the mapping and `owner` alive; `lease`, if given, guards every access.
    pub(crate) fn device(
        map: &Arc<DeviceMem>,
        off: usize,
        len: usize,
        owner: Option<Arc<dyn SegOwner>>,
        lease: Option<Arc<Lease>>,
    ) -> Result<Arc<Self>> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if end > map.len || off % 8 != 0 {
            return Err(EINVAL);
        }
        // SAFETY: `off + len <= map.len`, inside the mapping.
        let p = unsafe { map.ptr.as_ptr().add(off) };
        let backing = Backing::Device {
            map: map.clone(),
            owner,
        };
        Self::new(NonNull::new(p).ok_or(EINVAL)?, len, backing, lease)
    }

    /// Moves a device segment's bytes into kernel memory, which every later access uses:
    /// its device is going away and what the segment holds is still needed (a
    /// connection's ring, read after the move onto TCP). The caller makes sure nobody
    /// stores into it meanwhile (the peer let go of it, and the owner holds its lock).
    /// Kernel memory and a segment already rehomed stay as they are; `ENOMEM` leaves
    /// the segment on the device.
    pub(crate) fn rehome(&self) -> Result {
        if !matches!(self.backing, Backing::Device { .. })
            || self.is_rehomed.load(Ordering::Acquire)
        {
            return Ok(());
        }
        let mut buf = VVec::<u64>::from_elem(0, self.len.div_ceil(8), GFP_KERNEL)?;
        let to = buf.as_mut_ptr().cast::<u8>();
        let mut slot = self.rehomed.lock();
        if slot.is_some() {
            return Ok(());
        }
        if self.live() {
            let from = self.ptr.load(Ordering::Acquire);
            // SAFETY: `from` is valid for `len` bytes (the device mapping, live); `to`
            // for at least as many (whole words); they do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(from.cast_const(), to, self.len) };
        }
        // The buffer's heap memory does not move when the vector moves into the slot.
        *slot = Some(buf);
        self.ptr.store(to, Ordering::Release);
        self.is_rehomed.store(true, Ordering::Release);
        Ok(())
    }

    /// The slot where this segment's reader may post its buffer for the writer to fill
    /// directly (`fabric/direct.rs`): only for kernel memory, which both ends of a
    /// connection share in this kernel (the loopback fabric).
    pub(crate) fn direct(&self) -> Option<&DirectRecv> {
        match self.backing {
            Backing::Kernel { .. } | Backing::Pooled { .. } => Some(&self.direct),
            Backing::Device { .. } => None,
        }
    }

    /// Tells the owner that no peer will store into this segment any more (the
    /// connection it was made for was rejected, or its peer closed), so its memory may
    /// be reused as soon as it is dropped.
    pub(crate) fn peer_done(&self) {
        if let Backing::Device {
            owner: Some(owner), ..
        } = &self.backing
        {
            owner.peer_done();
        }
    }

    /// Whether accesses still reach the memory: the peer's lease, if any, holds, and the
    /// device is still there (or the segment was rehomed off it).
    fn live(&self) -> bool {
        !self.revoked() && !self.retired()
    }

    /// Whether the segment is on a device that went away.
    fn retired(&self) -> bool {
        match &self.backing {
            Backing::Device { map, .. } => {
                map.retired() && !self.is_rehomed.load(Ordering::Acquire)
            }
            Backing::Kernel { .. } | Backing::Pooled { .. } => false,
        }
    }

    /// The memory every access goes to (see the type's doc).
    fn base(&self) -> *mut u8 {
        self.ptr.load(Ordering::Acquire)
    }

    /// Whether this is a mapping of a peer that the fabric declared down.
    pub(crate) fn revoked(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| l.revoked())
    }

    /// Zeroes the whole segment (a new segment of device memory, before it is exported).
    pub(crate) fn zero(&self) {
        if self.live() {
            // SAFETY: `len` bytes at `ptr` are ours while this lives; nobody else knows of
            // a segment before it is exported.
            unsafe { core::ptr::write_bytes(self.base(), 0, self.len) };
        }
    }

    fn word_ptr(&self, off: usize, width: usize) -> Option<*mut u8> {
        let end = off.checked_add(width)?;
        if end > self.len || off % width != 0 || !self.live() {
            return None;
        }
        // SAFETY: `off + width <= len`, inside the allocation.
        Some(unsafe { self.base().add(off) })
    }

    fn span_ptr(&self, span: Span) -> Option<*mut u8> {
        let end = span.off.checked_add(span.len)?;
        if end > self.len || !self.live() {
            return None;
        }
        // SAFETY: `off + len <= len`, inside the allocation.
        Some(unsafe { self.base().add(span.off) })
    }

    /// Copies up to `span.len` bytes from `iter` into the segment; returns the count
    /// copied (short on a fault in user memory). An out-of-segment span copies nothing.
    /// Through a revoked lease the bytes are consumed from `iter` and dropped, as posted
    /// writes to a dead node are: the caller sees the connection reset, not a fault.
    pub(crate) fn copy_from_iter(&self, span: Span, iter: *mut bindings::iov_iter) -> usize {
        if !self.live()
            && span
                .off
                .checked_add(span.len)
                .is_some_and(|e| e <= self.len)
        {
            // SAFETY: `iter` is the caller's live iterator; `iov_iter_advance` clamps to
            // what it holds (callers cut spans to the iterator's length).
            unsafe { bindings::iov_iter_advance(iter, span.len) };
            return span.len;
        }
        match self.span_ptr(span) {
            Some(p) => {
                self.wrote(span.off, span.len);
                // SAFETY: the span lies inside the segment; `iter` is the caller's live
                // iterator; a peer may write the same bytes concurrently, which only
                // garbles data it owns.
                unsafe { bindings::_copy_from_iter(p.cast(), span.len, iter) }
            }
            None => 0,
        }
    }

    /// Where `span`'s bytes are, if they may be handed to a kernel reader in place (the
    /// pages of its socket buffer: `ReadActor::lend`): kernel memory this segment owns,
    /// or device memory with `struct page`s that is still there (not retired, not moved
    /// into kernel memory). Other device memory has no pages to lend; its bytes are copied.
    /// A pooled segment whose bytes were lent is not reused: the reader may keep its
    /// pages after the segment goes.
    pub(crate) fn lendable(&self, span: Span) -> Option<NonNull<u8>> {
        let lends = match &self.backing {
            Backing::Kernel { .. } => true,
            Backing::Pooled { buf } => {
                buf.lent();
                true
            }
            Backing::Device { map, .. } => {
                map.has_pages.load(Ordering::Acquire)
                    && !map.retired()
                    && !self.is_rehomed.load(Ordering::Acquire)
            }
        };
        if !lends {
            return None;
        }
        NonNull::new(self.span_ptr(span)?)
    }

    /// Copies up to `span.len` bytes of the segment into `iter`; returns the count.
    pub(crate) fn copy_to_iter(&self, span: Span, iter: *mut bindings::iov_iter) -> usize {
        match self.span_ptr(span) {
            // SAFETY: as in `copy_from_iter`.
            Some(p) => unsafe { bindings::_copy_to_iter(p.cast_const().cast(), span.len, iter) },
            None => 0,
        }
    }
}

/// Runs `f` with an `iov_iter` over the kernel buffer `buf` (`dest`: data is copied into
/// `buf`), as a kernel user of a socket builds one.
pub(crate) fn with_kvec_iter<R>(
    buf: &mut [u8],
    dest: bool,
    f: impl FnOnce(*mut bindings::iov_iter) -> R,
) -> R {
    let kvec = bindings::kvec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut iter = core::mem::MaybeUninit::<bindings::iov_iter>::zeroed();
    let direction = if dest {
        bindings::ITER_DEST
    } else {
        bindings::ITER_SOURCE
    };
    // SAFETY: `iov_iter_kvec` initialises `iter` over `kvec`, which points at `buf`; both
    // outlive every use of the iterator inside `f`.
    unsafe { bindings::iov_iter_kvec(iter.as_mut_ptr(), direction, &kvec, 1, buf.len()) };
    f(iter.as_mut_ptr())
}

/// The data iterator of a message handed to `sendmsg`/`recvmsg`.
pub(crate) fn msg_iter(msg: *mut bindings::msghdr) -> *mut bindings::iov_iter {
    // SAFETY: the socket layer passes a live message; this only takes a field's address.
    unsafe { core::ptr::addr_of_mut!((*msg).msg_iter) }
}

/// Consumes `len` bytes of `msg`'s data without copying them (a datagram dropped at a
/// full ring, which the next one follows in the same message).
pub(crate) fn skip_msg_bytes(msg: *mut bindings::msghdr, len: usize) {
    // SAFETY: the socket layer passes a live message; `iov_iter_advance` clamps to what
    // its iterator holds.
    unsafe { bindings::iov_iter_advance(msg_iter(msg), len) }
}

/// The flags of a message handed to `sendmsg` (`MSG_DONTWAIT`, `MSG_NOSIGNAL`, ...).
pub(crate) fn msg_flags(msg: *mut bindings::msghdr) -> core::ffi::c_uint {
    // SAFETY: the socket layer passes a live message.
    unsafe { (*msg).msg_flags }
}

impl Segment for SegMem {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u64(&self, off: usize) -> u64 {
        match self.word_ptr(off, 8) {
            // SAFETY: in bounds and 8-aligned (the base is word-aligned); accessed
            // atomically here (a record header copied in plainly is read after its cursor).
            Some(p) => unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire),
            None => 0,
        }
    }

    fn store_u64(&self, off: usize, v: u64) {
        if let Some(p) = self.word_ptr(off, 8) {
            self.wrote(off, 8);
            // SAFETY: as in `load_u64`.
            unsafe { AtomicU64::from_ptr(p.cast()) }.store(v, Ordering::Release);
        }
    }

    fn load_u32(&self, off: usize) -> u32 {
        match self.word_ptr(off, 4) {
            // SAFETY: in bounds and 4-aligned; accessed atomically only.
            Some(p) => unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire),
            None => 0,
        }
    }

    fn store_u32(&self, off: usize, v: u32) {
        if let Some(p) = self.word_ptr(off, 4) {
            self.wrote(off, 4);
            // SAFETY: as in `load_u32`.
            unsafe { AtomicU32::from_ptr(p.cast()) }.store(v, Ordering::Release);
        }
    }

    fn fence(&self) {
        fence(Ordering::SeqCst);
    }
}
