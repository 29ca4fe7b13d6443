//! `doorbells`: a storm of the liar's doorbell counters in the victim's area.

use crate::Liar;

impl Liar<'_> {
    /// `doorbells`: every channel and group counter of the liar's doorbell block in the
    /// victim's area counted up on every step (each channel rung), and one in eight
    /// steps a random value in every counter.
    pub(crate) fn doorbells(&mut self) {
        let Some(b) = self.map.bells(self.victim, self.liar) else {
            return;
        };
        let words = b.size / 8;
        if self.bells.is_empty() {
            self.bells = (0..words * 2)
                .map(|i| {
                    let w = self.load(b.off + (i / 2) * 8);
                    (w >> (32 * (i % 2))) as u32
                })
                .collect();
        }
        let random = self.rng.chance(1, 8);
        for i in 0..words {
            let (lo, hi) = if random {
                let r = self.rng.next_u64();
                (r as u32, (r >> 32) as u32)
            } else {
                (
                    self.bells[2 * i].wrapping_add(1),
                    self.bells[2 * i + 1].wrapping_add(1),
                )
            };
            self.bells[2 * i] = lo;
            self.bells[2 * i + 1] = hi;
            let what = if random { "bells-random" } else { "bells" };
            self.store(b.off + 8 * i, u64::from(lo) | (u64::from(hi) << 32), what);
        }
    }
}
