// SPDX-License-Identifier: GPL-2.0

//! Direct receive: one copy for large transfers (the seed's LONG protocol, AZ-SDP's
//! zero-copy rendezvous), where both ends are in this kernel.
//!
//! On the loopback fabric the two ends of a connection share the segment object the
//! reader's ring lives in. A reader that is about to sleep in `recv` with a large buffer
//! and an empty ring *posts* its buffer here, its pages pinned ([`PinnedBuf`]); a writer
//! that finds the ring empty (every byte it wrote before was read) and a buffer posted
//! *claims* it and copies from its own buffer straight into the reader's: one copy where
//! the ring takes two. Bytes stay in order: the writer fills a buffer only when the ring
//! is empty, writes what follows into the ring, and the reader takes its buffer back
//! before it reads the ring again.
//!
//! Pinning costs the reader something even when the writer then sends 14 bytes, so a
//! reader posts only while the writer's sends are large too ([`DirectRecv::note_send`]):
//! a program that reads small messages into a large buffer keeps the ring alone.
//!
//! A segment on a device (ivshmem: the other end is another kernel, which cannot reach
//! this one's pages) has no slot; its connections always go through the ring.

use crate::sys::pinned::PinnedBuf;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::new_condvar;
use kernel::prelude::*;
use kernel::sync::{CondVar, Mutex};

/// Where a posted buffer is.
enum Slot {
    /// No reader waits with a buffer.
    Empty,
    /// A reader waits with this buffer.
    Posted(PinnedBuf),
    /// A writer is copying into the buffer (it holds it meanwhile).
    Filling,
    /// A writer filled the first `usize` bytes; the reader has not taken it back yet.
    Filled(PinnedBuf, usize),
}

/// A segment's slot for one posted receive buffer.
#[pin_data]
pub(crate) struct DirectRecv {
    #[pin]
    slot: Mutex<Slot>,
    /// Signalled when a fill ends (a reader taking its buffer back waits for that).
    #[pin]
    fill_ended: CondVar,
    /// The writer's last send was at least `direct_min` bytes long.
    large_sends: AtomicBool,
    /// Fills so far (wrapping): a fill moves no line of the ring, so the reader's
    /// doorbell learns of it here, without the slot's lock (`conn/bell.rs`).
    fills: AtomicU64,
}

impl DirectRecv {
    /// An empty slot.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            slot <- kernel::new_mutex!(Slot::Empty, "DirectRecv::slot"),
            fill_ended <- new_condvar!("DirectRecv::fill_ended"),
            large_sends: AtomicBool::new(false),
            fills: AtomicU64::new(0),
        })
    }

    /// Writer: its send is `large` (at least `direct_min` bytes) or not.
    pub(crate) fn note_send(&self, large: bool) {
        if self.large_sends.load(Ordering::Relaxed) != large {
            self.large_sends.store(large, Ordering::Relaxed);
        }
    }

    /// Reader: whether the writer's last send was large (worth posting a buffer for).
    pub(crate) fn large_sends(&self) -> bool {
        self.large_sends.load(Ordering::Relaxed)
    }

    /// Reader: posts `buf`. Gives it back when a buffer is posted already (another
    /// reader of the same socket waits with one, and keeps it).
    pub(crate) fn post(&self, buf: PinnedBuf) -> Result<(), PinnedBuf> {
        let mut slot = self.slot.lock();
        if !matches!(*slot, Slot::Empty) {
            return Err(buf);
        }
        *slot = Slot::Posted(buf);
        Ok(())
    }

    /// Writer: takes the posted buffer to fill, `None` when none is posted. The writer
    /// must hand it back with [`DirectRecv::fill_done`].
    pub(crate) fn claim(&self) -> Option<PinnedBuf> {
        let mut slot = self.slot.lock();
        match core::mem::replace(&mut *slot, Slot::Filling) {
            Slot::Posted(buf) => Some(buf),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Writer: hands back the buffer it claimed, with its first `n` bytes filled.
    pub(crate) fn fill_done(&self, buf: PinnedBuf, n: usize) {
        *self.slot.lock() = Slot::Filled(buf, n);
        self.fills.fetch_add(1, Ordering::Release);
        self.fill_ended.notify_all();
    }

    /// Doorbell: the fills so far (safe in atomic context). The writer counts a fill
    /// before it rings the reader's doorbell.
    pub(crate) fn fills(&self) -> u64 {
        self.fills.load(Ordering::Acquire)
    }

    /// Reader: whether a writer filled (or is filling) the posted buffer: its wait is
    /// over.
    pub(crate) fn taken(&self) -> bool {
        matches!(*self.slot.lock(), Slot::Filling | Slot::Filled(..))
    }

    /// Reader: takes its posted buffer back, waiting out a fill in progress (one copy
    /// of at most the buffer's size, which no signal interrupts: the writer holds the
    /// pages meanwhile). Returns the buffer and the bytes filled (0: nobody claimed it).
    pub(crate) fn take_back(&self) -> Option<(PinnedBuf, usize)> {
        let mut slot = self.slot.lock();
        while matches!(*slot, Slot::Filling) {
            self.fill_ended.wait(&mut slot);
        }
        match core::mem::replace(&mut *slot, Slot::Empty) {
            Slot::Posted(buf) => Some((buf, 0)),
            Slot::Filled(buf, n) => Some((buf, n)),
            Slot::Empty | Slot::Filling => None,
        }
    }
}
