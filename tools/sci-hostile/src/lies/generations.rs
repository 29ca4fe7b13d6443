//! `generations`: wrong generations, first where a node must ignore them (flag words,
//! frames, receive areas), then in the liar's node word and link word (fatal to the link).

use sci_proto::layout::{
    flag_word, link_word, Forged, Node, CREDIT_CONS_FLAGS, RX_GENERATION, RX_PROD_FLAGS, RX_START,
};

use crate::Liar;

impl Liar<'_> {
    /// `generations`: for the first half of the run, lies a node must ignore (flag
    /// words with the abort bit but another connection's generation, closes naming
    /// real channels with newer generations, the liar's receive areas claiming other
    /// generations); then the liar's node word with another generation while up, and
    /// its link word naming another generation of the victim.
    pub(crate) fn generations(&mut self, now_ms: u64) {
        if now_ms < self.duration_ms / 2 {
            let victim = self.victim_exports();
            if let Some(&e) = victim.get(self.rng.index(victim.len().max(1))) {
                let gen = self.load(e.off + RX_GENERATION) as u32;
                let wrong = gen.wrapping_add(1 + self.rng.below(1000) as u32) | 1;
                let (off, what) = if self.rng.chance(1, 2) {
                    (e.off + RX_PROD_FLAGS, "prod-flags")
                } else {
                    (self.credit_area(&e) + CREDIT_CONS_FLAGS, "cons-flags")
                };
                self.store(off, flag_word(wrong, 0, 0x0c), what);
            }
            let mine = self.liar_exports();
            if let Some(&e) = mine.get(self.rng.index(mine.len().max(1))) {
                let gen = self.load(e.off + RX_GENERATION);
                let wrong = gen.wrapping_add(1 + self.rng.below(7));
                self.store(e.off + RX_GENERATION, wrong, "rx-generation");
                let start = self.load(e.off + RX_START);
                self.store(e.off + RX_START, start ^ 0x40, "rx-start");
            }
            let f = Forged::Close {
                src: self.some_liar_channel(&mine),
                dst: (
                    self.rng.below(32) as u32,
                    1000 + self.rng.below(1 << 20) as u32,
                ),
                abort: true,
            };
            self.forge(&[f], "frame-newer-generation");
            return;
        }
        if let Some((off, w)) = self.own_word() {
            let lie = Node {
                generation: w
                    .generation
                    .wrapping_add(1 + self.rng.below(3) as u32)
                    .max(1),
                ..w
            };
            self.store(off, lie.pack(), "node-generation");
        }
        if let (Some(off), Some(vw)) = (
            self.map.link(self.liar, self.victim),
            self.map
                .node_word(self.victim)
                .and_then(|o| Node::unpack(self.load(o))),
        ) {
            let seq = (self.load(off) >> 32) as u32;
            let lie = link_word(
                vw.generation.wrapping_sub(1 + self.rng.below(3) as u32),
                seq,
            );
            self.store(off, lie, "link-generation");
        }
    }
}
