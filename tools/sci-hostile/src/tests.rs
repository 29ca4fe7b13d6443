//! The liar on an in-memory region formatted by the protocol core: the same seed makes
//! the same writes, another seed others, and every write lands on a word the liar owns.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Kind, Liar, Rng};
use sci_proto::layout::{self, Map, Node, State, FRAME_WORDS};

/// Bytes of the test region.
const SIZE: usize = 4 << 20;
/// Ring size of the test segments.
const RING: u64 = 4096;
/// The liar and the victim.
const LIAR: u16 = 1;
/// The victim.
const VICTIM: u16 = 0;

/// A region with nodes 0 and 1 up (generation 3), three segments exported by each.
fn region() -> (Vec<AtomicU64>, Map) {
    let words: Vec<AtomicU64> = (0..SIZE / 8).map(|_| AtomicU64::new(0)).collect();
    let map = layout::format_for_tests(&words, 2, &[0, 1], 3, 3, RING).unwrap();
    (words, map)
}

/// Runs `kind` for `steps` steps (1 ms apart) with `seed`, acknowledging the liar's
/// frames as the victim would (its ack word moves on after each step), and returns
/// the stores made.
fn run(kind: Kind, seed: u64, steps: u64) -> (Vec<(usize, u64)>, Map, Vec<AtomicU64>) {
    run_sparing(kind, seed, steps, &[])
}

/// [`run`], the victim's channels `spare` left alone.
fn run_sparing(
    kind: Kind,
    seed: u64,
    steps: u64,
    spare: &[u32],
) -> (Vec<(usize, u64)>, Map, Vec<AtomicU64>) {
    let (words, map) = region();
    let mb = map.mailbox(LIAR, VICTIM).unwrap();
    {
        let mut liar = Liar::new(&words, kind, (LIAR, VICTIM), seed, steps, &[7300]).unwrap();
        liar.spare(spare);
        liar.record();
        for ms in 0..steps {
            liar.step(ms);
            let ack = &words[mb.ack / 8];
            ack.store(ack.load(Ordering::Relaxed) + 8, Ordering::Relaxed);
        }
        liar.finish();
        let log = liar.log().to_vec();
        assert!(liar.summary(steps).starts_with(&format!(
            "sci-hostile: kind={} seed={seed:#x} liar=1 victim=0",
            kind.name()
        )));
        drop(liar);
        (log, map, words)
    }
}

#[test]
fn same_seed_same_writes() {
    for kind in Kind::ALL {
        let (a, _, wa) = run(kind, 0x5eed, 400);
        let (b, _, wb) = run(kind, 0x5eed, 400);
        assert!(!a.is_empty(), "{kind:?} wrote nothing");
        assert_eq!(a, b, "{kind:?}: the same seed made other writes");
        let same = wa
            .iter()
            .zip(&wb)
            .all(|(x, y)| x.load(Ordering::Relaxed) == y.load(Ordering::Relaxed));
        assert!(same, "{kind:?}: the same seed left other contents");
    }
}

#[test]
fn another_seed_other_writes() {
    for kind in Kind::ALL {
        let (a, ..) = run(kind, 1, 400);
        let (b, ..) = run(kind, 2, 400);
        assert_ne!(a, b, "{kind:?}: seeds 1 and 2 made the same writes");
    }
}

/// The byte ranges the liar owns: its area, its node entry, its doorbell block and
/// mailbox slots in the victim's area, its ack word there, and the producer and
/// consumer lines of the victim's segments.
fn owned(map: &Map, words: &[AtomicU64]) -> Vec<(usize, usize)> {
    let bells = map.bells(VICTIM, LIAR).unwrap();
    let to_victim = map.mailbox(LIAR, VICTIM).unwrap();
    let mut ranges = vec![
        map.area(LIAR).unwrap(),
        (map.node_word(LIAR).unwrap(), 0x140),
        (bells.off, bells.size),
        (to_victim.slots, 128 * to_victim.count as usize),
        (map.mailbox(VICTIM, LIAR).unwrap().ack, 8),
    ];
    for e in map.exports(words, VICTIM) {
        ranges.push((e.off + layout::RX_PROD_CURSOR, 16));
        ranges.push((e.off + layout::rx_area_size(RING).unwrap(), 16));
    }
    ranges
}

#[test]
fn writes_only_what_the_liar_owns() {
    for kind in Kind::ALL {
        let (log, map, words) = run(kind, 7, 400);
        let ranges = owned(&map, &words);
        for (off, _) in log {
            assert!(off % 8 == 0, "{kind:?}: unaligned store at {off:#x}");
            assert!(
                ranges
                    .iter()
                    .any(|&(base, n)| off >= base && off < base + n),
                "{kind:?}: store at {off:#x} is not the liar's"
            );
        }
    }
}

#[test]
fn forged_frames_are_well_formed() {
    for kind in [Kind::Frames, Kind::Lengths, Kind::Generations] {
        let (_, map, words) = run(kind, 11, 200);
        let mb = map.mailbox(LIAR, VICTIM).unwrap();
        let mut forged = 0;
        for slot in 0..mb.count as usize {
            let base = mb.slots / 8 + slot * FRAME_WORDS;
            let frame: [u64; FRAME_WORDS] =
                std::array::from_fn(|i| words[base + i].load(Ordering::Relaxed));
            if frame.iter().any(|&w| w != 0) {
                assert!(
                    layout::frame_decodes(&frame),
                    "{kind:?}: slot {slot} does not decode"
                );
                forged += 1;
            }
        }
        assert!(forged > 0, "{kind:?} forged no frame");
    }
}

#[test]
fn nodeword_and_generations_put_the_word_back() {
    for kind in [Kind::Nodeword, Kind::Generations] {
        let (_, map, words) = run(kind, 3, 400);
        let w = Node::unpack(words[map.node_word(LIAR).unwrap() / 8].load(Ordering::Relaxed));
        assert_eq!(
            w.map(|n| (n.state, n.generation)),
            Some((State::Up, 3)),
            "{kind:?}"
        );
    }
}

#[test]
fn rng_is_fixed() {
    // SplitMix64's published first outputs for seed 0: the sequence never changes
    // between builds or hosts.
    let mut r = Rng::new(0);
    assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
    assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
}

/// `cursors` lies only in ways the victim can tell: every value it stores is more than
/// a ring away (ahead or behind) from the honest value of the line, the one the region
/// held before the liar came (no honest peer moves it here), however often a line is
/// lied to again while it still holds the liar's own last lie.
#[test]
fn cursor_lies_are_impossible() {
    let (honest, ..) = region();
    let (log, ..) = run(Kind::Cursors, 0x5c1_4058, 4000);
    assert!(log.len() > 1000);
    for (off, v) in log {
        let was = honest[off / 8].load(Ordering::Relaxed);
        let ahead = v.wrapping_sub(was);
        assert!(
            ahead > RING,
            "a lie at {off:#x} is {ahead} bytes ahead of the honest cursor {was:#x}: plausible"
        );
    }
}

/// A spared channel of the victim (its connection with a third node) gets no store of
/// any kind, and the others still get theirs.
#[test]
fn spared_segments_are_left_alone() {
    let (words, map) = region();
    let exports: Vec<_> = map.exports(&words, VICTIM).collect();
    assert!(exports.len() >= 2);
    let spared = exports[0];
    for kind in Kind::ALL {
        let (log, ..) = run_sparing(kind, 7, 400, &[spared.channel]);
        for (off, _) in &log {
            assert!(
                !(spared.off..spared.off + spared.len).contains(off),
                "{kind:?}: store at {off:#x} in the spared segment"
            );
        }
        if kind == Kind::Cursors {
            let others = exports[1..].iter().any(|e| {
                log.iter()
                    .any(|(off, _)| (e.off..e.off + e.len).contains(off))
            });
            assert!(others, "cursors: no store in the segments not spared");
        }
    }
}

#[test]
fn address_lies_claim_the_victims_and_are_put_back() {
    let (words, map) = region();
    let victim = [
        layout::address_v4([10, 0, 0, 1]),
        layout::address_v4([10, 0, 0, 11]),
    ];
    let liar_addrs = [layout::address_v4([10, 0, 0, 2])];
    map.publish(&words, VICTIM, &victim);
    map.publish(&words, LIAR, &liar_addrs);
    let honest = map.published(&words, LIAR).unwrap();
    assert_eq!(honest, [Some(liar_addrs[0]), None]);
    let page = map.address_page(LIAR).unwrap();
    let page_words = || -> Vec<u64> {
        (0..layout::ADDR_PAGE_ADDRS / 8 + layout::PAGE_ADDRS * 2)
            .map(|w| words[page / 8 + w].load(Ordering::Relaxed))
            .collect()
    };
    let page_before = page_words();
    let mut liar = Liar::new(&words, Kind::Addresses, (LIAR, VICTIM), 5, 400, &[]).unwrap();
    let (mut claimed, mut torn, mut unusable_seen) = (0, 0, 0);
    for ms in 0..400 {
        liar.step(ms);
        match map.published(&words, LIAR) {
            None => torn += 1,
            Some(slots) => {
                if slots.contains(&Some(victim[0])) {
                    claimed += 1;
                }
                for a in slots.into_iter().flatten() {
                    assert!(layout::address_usable(&a), "{a:?} read as usable");
                }
                unusable_seen += usize::from(slots == [None, None]);
            }
        }
    }
    assert!(
        claimed > 0 && torn > 0 && unusable_seen > 0,
        "{claimed} {torn} {unusable_seen}"
    );
    let summary = liar.summary(400);
    for what in [
        "addr-torn",
        "addr-garbage",
        "addr-unusable",
        "addr-claim",
        "addr-sequence",
        "addr-page",
    ] {
        assert!(summary.contains(what), "{what} missing from {summary}");
    }
    assert_ne!(page_words(), page_before, "the address page was lied in");
    liar.finish();
    drop(liar);
    assert_eq!(map.published(&words, LIAR), Some(honest));
    assert_eq!(page_words(), page_before, "the address page is put back");
    assert_eq!(
        map.published(&words, VICTIM),
        Some([Some(victim[0]), Some(victim[1])])
    );
}
