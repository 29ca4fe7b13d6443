//! `frames`: well-formed control frames no honest node would send, and the forging that
//! `lengths` and `generations` use too (the connection ids to name, the writes into the
//! liar's mailbox to the victim).

use sci_proto::layout::{encode_frame, Export, Forged, FRAME_WORDS};

use crate::Liar;

impl Liar<'_> {
    /// A connection id on the liar: one of its real exports (another connection's
    /// segment) or a channel that does not exist.
    pub(super) fn some_liar_channel(&mut self, exports: &[Export]) -> (u32, u32) {
        let generation = 1 + self.rng.below(8) as u32;
        match self.rng.below(4) {
            0 | 1 if !exports.is_empty() => {
                (exports[self.rng.index(exports.len())].channel, generation)
            }
            0 | 1 => (self.rng.below(64) as u32, generation),
            2 => (
                self.map.channels() as u32 + self.rng.below(1000) as u32,
                generation,
            ),
            _ => (u32::MAX - 1 - self.rng.below(16) as u32, generation),
        }
    }

    /// A guess at one of the victim's connection ids: slots are handed out from 0,
    /// and a slot's generation starts at 1 and grows on every reuse, so small numbers
    /// name the victim's connections (its local ones included, and those still being
    /// set up); sometimes an id out of range.
    pub(super) fn guess_victim_conn(&mut self) -> (u32, u32) {
        match self.rng.below(8) {
            0 => (u32::MAX - 1, 1),
            1 => (4096 + self.rng.below(1 << 20) as u32, 1),
            // A slot reused many times (short connections) has a larger generation.
            2 | 3 => (self.rng.below(16) as u32, 1 + self.rng.below(512) as u32),
            _ => (self.rng.below(32) as u32, 1 + self.rng.below(6) as u32),
        }
    }

    /// Writes `frames` into the liar's mailbox to the victim, at the sequence numbers
    /// the victim expects next (from its ack word), once per advance of that word so
    /// that no forged frame is overwritten before the victim could read it.
    pub(super) fn forge(&mut self, frames: &[Forged], what: &'static str) {
        let Some(mb) = self.map.mailbox(self.liar, self.victim) else {
            return;
        };
        let expected = self.load(mb.ack) & 0xffff_ffff;
        if self.forged_at == Some(expected) {
            return;
        }
        self.forged_at = Some(expected);
        for (i, f) in frames.iter().take(mb.count as usize).enumerate() {
            let seq = (expected as u32).wrapping_add(i as u32);
            let slot = mb.slots + 128 * (seq & (mb.count - 1)) as usize;
            let words = encode_frame(f, seq);
            for (w, v) in words.iter().enumerate().take(FRAME_WORDS - 1) {
                self.store(slot + 8 * w, *v, "frame-word");
            }
            self.store(slot + 8 * (FRAME_WORDS - 1), words[FRAME_WORDS - 1], what);
        }
    }

    /// `frames`: whenever the victim took the last batch, a new batch of well-formed
    /// frames (right magic, version, checksum and sequence number) that no honest liar
    /// would send: closes and rejects naming guessed ids of the victim's connections
    /// (its connections within itself among them), accepts naming them with segments
    /// of other connections or channels that do not exist, and connect requests from
    /// such channels to the victim's listening ports.
    pub(crate) fn frames(&mut self) {
        let exports = self.liar_exports();
        let mut batch = Vec::new();
        for _ in 0..8 {
            let src = self.some_liar_channel(&exports);
            let dst = self.guess_victim_conn();
            let len = exports.first().map_or(1 << 19, |e| e.len as u64);
            let offer = (18, 0, len.saturating_sub(64), self.rng.next_u64());
            let f = match self.rng.below(4) {
                0 => Forged::Close {
                    src,
                    dst,
                    abort: self.rng.chance(1, 2),
                },
                1 => Forged::Reject {
                    src,
                    dst,
                    reason: 1 + self.rng.below(6) as u8,
                },
                2 => Forged::Accept { src, dst, offer },
                _ if !self.ports.is_empty() || !self.dgram_ports.is_empty() => {
                    let datagram = self.ports.is_empty()
                        || (!self.dgram_ports.is_empty() && self.rng.chance(1, 2));
                    let ports = if datagram {
                        &self.dgram_ports
                    } else {
                        &self.ports
                    };
                    Forged::Request {
                        src,
                        dst_ip: [10, 0, 0, 1 + self.victim as u8],
                        dst_port: ports[self.rng.index(ports.len())],
                        src_ip: [10, 0, 0, 1 + self.liar as u8],
                        offer,
                        datagram,
                    }
                }
                _ => Forged::Close {
                    src,
                    dst,
                    abort: true,
                },
            };
            batch.push(f);
        }
        let before = self.forged_at;
        self.forge(&batch, "frame");
        if self.forged_at != before {
            for f in &batch {
                let name = match f {
                    Forged::Close { .. } => "close",
                    Forged::Reject { .. } => "reject",
                    Forged::Accept { .. } => "accept",
                    Forged::Request {
                        datagram: false, ..
                    } => "request",
                    Forged::Request { .. } => "datagram-request",
                };
                *self.counts.entry(name).or_insert(0) += 1;
            }
        }
    }
}
