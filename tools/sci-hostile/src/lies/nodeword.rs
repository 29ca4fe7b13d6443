//! `nodeword`: the liar's node word flipped between states, and that word as the liar
//! found it (which `generations` lies about too).

use sci_proto::layout::{Node, State};

use crate::Liar;

impl Liar<'_> {
    /// The liar's node word as it found it.
    pub(super) fn own_word(&self) -> Option<(usize, Node)> {
        let (off, v) = *self.saved.first()?;
        Some((off, Node::unpack(v)?))
    }

    /// `nodeword`: every 20 to 200 ms the liar's node word becomes up, joining, down,
    /// absent, a new generation or a word no node writes.
    pub(crate) fn nodeword(&mut self, now_ms: u64) {
        if now_ms < self.next_flip_ms {
            return;
        }
        self.next_flip_ms = now_ms + 20 + self.rng.below(181);
        let Some((off, w)) = self.own_word() else {
            return;
        };
        let (v, what) = match self.rng.below(6) {
            0 => (
                Node {
                    state: State::Up,
                    ..w
                }
                .pack(),
                "up",
            ),
            1 => (
                Node {
                    state: State::Joining,
                    ..w
                }
                .pack(),
                "joining",
            ),
            2 => (
                Node {
                    state: State::Down,
                    ..w
                }
                .pack(),
                "down",
            ),
            3 => (
                Node {
                    state: State::Absent,
                    ..w
                }
                .pack(),
                "absent",
            ),
            4 => (
                Node {
                    state: State::Up,
                    generation: w.generation.wrapping_add(1),
                    ..w
                }
                .pack(),
                "new-generation",
            ),
            _ => ((self.rng.next_u64() & !0xff) | 0x7f, "garbage"),
        };
        self.store(off, v, what);
    }
}
