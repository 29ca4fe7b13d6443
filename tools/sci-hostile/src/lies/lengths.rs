//! `lengths`: directory entries, ring sizes and queue offers that claim more than the
//! heap, the segment or the protocol allows.

use sci_proto::layout::{self, Forged, RX_RING_SIZE};

use crate::Liar;

impl Liar<'_> {
    /// A queue offer that does not fit a segment of `len` bytes (or the protocol).
    fn bad_offer(&mut self, len: u64) -> (u8, u64, u64, u64) {
        let start = self.rng.next_u64();
        match self.rng.below(5) {
            // Ring larger than 1 GiB, or smaller than 64 bytes.
            0 => (31 + self.rng.below(225) as u8, 0, len, start),
            1 => (self.rng.below(6) as u8, 0, len, start),
            // The receive area runs past the segment.
            2 => (18, len.saturating_sub(128), 0, start),
            // The credit area past the segment, or overlapping the receive area.
            3 => (12, 0, len + 64 * self.rng.below(64), start),
            _ => (12, 0, 64, start),
        }
    }

    /// `lengths`: the liar's directory entries naming pages past its heap, its receive
    /// areas' ring sizes past the segment, and forged requests and accepts whose queue
    /// offers do not fit.
    pub(crate) fn lengths(&mut self) {
        let exports = self.liar_exports();
        let heap_pages = self.map.heap(self.liar).map_or(0, |h| h.1) as u32;
        match self.rng.below(4) {
            0 => {
                let channel = match exports.is_empty() || self.rng.chance(1, 4) {
                    true => self.rng.below(self.map.channels() as u64) as u32,
                    false => exports[self.rng.index(exports.len())].channel,
                };
                let generation = 1 + self.rng.below(0xfffe) as u16;
                let (page, pages) = match self.rng.below(3) {
                    0 => (heap_pages, 1 + self.rng.below(64) as u32),
                    1 => (self.rng.below(u64::from(heap_pages)) as u32, (1 << 24) - 1),
                    _ => (heap_pages.saturating_sub(1), 2 + self.rng.below(64) as u32),
                };
                if let Some(off) = self.map.dir_entry(self.liar, channel) {
                    self.store(
                        off,
                        layout::dir_entry_raw(page, pages, generation),
                        "dir-past-heap",
                    );
                }
            }
            1 if !exports.is_empty() => {
                let e = exports[self.rng.index(exports.len())];
                let v = match self.rng.below(3) {
                    0 => (e.len as u64).next_power_of_two() << (1 + self.rng.below(20)),
                    1 => u64::MAX - self.rng.below(1 << 20),
                    _ => 3 * 4096 + self.rng.below(4096),
                };
                self.store(e.off + RX_RING_SIZE, v, "ring-size");
            }
            _ => {
                let len = exports.first().map_or(1 << 19, |e| e.len as u64);
                let offer = self.bad_offer(len);
                let src = self.some_liar_channel(&exports);
                let f = if self.rng.chance(1, 2) && !self.ports.is_empty() {
                    Forged::Request {
                        src,
                        dst_ip: [10, 0, 0, 1 + self.victim as u8],
                        dst_port: self.ports[self.rng.index(self.ports.len())],
                        src_ip: [10, 0, 0, 1 + self.liar as u8],
                        offer,
                        datagram: false,
                    }
                } else {
                    Forged::Accept {
                        src,
                        dst: self.guess_victim_conn(),
                        offer,
                    }
                };
                self.forge(&[f], "frame-bad-offer");
            }
        }
    }
}
