//! A lying node: seeded garbage and structured lies written into a live af_sci region,
//! as one node (the *liar*) toward another (the *victim*).
//!
//! Every place is computed by the protocol core the kernel runs (`sci_proto::layout`),
//! so the lies land exactly on the words they name. The liar writes only what a broken
//! or malicious node can: its own area (its export directory, the heap its segments
//! come from, the doorbell blocks and mailbox slots other nodes send it through) and the
//! words it owns elsewhere (its node table entry, its doorbell block and mailbox slots in
//! the victim's area, the cursor and flag lines it writes in the victim's segments).
//!
//! Each [`Kind`] is one test. [`Liar::step`] makes one round of writes; what it writes
//! depends only on the seed, the step's time and what the region holds, so a run on the
//! same region contents writes the same words (the unit tests check it). The program
//! (`main.rs`) steps every millisecond for the duration asked.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use sci_proto::layout::{
    self, Export, Map, ADDR_PAGE_ADDRS, PAGE_ADDRS, PUBLISHED_ADDRS, RX_RING_SIZE,
};

mod lies;
mod rng;

pub use rng::Rng;

/// What kind of lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Seeded random words anywhere in the liar's area.
    Random,
    /// The cursors the liar writes in the victim's segments: beyond capacity,
    /// backwards, huge.
    Cursors,
    /// Lengths past the segment or ring: directory entries, ring sizes in the liar's
    /// receive areas, queue offers in forged frames.
    Lengths,
    /// Wrong generations: flag words, frames and receive areas first (ignorable), then
    /// the liar's node word and link word (fatal to the link).
    Generations,
    /// Forged control frames naming other connections' ids: the victim's own local
    /// connections, other segments of the liar, channels that do not exist.
    Frames,
    /// The liar's node word flipped between up, joining, down, absent and garbage.
    Nodeword,
    /// A storm of the liar's doorbell counters in the victim's area.
    Doorbells,
    /// The addresses the liar publishes in its node table entry: writes left half done,
    /// garbage, addresses no node stands behind, other nodes' addresses (the victim's
    /// own among them), sequence words that change under a reader.
    Addresses,
}

impl Kind {
    /// Every kind, in the order the pair test runs them.
    pub const ALL: [Kind; 8] = [
        Kind::Random,
        Kind::Cursors,
        Kind::Lengths,
        Kind::Generations,
        Kind::Frames,
        Kind::Nodeword,
        Kind::Doorbells,
        Kind::Addresses,
    ];

    /// The kind's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Random => "random",
            Kind::Cursors => "cursors",
            Kind::Lengths => "lengths",
            Kind::Generations => "generations",
            Kind::Frames => "frames",
            Kind::Nodeword => "nodeword",
            Kind::Doorbells => "doorbells",
            Kind::Addresses => "addresses",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Why a liar cannot start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// No node formatted the region (or with a layout this code does not know).
    NotFormatted,
    /// A node id outside the node table (or liar and victim the same).
    BadNode(u16),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFormatted => write!(f, "the region is not formatted by af_sci"),
            Error::BadNode(n) => write!(f, "node {n} is not a usable node of the region"),
        }
    }
}

/// Ring size assumed when a segment's own header says something absurd.
const DEFAULT_RING: u64 = 1 << 18;

/// A lying node over a mapped region.
pub struct Liar<'a> {
    /// The region, as words.
    words: &'a [AtomicU64],
    /// Where everything is.
    map: Map,
    /// The kind of lie.
    kind: Kind,
    /// The lying node.
    liar: u16,
    /// The node lied to.
    victim: u16,
    /// The seed (for the report).
    seed: u64,
    /// The generator.
    rng: Rng,
    /// Ports the victim listens on (for forged connect requests).
    ports: Vec<u16>,
    /// Ports of the victim's datagram sockets (for forged requests of implicit
    /// connections; see [`Liar::datagram_ports`]).
    dgram_ports: Vec<u16>,
    /// Stores made, by what they were.
    counts: BTreeMap<&'static str, u64>,
    /// Every store, when recording (the tests).
    log: Option<Vec<(usize, u64)>>,
    /// Steps made.
    steps: u64,
    /// Words to put back at the end (node word, link word): offset and value.
    saved: Vec<(usize, u64)>,
    /// The sequence number the victim expected when frames were last forged.
    forged_at: Option<u64>,
    /// When the node word is next flipped (ms).
    next_flip_ms: u64,
    /// The duration of the run (ms), for kinds that go through phases.
    duration_ms: u64,
    /// The liar's own doorbell counters (a storm counts up from what it found).
    bells: Vec<u32>,
    /// `cursors`: for each line lied to, the lie stored and the value it replaced.
    cursor_lies: BTreeMap<usize, (u64, u64)>,
    /// The victim's channels whose segments belong to connections with other nodes: not
    /// the liar's to write (see [`Liar::spare`]).
    spare: Vec<u32>,
    /// The addresses the liar published when it started (two words each), put back at
    /// the end.
    saved_addrs: Option<Vec<[u64; 2]>>,
    /// The words of the liar's address page when it started (magic, count, addresses),
    /// put back at the end.
    saved_page: Vec<(usize, u64)>,
}

impl<'a> Liar<'a> {
    /// A liar `liar` toward `victim` over the region in `words`, seeded with `seed`,
    /// lying for `duration_ms`; `ports` are the victim's listening ports for forged
    /// connect requests.
    pub fn new(
        words: &'a [AtomicU64],
        kind: Kind,
        (liar, victim): (u16, u16),
        seed: u64,
        duration_ms: u64,
        ports: &[u16],
    ) -> Result<Self, Error> {
        let map = Map::read(words).ok_or(Error::NotFormatted)?;
        for n in [liar, victim] {
            if usize::from(n) >= map.nodes() {
                return Err(Error::BadNode(n));
            }
        }
        if liar == victim {
            return Err(Error::BadNode(victim));
        }
        let mut me = Self {
            words,
            map,
            kind,
            liar,
            victim,
            seed,
            rng: Rng::new(seed),
            ports: ports.to_vec(),
            counts: BTreeMap::new(),
            log: None,
            steps: 0,
            saved: Vec::new(),
            forged_at: None,
            next_flip_ms: 0,
            duration_ms,
            bells: Vec::new(),
            cursor_lies: BTreeMap::new(),
            spare: Vec::new(),
            saved_addrs: None,
            saved_page: Vec::new(),
            dgram_ports: Vec::new(),
        };
        for off in [map.node_word(liar), map.link(liar, victim)]
            .into_iter()
            .flatten()
        {
            me.saved.push((off, me.load(off)));
        }
        me.saved_addrs = map.addresses(liar).map(|(_, first)| {
            (0..PUBLISHED_ADDRS)
                .map(|slot| {
                    let off = first + 16 * slot;
                    [me.load(off), me.load(off + 8)]
                })
                .collect()
        });
        if let Some(page) = map.address_page(liar) {
            let words = ADDR_PAGE_ADDRS / 8 + PAGE_ADDRS * 2;
            me.saved_page = (0..words)
                .map(|w| (page + w * 8, me.load(page + w * 8)))
                .collect();
        }
        Ok(me)
    }

    /// Leaves the victim's segments under `channels` alone. With more than two nodes the
    /// victim's segments are not all the liar's to write: those of its connections with
    /// a third node are that node's, and a liar that wrote them would be testing what
    /// no protocol can survive (a writer that shares no connection). The test names
    /// them from the victim's side (`sci-conn:` in its sockets' fdinfo).
    pub fn spare(&mut self, channels: &[u32]) {
        self.spare = channels.to_vec();
    }

    /// Under `frames`, half the forged connect requests ask for implicit connections of
    /// datagram sockets, to the victim's datagram sockets on `ports` (which take them
    /// with no `accept()`).
    pub fn datagram_ports(&mut self, ports: &[u16]) {
        self.dgram_ports = ports.to_vec();
    }

    /// Records every store (for tests).
    pub fn record(&mut self) {
        self.log = Some(Vec::new());
    }

    /// The stores recorded so far.
    pub fn log(&self) -> &[(usize, u64)] {
        self.log.as_deref().unwrap_or(&[])
    }

    /// Loads the word at `off` (0 outside the region or unaligned).
    fn load(&self, off: usize) -> u64 {
        if off % 8 != 0 {
            return 0;
        }
        self.words
            .get(off / 8)
            .map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Stores `v` at `off` (nothing outside the region), counted as `what`.
    fn store(&mut self, off: usize, v: u64, what: &'static str) {
        let Some(w) = self.words.get(off / 8) else {
            return;
        };
        if off % 8 != 0 {
            return;
        }
        w.store(v, Ordering::Release);
        *self.counts.entry(what).or_insert(0) += 1;
        if let Some(log) = self.log.as_mut() {
            log.push((off, v));
        }
    }

    /// The victim's exported segments of its connections to the liar (all of them with
    /// two nodes; those not spared with more), in which the liar writes the producer
    /// line and the consumer line.
    fn victim_exports(&self) -> Vec<Export> {
        self.map
            .exports(self.words, self.victim)
            .filter(|e| !self.spare.contains(&e.channel))
            .collect()
    }

    /// The liar's exported segments.
    fn liar_exports(&self) -> Vec<Export> {
        self.map.exports(self.words, self.liar).collect()
    }

    /// A segment's ring size as its receive area says (a sane default otherwise).
    fn ring_size(&self, e: &Export) -> u64 {
        let s = self.load(e.off.saturating_add(RX_RING_SIZE));
        if s.is_power_of_two() && (64..=1 << 30).contains(&s) {
            s
        } else {
            DEFAULT_RING
        }
    }

    /// The offset of a segment's credit area (after its receive area, at 0).
    fn credit_area(&self, e: &Export) -> usize {
        let rx = layout::rx_area_size(self.ring_size(e)).unwrap_or(0);
        e.off.saturating_add(rx)
    }

    /// One round of lies at time `now_ms` (since the start).
    pub fn step(&mut self, now_ms: u64) {
        self.steps += 1;
        match self.kind {
            Kind::Random => self.random(),
            Kind::Cursors => self.cursors(),
            Kind::Lengths => self.lengths(),
            Kind::Generations => self.generations(now_ms),
            Kind::Frames => self.frames(),
            Kind::Nodeword => self.nodeword(now_ms),
            Kind::Doorbells => self.doorbells(),
            Kind::Addresses => self.addresses(),
        }
    }

    /// After the last step: the liar's node word and link word, or its published
    /// addresses, as it found them.
    pub fn finish(&mut self) {
        if matches!(self.kind, Kind::Nodeword | Kind::Generations) {
            for (off, v) in self.saved.clone() {
                self.store(off, v, "restored");
            }
        }
        if self.kind == Kind::Addresses {
            if let Some(addrs) = self.saved_addrs.clone() {
                let page = self.saved_page.clone();
                self.publish_with(&addrs, "restored", |me| {
                    for (off, v) in page {
                        me.store(off, v, "restored");
                    }
                });
            }
        }
    }

    /// Stores made in all.
    pub fn writes(&self) -> u64 {
        self.counts.values().sum()
    }

    /// One greppable line: the kind, seed, nodes, steps, stores and stores by what.
    pub fn summary(&self, ms: u64) -> String {
        let counts: Vec<String> = self
            .counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        format!(
            "sci-hostile: kind={} seed={:#x} liar={} victim={} ms={} steps={} writes={} [{}]",
            self.kind.name(),
            self.seed,
            self.liar,
            self.victim,
            ms,
            self.steps,
            self.writes(),
            counts.join(" ")
        )
    }
}

#[cfg(test)]
mod tests;
