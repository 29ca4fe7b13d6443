//! The shared region: layout arithmetic, claiming and formatting (with racing threads)
//! and joining, the export directory, doorbells (with racing threads), mailboxes placed
//! in the region, and a hostile region: whatever bytes it holds, no reader ever indexes
//! outside it (the test segment panics on any out-of-bounds access) and every span it
//! hands out lies in the right node's heap.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::{claim_alone, TestSegment, XorShift};
use crate::proto::frame::{ConnId, Frame, QueueOffer, WireIp};
use crate::proto::liveness::PeerView;
use crate::proto::mailbox::MailboxError;
use crate::proto::region::{
    self, default_params, format, read_header, ClaimOutcome, Claimant, DirEntry, FormatState,
    FormatWord, HeaderState, Layout, LinkWord, NodeId, NodeState, NodeWord, Region, RegionError,
    RegionParams, HDR_FORMAT, HDR_MB_LOG2, HDR_NODES, HDR_SIZE, MAX_CHANNELS, MAX_NODES,
    NODE_ENTRY_SIZE, NODE_TABLE, PAGE_SIZE,
};
use crate::proto::ring::Span;
use crate::proto::segment::Segment;

const LOOPBACK: WireIp = WireIp::V4([127, 0, 0, 1]);

type Shared = Arc<TestSegment>;

/// A freshly formatted region of `size` bytes for `nodes` nodes.
fn formatted(size: usize, nodes: u32) -> Region<Shared> {
    let seg = TestSegment::shared(size);
    let ticket = claim_alone(&seg, 0);
    format(seg, default_params(size as u64, nodes), 0, ticket).unwrap()
}

fn params() -> impl Strategy<Value = (RegionParams, usize)> {
    (
        0u32..=(MAX_NODES + 2),
        prop_oneof![Just(64u32), Just(1024), Just(MAX_CHANNELS), 0u32..5000],
        0u32..=9,
        (1usize << 12)..(1usize << 24),
        0usize..(1 << 16),
    )
        .prop_map(|(nodes, channels, mb_log2, size, slack)| {
            (
                RegionParams {
                    size: size as u64,
                    nodes,
                    channels,
                    mb_log2,
                },
                size + slack,
            )
        })
}

/// `[a, a + alen)` and `[b, b + blen)` do not overlap.
fn disjoint(a: usize, alen: usize, b: usize, blen: usize) -> bool {
    a + alen <= b || b + blen <= a
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every place a valid layout computes lies inside the region, inside its owner's
    /// area, aligned, and apart from every other place.
    #[test]
    fn layout_places_are_disjoint_and_inside((p, map_len) in params()) {
        let Ok(l) = Layout::new(p, map_len) else { return Ok(()) };
        let size = p.size as usize;
        prop_assert!(size <= map_len);
        let nodes = l.nodes() as NodeId;
        let mb = l.mailbox().area_size();
        for n in 0..nodes {
            let entry = l.node_entry(n).unwrap();
            prop_assert!(entry >= NODE_TABLE && entry + NODE_ENTRY_SIZE <= l.area(0).unwrap());
            let area = l.area(n).unwrap();
            prop_assert_eq!(area % PAGE_SIZE, 0);
            prop_assert!(area + l.area_size() <= size);
            let heap = l.heap(n).unwrap();
            prop_assert_eq!(heap % PAGE_SIZE, 0);
            prop_assert_eq!(heap + l.heap_pages() * PAGE_SIZE, area + l.area_size());
            let mut places = vec![(area, 64usize)];
            for m in 0..nodes {
                places.push((l.mb_slots(n, m).unwrap(), mb));
                places.push((l.mb_ack(n, m).unwrap(), 64));
                let link = l.link(n, m).unwrap();
                prop_assert!(link >= entry && link + 8 <= entry + NODE_ENTRY_SIZE);
            }
            let dir0 = l.dir_entry(n, 0).unwrap();
            places.push((dir0, l.channels() * 8));
            places.push((heap, l.heap_pages() * PAGE_SIZE));
            for (i, &(a, alen)) in places.iter().enumerate() {
                prop_assert!(a >= area && a + alen <= area + l.area_size());
                prop_assert_eq!(a % 64, 0);
                for &(b, blen) in &places[i + 1..] {
                    prop_assert!(disjoint(a, alen, b, blen), "{a:#x}+{alen:#x} vs {b:#x}+{blen:#x}");
                }
            }
            prop_assert!(l.dir_entry(n, l.channels() as u32).is_none());
            if n > 0 {
                prop_assert!(disjoint(l.area(n - 1).unwrap(), l.area_size(), area, l.area_size()));
            }
        }
        prop_assert!(l.node_entry(nodes).is_none());
        prop_assert!(l.area(nodes).is_none());
    }

    /// Node words, format words, link words and directory entries survive packing;
    /// unknown node states are refused, not guessed.
    #[test]
    fn words_roundtrip(g in any::<u32>(), id in any::<u16>(), door in any::<bool>(), raw in any::<u64>()) {
        for state in [NodeState::Absent, NodeState::Joining, NodeState::Up, NodeState::Down] {
            let w = NodeWord { state, doorbell: door, doorbell_id: id, generation: g };
            prop_assert_eq!(NodeWord::unpack(w.pack()), Some(w));
        }
        if let Some(w) = NodeWord::unpack(raw) {
            prop_assert_eq!(w.pack(), raw);
        }
        let f = FormatWord { state: FormatState::Ready, node: id, ticket: g };
        prop_assert_eq!(FormatWord::unpack(f.pack()), f);
        let l = LinkWord { generation: g, seq: id.into() };
        prop_assert_eq!(LinkWord::unpack(l.pack()), l);
        if let Some(e) = DirEntry::unpack(raw) {
            prop_assert_eq!(e.pack(), Some(raw));
        }
    }

    /// A hostile region: random bytes everywhere (with a header that often parses), then
    /// every reader a node has. The test segment panics on any access outside the
    /// region; spans from the directory must lie inside the named node's heap.
    #[test]
    fn hostile_region_never_escapes(
        seed in 1u64..u64::MAX,
        nodes in 0u32..40,
        channels in prop_oneof![Just(64u32), Just(1024), 0u32..5000],
        mb_log2 in 0u32..12,
        size_delta in -70000i64..70000,
        ready in any::<bool>(),
    ) {
        let len = 256 * 1024;
        let seg = TestSegment::shared(len);
        let mut rng = XorShift(seed);
        for off in (0..len).step_by(8) {
            seg.poke(off, rng.next());
        }
        // A header that parses often enough for the readers behind it to run.
        seg.poke(0, u64::from(region::REGION_MAGIC) | (u64::from(region::REGION_VERSION) << 32));
        seg.poke(HDR_SIZE, (len as i64 + size_delta).max(0) as u64);
        seg.poke(HDR_NODES, u64::from(nodes) | (u64::from(channels) << 32));
        seg.poke(HDR_MB_LOG2, u64::from(mb_log2) | (rng.next() << 32));
        if ready {
            seg.poke(HDR_FORMAT, FormatWord { state: FormatState::Ready, node: 1, ticket: 2 }.pack());
        }
        let HeaderState::Ready(layout) = read_header(&seg) else { return Ok(()) };
        let r = Region::new(seg.clone(), layout).unwrap();
        let n = layout.nodes() as NodeId;
        for node in 0..n + 2 {
            let _ = r.node_word(node);
            let _ = r.heartbeat(node);
            for peer in 0..n + 2 {
                let _ = PeerView::read(&r, node, peer);
            }
            for c in (0..layout.channels() as u32 + 70).step_by(7) {
                if let Some((span, _)) = r.lookup(node, c) {
                    let heap = layout.heap(node).unwrap();
                    prop_assert!(span.off >= heap);
                    prop_assert!(span.off + span.len <= heap + layout.heap_pages() * PAGE_SIZE);
                }
            }
        }
        let me = (seed % u64::from(n.max(1))) as NodeId;
        // Doorbell blocks full of garbage: only real channels, each at most once.
        let words = layout.bells().words();
        for peer in 0..n {
            let mut rx = r.doorbell_rx(me, peer, vec![0u32; words]).unwrap();
            let mut rung = std::collections::BTreeSet::new();
            rx.take(|c| {
                assert!((c as usize) < layout.channels());
                assert!(rung.insert(c), "channel {c} reported twice in one look");
            });
            let mut again = 0;
            rx.take(|_| again += 1);
            prop_assert_eq!(again, 0, "an unchanged block rang again");
            let mut tx = r.doorbell_tx(me, peer, vec![0u32; words]).unwrap();
            prop_assert!(tx.ring(0));
            prop_assert!(!tx.ring(layout.channels() as u32));
        }
        // Mailboxes from every node: garbage slots are errors, never escapes, and each
        // poll does bounded work.
        for peer in 0..n {
            let mut rx = r.mailbox_rx(me, peer).unwrap();
            for _ in 0..4 {
                match rx.poll() {
                    Ok(None) | Err(MailboxError::SequenceJump) => break,
                    Ok(Some(_)) | Err(_) => {}
                }
            }
            let mut tx = r.mailbox_tx(me, peer).unwrap();
            let _ = tx.send(&Frame::close(ConnId::NONE, ConnId::NONE, crate::proto::frame::CloseReason::Abort));
        }
        r.init_area(me).unwrap();
        for peer in 0..n {
            let mut rx = r.doorbell_rx(me, peer, vec![0u32; words]).unwrap();
            let mut rung = 0;
            rx.take(|_| rung += 1);
            prop_assert_eq!(rung, 0, "an initialized area still rings");
        }
    }

    /// Exports made by a node are found by its peers exactly as made; unexported
    /// channels are not.
    #[test]
    fn directory_roundtrip(entries in proptest::collection::vec((0u32..1024, 0u32..40, 1u32..8), 1..40)) {
        let r = formatted(4 << 20, 3);
        r.init_area(1).unwrap();
        let mut model = std::collections::BTreeMap::new();
        let mut generation = 0u16;
        for (ch, page, pages) in entries {
            if pages == 7 {
                r.set_export(1, ch, None);
                model.remove(&ch);
                continue;
            }
            generation = DirEntry::next_generation(generation);
            let e = DirEntry { page, pages, generation };
            r.set_export(1, ch, Some(e));
            model.insert(ch, e);
        }
        for ch in 0..1024 {
            let found = r.lookup(1, ch);
            match model.get(&ch) {
                Some(e) if (e.page + e.pages) as usize <= r.layout().heap_pages() => {
                    let (span, g) = found.unwrap();
                    prop_assert_eq!(g, e.generation);
                    prop_assert_eq!(span, Span {
                        off: r.layout().heap(1).unwrap() + e.page as usize * PAGE_SIZE,
                        len: e.pages as usize * PAGE_SIZE,
                    });
                }
                _ => prop_assert!(found.is_none()),
            }
            prop_assert!(r.lookup(0, ch).is_none());
        }
    }
}

#[test]
fn format_then_join() {
    let r = formatted(1 << 20, 4);
    let HeaderState::Ready(l) = read_header(r.seg()) else {
        panic!("formatted region not ready");
    };
    assert_eq!(&l, r.layout());
    assert_eq!(l.params(), default_params(1 << 20, 4));
    for n in 0..4 {
        assert_eq!(r.node_word(n), Some(NodeWord::ABSENT));
    }
    // A mapping shorter than the formatter's is refused.
    let short = TestSegment::shared(1 << 19);
    assert_eq!(
        Layout::new(l.params(), short.len_for_test()),
        Err(RegionError::BadParams)
    );
}

impl TestSegment {
    fn len_for_test(&self) -> usize {
        crate::proto::segment::Segment::len(self)
    }
}

#[test]
fn format_refuses_foreign_versions_and_bad_params() {
    let r = formatted(1 << 20, 2);
    let seg = r.seg().clone();
    seg.poke(0, u64::from(region::REGION_MAGIC) | (99u64 << 32));
    assert_eq!(
        read_header(&seg),
        HeaderState::Unusable(RegionError::Version)
    );
    seg.poke(
        0,
        u64::from(region::REGION_MAGIC) | (u64::from(region::REGION_VERSION) << 32),
    );
    seg.poke(HDR_NODES, 0);
    assert_eq!(
        read_header(&seg),
        HeaderState::Unusable(RegionError::BadParams)
    );
    // Without our magic a "ready" word is foreign bytes: blank, to be formatted.
    seg.poke(0, 0);
    assert!(matches!(read_header(&seg), HeaderState::Blank(_)));
    // Too small for one heap page per node.
    let tiny = TestSegment::shared(16 * 1024);
    let ticket = claim_alone(&tiny, 0);
    assert_eq!(
        format(tiny, default_params(16 * 1024, 8), 0, ticket).err(),
        Some(RegionError::BadParams)
    );
}

/// One node's way into a region that may be blank, as the kernel's join does it: join
/// a ready region, wait on a live "formatting", claim a blank one (backing off when
/// contended) and format it if the claim wins. Returns whether this node formatted.
fn join_or_format(seg: &Shared, me: NodeId, nodes: u32, formats: &AtomicUsize) -> bool {
    let mut claimant = Claimant::new(me, u32::from(me) << 8);
    let t0 = Instant::now();
    loop {
        let now = t0.elapsed().as_millis() as u64;
        assert!(now < 20_000, "node {me} never saw the region ready");
        let seen = match read_header(seg) {
            HeaderState::Ready(_) => return false,
            HeaderState::Unusable(e) => panic!("unusable: {e:?}"),
            HeaderState::Formatting(_) => None,
            HeaderState::Blank(seen) => Some(seen),
        };
        let mut wait_us = 50;
        if let Some(seen) = seen {
            match claimant.attempt(seg, seen, now, 1000) {
                ClaimOutcome::Won(ticket) => {
                    formats.fetch_add(1, Ordering::SeqCst);
                    // Stand still a little while formatting, as a slow guest would.
                    thread::sleep(Duration::from_micros(200));
                    let r = format(seg.clone(), default_params(1 << 20, nodes), me, ticket);
                    claimant.withdraw(seg);
                    r.unwrap();
                    return true;
                }
                ClaimOutcome::Contended => wait_us = u64::from(claimant.backoff_ms()) * 20,
                ClaimOutcome::Moved => {}
            }
        }
        thread::sleep(Duration::from_micros(wait_us));
    }
}

/// Many nodes start at once on a blank region: exactly one formats, with plain loads
/// and stores only (the test segment's claim words are never read-modify-written), and
/// every node ends up seeing it ready.
#[test]
fn exactly_one_node_formats() {
    for round in 0..40u16 {
        let seg = TestSegment::shared(1 << 20);
        let formats = Arc::new(AtomicUsize::new(0));
        let go = Arc::new(Barrier::new(4));
        let formatted: Vec<bool> = (0..4u16)
            .map(|n| {
                let (seg, go, formats) = (seg.clone(), go.clone(), formats.clone());
                // Node ids spread over the claim words, differently each round.
                let me = (n * 7 + round) % MAX_NODES as u16;
                thread::spawn(move || {
                    go.wait();
                    join_or_format(&seg, me, 4, &formats)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(
            formats.load(Ordering::SeqCst),
            1,
            "round {round}: {formatted:?}"
        );
        assert!(matches!(read_header(&*seg), HeaderState::Ready(_)));
        for n in 0..MAX_NODES as NodeId {
            let off = Layout::claim_word(n).unwrap();
            assert_eq!(seg.load_u32(off), 0, "node {n}'s claim was left behind");
        }
    }
}

/// A claim word that never changes (garbage, or a node that died claiming) holds
/// others back only until it has stood still for the expiry time; a claim taken over
/// as stuck cannot be completed by the old claimant.
#[test]
fn stale_claims_expire_and_taken_over_claims_fail() {
    let seg = TestSegment::shared(1 << 20);
    seg.store_u32(Layout::claim_word(9).unwrap(), 0xdead_beef);
    let HeaderState::Blank(seen) = read_header(&seg) else {
        panic!()
    };
    let mut c = Claimant::new(2, 1);
    assert_eq!(c.attempt(&seg, seen, 100, 1000), ClaimOutcome::Contended);
    assert_eq!(seg.load_u32(Layout::claim_word(2).unwrap()), 0, "withdrawn");
    assert_eq!(c.attempt(&seg, seen, 1099, 1000), ClaimOutcome::Contended);
    let ClaimOutcome::Won(ticket) = c.attempt(&seg, seen, 1100, 1000) else {
        panic!("a claim unchanged for the expiry time still counts")
    };
    let HeaderState::Formatting(fw) = read_header(&seg) else {
        panic!()
    };
    assert_eq!((fw.node, fw.ticket), (2, ticket));
    // Node 2 stands still; node 5 finds the "formatting" stuck and takes over.
    let mut other = Claimant::new(5, 3);
    assert_eq!(
        other.attempt(&seg, fw.pack(), 0, 1000),
        ClaimOutcome::Contended
    );
    assert_eq!(
        other.attempt(&seg, fw.pack(), 999, 1000),
        ClaimOutcome::Contended
    );
    let ClaimOutcome::Won(t5) = other.attempt(&seg, fw.pack(), 1000, 1000) else {
        panic!("node 2's claim, unchanged for the expiry time, still blocks")
    };
    assert_eq!(
        format(seg.clone(), default_params(1 << 20, 4), 2, ticket).err(),
        Some(RegionError::ClaimLost)
    );
    assert!(format(seg.clone(), default_params(1 << 20, 4), 5, t5).is_ok());
    c.withdraw(&seg);
    other.withdraw(&seg);
    seg.store_u32(Layout::claim_word(9).unwrap(), 0);
    // A format word that moved between the header look and the claim: no claim.
    let HeaderState::Ready(_) = read_header(&seg) else {
        panic!()
    };
    let mut late = Claimant::new(1, 9);
    assert_eq!(late.attempt(&seg, seen, 5000, 1000), ClaimOutcome::Moved);
}

/// Senders on several threads ring channels of one receiver while it looks, each ring
/// waiting for its delivery before the next: a lost ring leaves its sender waiting
/// (caught by a deadline). Nothing is read-modify-written: a block has one writer.
#[test]
fn doorbells_are_never_lost() {
    const SENDERS: u16 = 3;
    const RINGS: usize = 5_000;
    let r = Arc::new(formatted(4 << 20, 4));
    for n in 0..4 {
        r.init_area(n).unwrap();
    }
    let words = r.layout().bells().words();
    let channels = r.layout().channels();
    // delivered[s * channels + c]: how often the receiver reported channel c of sender s.
    let delivered: Arc<Vec<AtomicU32>> = Arc::new(
        (0..usize::from(SENDERS + 1) * channels)
            .map(|_| AtomicU32::new(0))
            .collect(),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (1..=SENDERS)
        .map(|s| {
            let (r, delivered, done) = (r.clone(), delivered.clone(), done.clone());
            thread::spawn(move || {
                let mut tx = r.doorbell_tx(s, 0, vec![0u32; words]).unwrap();
                let mut rng = XorShift(u64::from(s) * 0x9e37_79b9);
                for i in 0..RINGS {
                    let c = rng.range(0, channels as u64 - 1) as usize;
                    let slot = &delivered[usize::from(s) * channels + c];
                    let before = slot.load(Ordering::SeqCst);
                    assert!(tx.ring(c as u32));
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while slot.load(Ordering::SeqCst) == before {
                        assert!(
                            Instant::now() < deadline,
                            "sender {s}: ring {i} of channel {c} was lost"
                        );
                        thread::park_timeout(Duration::from_millis(1));
                    }
                }
                assert!(!tx.ring(channels as u32));
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let waiting: Vec<_> = senders.iter().map(|h| h.thread().clone()).collect();
    let mut rxs: Vec<_> = (1..=SENDERS)
        .map(|s| r.doorbell_rx(0, s, vec![0u32; words]).unwrap())
        .collect();
    while done.load(Ordering::SeqCst) < usize::from(SENDERS) {
        for (i, rx) in rxs.iter_mut().enumerate() {
            let mut any = false;
            rx.take(|c| {
                delivered[(i + 1) * channels + c as usize].fetch_add(1, Ordering::SeqCst);
                any = true;
            });
            if any {
                waiting[i].unpark();
            }
        }
        thread::yield_now();
    }
    for s in senders {
        s.join().unwrap();
    }
}

/// A relinked sender starts counting from zero again, as the receiver, which zeroed
/// the block, expects: its first ring after the relink is seen; a late ring of the old
/// link (stored after the reset) is at worst one extra ring.
#[test]
fn doorbells_restart_on_relink() {
    let r = formatted(4 << 20, 2);
    r.init_area(0).unwrap();
    r.init_area(1).unwrap();
    let words = r.layout().bells().words();
    let mut tx = r.doorbell_tx(1, 0, vec![0u32; words]).unwrap();
    let mut rx = r.doorbell_rx(0, 1, vec![0u32; words]).unwrap();
    let take = |rx: &mut region_bells::Rx| {
        let mut v = Vec::new();
        rx.take(|c| v.push(c));
        v
    };
    for _ in 0..5 {
        tx.ring(3);
    }
    tx.ring(70);
    assert_eq!(take(&mut rx), [3, 70]);
    assert_eq!(take(&mut rx), [] as [u32; 0]);
    // Relink: the receiver resets its block and memory, the sender its counters.
    rx.reset();
    tx.ring(3); // late, from the old link
    tx.reset();
    assert_eq!(take(&mut rx), [3]);
    tx.ring(3);
    assert_eq!(take(&mut rx), [3]);
    tx.ring(1023);
    assert_eq!(take(&mut rx), [1023]);
}

/// The doorbell endpoint types of a region of test segments.
mod region_bells {
    use super::Shared;
    pub(super) type Rx = crate::proto::doorbell::DoorbellRx<Shared, Vec<u32>>;
}

/// Frames go both ways through mailboxes placed in the region; a peer that relinks
/// (mailboxes reset on both sides) starts again at the first sequence number.
#[test]
fn mailboxes_in_the_region() {
    let r = formatted(4 << 20, 3);
    for n in 0..3 {
        r.init_area(n).unwrap();
    }
    let offer = QueueOffer {
        ring_log2: 12,
        rx_area: 0,
        credit_area: 4224,
        start: 99,
    };
    for round in 0..3u32 {
        let mut tx = r.mailbox_tx(2, 0).unwrap();
        let mut rx = r.mailbox_rx(0, 2).unwrap();
        // The fabric's lock-free look at the same mailbox (its softirq stage).
        let peek = r.mailbox_peek(0, 2).unwrap();
        assert!(!peek.frame_waiting(rx.expected()));
        let slots = r.layout().mailbox().slots();
        for i in 0..slots {
            let f = Frame::connect_request(
                ConnId {
                    slot: i,
                    generation: round + 1,
                },
                (LOOPBACK, 1000),
                (LOOPBACK, 80, 0),
                offer,
            );
            tx.send(&f).unwrap();
        }
        assert_eq!(
            tx.send(&Frame::connect_request(
                ConnId::NONE,
                (LOOPBACK, 1),
                (LOOPBACK, 2, 0),
                offer
            )),
            Err(MailboxError::Full)
        );
        for i in 0..slots {
            assert!(peek.frame_waiting(rx.expected()));
            let f = rx.poll().unwrap().unwrap();
            assert_eq!(f.src.slot, i);
            assert_eq!(f.src.generation, round + 1);
        }
        assert!(!peek.frame_waiting(rx.expected()));
        assert_eq!(rx.poll(), Ok(None));
        assert_eq!(tx.refresh(), Ok(0));
        // Relink: each side resets its halves.
        r.reset_inbound(0, 2).unwrap();
        r.reset_inbound(2, 0).unwrap();
    }
    assert!(r.mailbox_peek(0, 3).is_err(), "no such node");
    // The node table entries are untouched by all of this.
    assert_eq!(r.node_word(1), Some(NodeWord::ABSENT));
    assert_eq!(r.link(0, 2), LinkWord::NONE);
}

#[test]
fn lookups_and_heap_spans_are_bounded() {
    let r = formatted(1 << 20, 2);
    let pages = r.layout().heap_pages();
    assert!(r.heap_span(0, 0, pages).is_some());
    assert!(r.heap_span(0, 1, pages).is_none());
    assert!(r.heap_span(0, 0, 0).is_none());
    assert!(r.heap_span(2, 0, 1).is_none());
    r.set_export(
        0,
        5,
        Some(DirEntry {
            page: pages as u32 - 1,
            pages: 2,
            generation: 1,
        }),
    );
    assert!(
        r.lookup(0, 5).is_none(),
        "an export past the heap is refused"
    );
    assert!(r.lookup(0, u32::MAX).is_none());
    assert_eq!(DirEntry::next_generation(u16::MAX), 1);
    assert_eq!(
        DirEntry {
            page: 1 << 24,
            pages: 1,
            generation: 1
        }
        .pack(),
        None
    );
}

/// The fabric manager's fence: only the live doorbell-model node with the departed
/// peer's id goes down, keeping its generation; a node that changed its word meanwhile,
/// a plain-model node with the same id and an unformatted region are left alone.
#[test]
fn fence_marks_only_the_departed_node_down() {
    use crate::manager::{fence_departed, Fenced, NotFenced, Words};
    use std::sync::atomic::AtomicU64;

    let size = 1 << 20;
    let mem: Vec<AtomicU64> = (0..size / 8).map(|_| AtomicU64::new(0)).collect();
    assert_eq!(
        fence_departed(&mem, 5, |_| panic!("blank")),
        Err(NotFenced::Blank)
    );

    let ticket = claim_alone(&Words(&mem), 0);
    let region = format(Words(&mem), default_params(size as u64, 4), 0, ticket).unwrap();
    let word = |state, doorbell, doorbell_id, generation| NodeWord {
        state,
        doorbell,
        doorbell_id,
        generation,
    };
    let before = [
        word(NodeState::Up, true, 5, 3),      // the departed guest
        word(NodeState::Up, true, 6, 9),      // another guest
        word(NodeState::Up, false, 5, 4),     // ivshmem-plain: its id means nothing
        word(NodeState::Joining, true, 5, 2), // died while joining
    ];
    for (n, w) in before.iter().enumerate() {
        region.set_node_word(n as NodeId, *w);
    }
    let mut seen = Vec::new();
    fence_departed(&mem, 5, |f| seen.push(f)).unwrap();
    assert_eq!(
        seen,
        [
            Fenced {
                node: 0,
                generation: 3
            },
            Fenced {
                node: 3,
                generation: 2
            }
        ]
    );
    assert_eq!(region.node_word(0), Some(word(NodeState::Down, true, 5, 3)));
    assert_eq!(region.node_word(1), Some(before[1]));
    assert_eq!(region.node_word(2), Some(before[2]));
    assert_eq!(region.node_word(3), Some(word(NodeState::Down, true, 5, 2)));
    // Once down, nothing more to do; a rejoin (a new word) is never undone.
    fence_departed(&mem, 5, |f| panic!("fenced twice: {f:?}")).unwrap();
    region.set_node_word(0, word(NodeState::Up, true, 5, 4));
    fence_departed(&mem, 7, |f| panic!("wrong id: {f:?}")).unwrap();
    assert_eq!(region.node_word(0), Some(word(NodeState::Up, true, 5, 4)));
}
