//! `random`: seeded random words in the liar's area, its tables and the first lines of
//! the segments it exports.

use crate::Liar;

impl Liar<'_> {
    /// `random`: 64 random words per step. A third anywhere in the liar's area, a third
    /// in its tables (doorbell blocks, mailboxes, acks, directory: what lies before its
    /// heap), a third in the first lines of the segments it exports (ring headers and
    /// cursor lines, which its peers read).
    pub(crate) fn random(&mut self) {
        let Some((area, len)) = self.map.area(self.liar) else {
            return;
        };
        let heap = self.map.heap(self.liar).map_or(area, |h| h.0);
        let tables = heap.saturating_sub(area).max(8);
        let exports = self.liar_exports();
        for _ in 0..64 {
            let v = self.rng.next_u64();
            match self.rng.below(3) {
                0 => {
                    let off = area + self.rng.index(len / 8) * 8;
                    self.store(off, v, "area");
                }
                1 => {
                    let off = area + self.rng.index(tables / 8) * 8;
                    self.store(off, v, "tables");
                }
                _ => {
                    if exports.is_empty() {
                        let off = area + self.rng.index(len / 8) * 8;
                        self.store(off, v, "area");
                    } else {
                        let e = exports[self.rng.index(exports.len())];
                        let off = e.off + self.rng.index(32) * 8;
                        self.store(off, v, "segment-lines");
                    }
                }
            }
        }
    }
}
