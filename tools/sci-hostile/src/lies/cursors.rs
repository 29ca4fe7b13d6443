//! `cursors`: impossible producer and consumer cursors in the victim's segments (the
//! cursor lines there that are the liar's to write).

use sci_proto::layout::{CREDIT_CONS_CURSOR, RX_PROD_CURSOR};

use crate::Liar;

impl Liar<'_> {
    /// A cursor value no honest peer could write, relative to the value `p` now there in
    /// a ring of `size` bytes: more than the ring ahead, more than the ring behind, or
    /// far away.
    fn bad_cursor(&mut self, p: u64, size: u64) -> (u64, &'static str) {
        let r = self.rng.below(size);
        match self.rng.below(5) {
            0 => (
                p.wrapping_add(size.wrapping_mul(2)).wrapping_add(r),
                "beyond-capacity",
            ),
            1 => (
                p.wrapping_sub(size.wrapping_mul(2)).wrapping_sub(r),
                "backwards",
            ),
            2 => (p ^ (1 << 63), "huge"),
            3 => (u64::MAX.wrapping_sub(r), "huge"),
            _ => (p.wrapping_add(1 << 40).wrapping_add(r), "huge"),
        }
    }

    /// `cursors`: in two of the victim's segments per step, the producer cursor of its
    /// receive queue or the consumer cursor of its send queue (both the liar's to
    /// write) set to an impossible value.
    ///
    /// Impossible relative to the honest value, which is not always what the line
    /// holds: a line that still holds the liar's last lie is lied about relative to
    /// the value that lie replaced. Built on its own lie, a lie can be plausible (a
    /// cursor 2 rings ahead, then that less 2 rings and a bit: a few bytes ahead of
    /// the honest one), which the victim must take as bytes the peer wrote — a changed
    /// stream, as under `random`, and no test of the victim's checks.
    pub(crate) fn cursors(&mut self) {
        let exports = self.victim_exports();
        if exports.is_empty() {
            return;
        }
        for _ in 0..2 {
            let e = exports[self.rng.index(exports.len())];
            let size = self.ring_size(&e);
            let off = if self.rng.chance(1, 2) {
                e.off + RX_PROD_CURSOR
            } else {
                self.credit_area(&e) + CREDIT_CONS_CURSOR
            };
            let found = self.load(off);
            let honest = match self.cursor_lies.get(&off) {
                Some(&(lie, honest)) if lie == found => honest,
                _ => found,
            };
            let (v, what) = self.bad_cursor(honest, size);
            self.store(off, v, what);
            self.cursor_lies.insert(off, (v, honest));
        }
    }
}
