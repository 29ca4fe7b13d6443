//! What the host's fabric manager does to a live region: the one operation of the
//! protocol core that runs outside the guests.
//!
//! `tools/ivshmem-server` learns that a guest is gone the moment its QEMU exits (the
//! client socket closes). It then marks that guest's node down in the region
//! ([`fence_departed`]), so that the other guests reset their connections to it at their
//! next 100 ms tick instead of waiting out the heartbeat timeout. Real interconnects
//! report the same event in hardware (an NTB link-down interrupt, an SCI node's
//! link status); see Documentation/af_sci.rst, "the fabric manager".

use core::sync::atomic::{fence, AtomicU64, Ordering};

use crate::proto::region::{read_header, HeaderState, Region, SharedWords};
use crate::proto::segment::Segment;

/// A region mapped in this process, as 64-bit words (the region's byte order is the
/// host's: guests and host share the CPU's endianness).
pub(crate) struct Words<'a>(pub(crate) &'a [AtomicU64]);

impl Words<'_> {
    /// The word holding byte offset `off`, if `off` is in the region and aligned to
    /// `width`.
    fn word(&self, off: usize, width: usize) -> Option<&AtomicU64> {
        if off % width != 0 {
            return None;
        }
        self.0.get(off / 8)
    }

    /// Bit position of the 4-byte word at `off` inside its 8-byte word.
    fn shift32(off: usize) -> u32 {
        let low_half_first = cfg!(target_endian = "little");
        match (off % 8 == 0) == low_half_first {
            true => 0,
            false => 32,
        }
    }
}

impl Segment for Words<'_> {
    fn len(&self) -> usize {
        self.0.len().saturating_mul(8)
    }

    fn load_u64(&self, off: usize) -> u64 {
        self.word(off, 8).map_or(0, |w| w.load(Ordering::Acquire))
    }

    fn store_u64(&self, off: usize, v: u64) {
        if let Some(w) = self.word(off, 8) {
            w.store(v, Ordering::Release);
        }
    }

    fn load_u32(&self, off: usize) -> u32 {
        let word = self.word(off, 4).map_or(0, |w| w.load(Ordering::Acquire));
        (word >> Self::shift32(off)) as u32
    }

    fn store_u32(&self, off: usize, v: u32) {
        let Some(w) = self.word(off, 4) else {
            return;
        };
        let shift = Self::shift32(off);
        let mask = 0xffff_ffff_u64 << shift;
        let _ = w.fetch_update(Ordering::Release, Ordering::Relaxed, |old| {
            Some((old & !mask) | (u64::from(v) << shift))
        });
    }

    fn fence(&self) {
        fence(Ordering::SeqCst);
    }
}

impl SharedWords for Words<'_> {
    fn compare_exchange_u64(&self, off: usize, current: u64, new: u64) -> Result<u64, u64> {
        match self.word(off, 8) {
            Some(w) => w.compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst),
            None => Err(0),
        }
    }
}

/// A node the manager marked down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fenced {
    /// Its node id (its entry in the node table).
    pub node: u16,
    /// The generation it was up with.
    pub generation: u32,
}

/// Why nothing could be fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotFenced {
    /// No guest has formatted the region yet (nobody can have joined).
    Blank,
    /// The region holds a format this code does not know (another af_sci version).
    Unusable,
}

/// Marks down every node of the region in `words` that is up or joining with doorbell
/// id (ivshmem peer id) `doorbell_id`; calls `fenced` for each. A node that changed its
/// word meanwhile is left alone (one compare-and-exchange per word).
pub fn fence_departed(
    words: &[AtomicU64],
    doorbell_id: u16,
    mut fenced: impl FnMut(Fenced),
) -> Result<(), NotFenced> {
    let seg = Words(words);
    let layout = match read_header(&seg) {
        HeaderState::Ready(layout) => layout,
        HeaderState::Blank(_) | HeaderState::Formatting(_) => return Err(NotFenced::Blank),
        HeaderState::Unusable(_) => return Err(NotFenced::Unusable),
    };
    let region = Region::new(seg, layout).map_err(|_| NotFenced::Unusable)?;
    region.fence_departed(doorbell_id, |node, word| {
        fenced(Fenced {
            node,
            generation: word.generation,
        })
    });
    Ok(())
}
