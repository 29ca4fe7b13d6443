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
    self, encode_frame, flag_word, link_word, Export, Forged, Map, Node, State, ADDR_PAGE_ADDRS,
    ADDR_PAGE_COUNT, ADDR_PAGE_MAGIC, ADDR_PAGE_MAGIC_OFF, CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS,
    FRAME_WORDS, PAGE_ADDRS, PUBLISHED_ADDRS, RX_GENERATION, RX_PROD_CURSOR, RX_PROD_FLAGS,
    RX_RING_SIZE, RX_START,
};

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

/// Addresses no node may stand behind, as published (IPv4 as `::ffff:a.b.c.d`).
const UNUSABLE: [[u8; 16]; 9] = [
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 169, 254, 1, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 224, 0, 0, 1],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 255, 255, 255, 255],
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0; 16],
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
];

/// A small seeded generator (SplitMix64): the same seed gives the same sequence on
/// every host.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        match n {
            0 => 0,
            n => self.next_u64() % n,
        }
    }

    /// An index below `n`.
    pub fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).unwrap_or(0)
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
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

    /// `random`: 64 random words per step. A third anywhere in the liar's area, a third
    /// in its tables (doorbell blocks, mailboxes, acks, directory: what lies before its
    /// heap), a third in the first lines of the segments it exports (ring headers and
    /// cursor lines, which its peers read).
    fn random(&mut self) {
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
    fn cursors(&mut self) {
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
    fn lengths(&mut self) {
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

    /// A connection id on the liar: one of its real exports (another connection's
    /// segment) or a channel that does not exist.
    fn some_liar_channel(&mut self, exports: &[Export]) -> (u32, u32) {
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
    fn guess_victim_conn(&mut self) -> (u32, u32) {
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
    fn forge(&mut self, frames: &[Forged], what: &'static str) {
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
    fn frames(&mut self) {
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

    /// The liar's node word as it found it.
    fn own_word(&self) -> Option<(usize, Node)> {
        let (off, v) = *self.saved.first()?;
        Some((off, Node::unpack(v)?))
    }

    /// `generations`: for the first half of the run, lies a node must ignore (flag
    /// words with the abort bit but another connection's generation, closes naming
    /// real channels with newer generations, the liar's receive areas claiming other
    /// generations); then the liar's node word with another generation while up, and
    /// its link word naming another generation of the victim.
    fn generations(&mut self, now_ms: u64) {
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

    /// `nodeword`: every 20 to 200 ms the liar's node word becomes up, joining, down,
    /// absent, a new generation or a word no node writes.
    fn nodeword(&mut self, now_ms: u64) {
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

    /// `addresses`: one lie a step about the addresses the liar publishes, written as an
    /// honest node writes them (sequence odd, the words, sequence even) unless the lie is
    /// in the sequence itself:
    /// - `addr-torn`: the sequence left odd with a slot rewritten behind it (a reader
    ///   must give up, not wait for it to become even);
    /// - `addr-garbage`: random words;
    /// - `addr-unusable`: loopback, unspecified, link-local, multicast and broadcast
    ///   addresses, in both families;
    /// - `addr-claim`: what other nodes publish, the victim's own addresses first (the
    ///   victim keeps connections to its own addresses whatever a peer claims);
    /// - `addr-sequence`: the sequence alone, to a random even value, 0 ("nothing
    ///   published"), the largest even value or the largest;
    /// - `addr-page`: the address page (the first page of the liar's heap, the addresses
    ///   beyond the entry's): the magic right or not, a count within the page, past it,
    ///   or huge, and garbage, unusable and claimed addresses in it.
    fn addresses(&mut self) {
        let Some((seq, first)) = self.map.addresses(self.liar) else {
            return;
        };
        match self.rng.below(6) {
            5 => self.address_page(),
            0 => {
                let odd = layout::address_seq_open(self.load(seq));
                self.store(seq, odd, "addr-torn");
                let off = first + 16 * self.rng.index(PUBLISHED_ADDRS);
                let (lo, hi) = (self.rng.next_u64(), self.rng.next_u64());
                self.store(off, lo, "addr-torn");
                self.store(off + 8, hi, "addr-torn");
            }
            1 => {
                let addrs: Vec<[u64; 2]> = (0..PUBLISHED_ADDRS)
                    .map(|_| [self.rng.next_u64(), self.rng.next_u64()])
                    .collect();
                self.publish(&addrs, "addr-garbage");
            }
            2 => {
                let addrs: Vec<[u64; 2]> = (0..PUBLISHED_ADDRS)
                    .map(|_| layout::address_words(&UNUSABLE[self.rng.index(UNUSABLE.len())]))
                    .collect();
                self.publish(&addrs, "addr-unusable");
            }
            3 => {
                let mut claimed = self.others_addresses();
                if claimed.is_empty() {
                    return;
                }
                claimed.resize(PUBLISHED_ADDRS, claimed[0]);
                self.publish(&claimed[..PUBLISHED_ADDRS], "addr-claim");
            }
            _ => {
                let v = match self.rng.below(4) {
                    0 => self.rng.next_u64() & !1,
                    1 => 0,
                    2 => u64::MAX - 1,
                    _ => u64::MAX,
                };
                self.store(seq, v, "addr-sequence");
            }
        }
    }

    /// `addr-page`: see [`Liar::addresses`]; written under a proper sequence, so that
    /// the victim reads the lie rather than giving up on it.
    fn address_page(&mut self) {
        let (Some(page), Some(entry)) =
            (self.map.address_page(self.liar), self.saved_addrs.clone())
        else {
            return;
        };
        let magic = if self.rng.chance(3, 4) {
            ADDR_PAGE_MAGIC
        } else {
            self.rng.next_u64()
        };
        let count = match self.rng.below(4) {
            0 => PAGE_ADDRS as u64 + 1 + self.rng.below(8),
            1 => self.rng.next_u64(),
            _ => self.rng.below(PAGE_ADDRS as u64 + 1),
        };
        let claimed = self.others_addresses();
        let addrs: Vec<[u64; 2]> = (0..PAGE_ADDRS)
            .map(|_| match self.rng.below(3) {
                0 => [self.rng.next_u64(), self.rng.next_u64()],
                1 => layout::address_words(&UNUSABLE[self.rng.index(UNUSABLE.len())]),
                _ if !claimed.is_empty() => claimed[self.rng.index(claimed.len())],
                _ => [self.rng.next_u64(), self.rng.next_u64()],
            })
            .collect();
        self.publish_with(&entry, "addr-page", |me| {
            me.store(page + ADDR_PAGE_MAGIC_OFF, magic, "addr-page");
            me.store(page + ADDR_PAGE_COUNT, count, "addr-page");
            for (slot, [lo, hi]) in addrs.iter().enumerate() {
                let off = page + ADDR_PAGE_ADDRS + 16 * slot;
                me.store(off, *lo, "addr-page");
                me.store(off + 8, *hi, "addr-page");
            }
        });
    }

    /// What the other nodes publish in their node entries (two words each), the
    /// victim's first: what a liar claims.
    fn others_addresses(&self) -> Vec<[u64; 2]> {
        core::iter::once(self.victim)
            .chain((0..self.map.nodes() as u16).filter(|&n| n != self.victim))
            .filter(|&n| n != self.liar)
            .filter_map(|n| self.map.published(self.words, n))
            .flat_map(|slots| slots.into_iter().flatten())
            .map(|a| layout::address_words(&a))
            .collect()
    }

    /// Writes `addrs` (two words each) as the liar's published addresses, as an honest
    /// node does: the sequence made odd, the words, the sequence made even.
    fn publish(&mut self, addrs: &[[u64; 2]], what: &'static str) {
        self.publish_with(addrs, what, |_| {});
    }

    /// [`Liar::publish`], with `more` written under the same sequence (the address page).
    fn publish_with(
        &mut self,
        addrs: &[[u64; 2]],
        what: &'static str,
        more: impl FnOnce(&mut Self),
    ) {
        let Some((seq, first)) = self.map.addresses(self.liar) else {
            return;
        };
        let odd = layout::address_seq_open(self.load(seq));
        self.store(seq, odd, what);
        for (slot, [lo, hi]) in addrs.iter().take(PUBLISHED_ADDRS).enumerate() {
            self.store(first + 16 * slot, *lo, what);
            self.store(first + 16 * slot + 8, *hi, what);
        }
        more(self);
        self.store(seq, odd.wrapping_add(1), what);
    }

    /// `doorbells`: every channel and group counter of the liar's doorbell block in the
    /// victim's area counted up on every step (each channel rung), and one in eight
    /// steps a random value in every counter.
    fn doorbells(&mut self) {
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
