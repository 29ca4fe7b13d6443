//! The addresses a node publishes in its node table entry and address page: they
//! round-trip, a reader racing the writer never takes a mix of two publications, and
//! whatever a peer writes there yields only usable addresses (or nothing).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{claim_alone, TestSegment, XorShift};
use crate::proto::region::{
    default_params, format, v4_mapped, NodeId, PublishedAddr, Region, ADDR_PAGE, ADDR_PAGE_ADDRS,
    ADDR_PAGE_COUNT, ADDR_PAGE_MAGIC, ADDR_PAGE_MAGIC_OFF, MAX_PUBLISHED, NODE_ADDRS,
    NODE_ADDR_SEQ, NODE_ENTRY_SIZE, NODE_TABLE, PAGE_ADDRS, PUBLISHED_ADDRS,
};
use crate::proto::segment::Segment;

type Shared = Arc<TestSegment>;

const SIZE: usize = 4 << 20;

fn formatted() -> Region<Shared> {
    let seg = TestSegment::shared(SIZE);
    let ticket = claim_alone(&seg, 0);
    format(seg, default_params(SIZE as u64, 4), 0, ticket).unwrap()
}

fn v6(s: &str) -> PublishedAddr {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

fn v4(a: [u8; 4]) -> PublishedAddr {
    v4_mapped(a)
}

fn entry_words(r: &Region<Shared>, node: NodeId) -> Vec<u64> {
    let base = NODE_TABLE + usize::from(node) * NODE_ENTRY_SIZE;
    (0..NODE_ENTRY_SIZE / 8)
        .map(|i| r.seg().load_u64(base + i * 8))
        .collect()
}

#[test]
fn nothing_published_reads_as_none() {
    let r = formatted();
    for n in 0..4 {
        assert_eq!(r.published_addresses(n), None);
    }
    assert_eq!(r.published_addresses(4), None, "outside the table");
}

#[test]
fn addresses_round_trip() {
    let r = formatted();
    let a = v4([10, 0, 0, 2]);
    let b = v6("fd00::2");
    r.publish_addresses(1, &[a, b]);
    assert_eq!(r.published_addresses(1), Some([Some(a), Some(b)]));
    assert_eq!(
        r.published_addresses(0),
        None,
        "another node's entry is untouched"
    );
    // Rewritten: the new ones; unusable ones are skipped, the third is dropped.
    let c = v4([10, 0, 0, 3]);
    r.publish_addresses(1, &[v4([127, 0, 0, 1]), c, v6("fe80::1"), a, b]);
    assert_eq!(r.published_addresses(1), Some([Some(c), Some(a)]));
    r.publish_addresses(1, &[b]);
    assert_eq!(r.published_addresses(1), Some([Some(b), None]));
    // Withdrawn: published, but empty.
    r.publish_addresses(1, &[]);
    assert_eq!(r.published_addresses(1), Some([None, None]));
}

#[test]
fn publishing_touches_only_its_own_words() {
    let r = formatted();
    let before: Vec<Vec<u64>> = (0..4).map(|n| entry_words(&r, n)).collect();
    r.publish_addresses(2, &[v4([10, 0, 0, 3]), v6("fd00::3")]);
    for n in 0..4u16 {
        let after = entry_words(&r, n);
        for (i, (x, y)) in before[usize::from(n)].iter().zip(&after).enumerate() {
            let off = i * 8;
            let mine = n == 2 && (NODE_ADDR_SEQ..NODE_ADDRS + 32).contains(&off);
            assert!(mine || x == y, "node {n} word {off:#x} changed");
        }
    }
}

#[test]
fn a_publication_in_progress_is_not_read() {
    let r = formatted();
    r.publish_addresses(1, &[v4([10, 0, 0, 2])]);
    let seq_off = NODE_TABLE + NODE_ENTRY_SIZE + NODE_ADDR_SEQ;
    let seq = r.seg().load_u64(seq_off);
    assert!(seq != 0 && seq % 2 == 0);
    r.seg().store_u64(seq_off, seq + 1);
    assert_eq!(r.published_addresses(1), None, "odd: being rewritten");
    // A writer that died mid-way: the next publication still completes.
    r.publish_addresses(1, &[v4([10, 0, 0, 9])]);
    assert_eq!(
        r.published_addresses(1),
        Some([Some(v4([10, 0, 0, 9])), None])
    );
    assert_eq!(r.seg().load_u64(seq_off) % 2, 0);
}

/// Node 1 publishes the two `sets` in turn while this thread reads with `read` (`None`:
/// busy), until each set was read whole 100 times; `read`'s result must always be one of
/// the sets whole ([`Some`] of its index) or busy. After each publication the writer waits
/// for the reader's next attempt to end, so that it races the reader without starving it
/// (on a loaded host a writer that never pauses can keep every read busy); the deadline
/// only turns a hang into a failure.
fn race_reader(
    r: &Region<Shared>,
    sets: [Vec<PublishedAddr>; 2],
    mut read: impl FnMut(&Region<Shared>, &[Vec<PublishedAddr>; 2]) -> Option<usize>,
) {
    r.publish_addresses(1, &sets[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (r, stop, reads, sets) = (r.clone(), stop.clone(), reads.clone(), sets.clone());
        thread::spawn(move || {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let before = reads.load(Ordering::Acquire);
                i += 1;
                r.publish_addresses(1, &sets[i % 2]);
                while reads.load(Ordering::Acquire) == before && !stop.load(Ordering::Relaxed) {
                    thread::yield_now();
                }
            }
            i
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut seen, mut busy) = ([0usize; 2], 0usize);
    while (seen[0] < 100 || seen[1] < 100) && Instant::now() < deadline {
        match read(r, &sets) {
            Some(which) => seen[which] += 1,
            None => busy += 1,
        }
        reads.fetch_add(1, Ordering::Release);
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(
        writes > 0 && seen[0] >= 100 && seen[1] >= 100,
        "{seen:?} {busy} {writes}"
    );
}

#[test]
fn a_racing_reader_never_takes_a_torn_publication() {
    let sets = [
        vec![v4([10, 0, 0, 2]), v4([10, 0, 0, 3])],
        vec![v6("fd00::1:2"), v6("fd00::1:3")],
    ];
    race_reader(&formatted(), sets, |r, sets| {
        let got = r.published_addresses(1)?;
        let which = sets
            .iter()
            .position(|s| got == [Some(s[0]), Some(s[1])])
            .unwrap_or_else(|| panic!("torn read: {got:?}"));
        Some(which)
    });
}

#[test]
fn whatever_a_peer_writes_yields_only_usable_addresses() {
    let r = formatted();
    let base = NODE_TABLE + NODE_ENTRY_SIZE + NODE_ADDR_SEQ;
    let mut rng = XorShift(0x5eed_add5);
    let mut accepted = 0;
    for round in 0..20_000 {
        for w in 0..5 {
            r.seg().store_u64(base + w * 8, rng.next());
        }
        if round % 2 == 0 {
            // Even, so that the addresses themselves are what is judged.
            r.seg().store_u64(base, rng.next() & !1 | 2);
        }
        if let Some(addrs) = r.published_addresses(1) {
            accepted += 1;
            for a in addrs.into_iter().flatten() {
                assert!(crate::proto::region::usable(&a), "{a:?}");
            }
        }
    }
    assert!(accepted > 0);
    // What names no node, or every node, is never taken from a peer.
    let slot = |a: PublishedAddr| {
        r.publish_addresses(1, &[]);
        let off = base + (NODE_ADDRS - NODE_ADDR_SEQ);
        r.seg()
            .store_u64(off, u64::from_le_bytes(a[..8].try_into().unwrap()));
        r.seg()
            .store_u64(off + 8, u64::from_le_bytes(a[8..].try_into().unwrap()));
        r.published_addresses(1).unwrap()[0]
    };
    for bad in [
        v4([127, 0, 0, 1]),
        v4([0, 0, 0, 0]),
        v4([224, 0, 0, 1]),
        v4([255, 255, 255, 255]),
        v4([169, 254, 1, 1]),
        v6("::"),
        v6("::1"),
        v6("ff02::1"),
        v6("fe80::1"),
    ] {
        assert_eq!(slot(bad), None, "{bad:?}");
    }
    assert_eq!(slot(v4([10, 0, 0, 2])), Some(v4([10, 0, 0, 2])));
    assert_eq!(slot(v6("2001:db8::1")), Some(v6("2001:db8::1")));
}

/// `n` distinct usable addresses, IPv4 and IPv6 mixed.
fn many(n: usize, salt: u8) -> Vec<PublishedAddr> {
    (0..n)
        .map(|i| {
            let i = u8::try_from(i).unwrap();
            if i % 2 == 0 {
                v4([10, salt, 0, i + 1])
            } else {
                v6(&format!("fd00::{salt:x}:{:x}", i + 1))
            }
        })
        .collect()
}

fn read_all(r: &Region<Shared>, node: NodeId) -> Option<Vec<PublishedAddr>> {
    let mut out = [[0u8; 16]; MAX_PUBLISHED];
    r.read_published(node, &mut out).map(|n| out[..n].to_vec())
}

/// The span of `node`'s address page.
fn page_of(r: &Region<Shared>, node: NodeId) -> usize {
    r.layout().heap(node).unwrap() + ADDR_PAGE * crate::proto::region::PAGE_SIZE
}

#[test]
fn more_addresses_than_the_entry_holds_go_to_the_address_page() {
    let r = formatted();
    assert_eq!(read_all(&r, 1), None, "nothing published");
    let all = many(12, 1);
    r.publish_addresses(1, &all);
    assert_eq!(read_all(&r, 1).unwrap(), all, "entry then page, in order");
    assert_eq!(
        r.published_addresses(1),
        Some([Some(all[0]), Some(all[1])]),
        "an older reader sees the first two"
    );
    // Fewer again: the page holds only what is published now.
    r.publish_addresses(1, &all[..3]);
    assert_eq!(read_all(&r, 1).unwrap(), &all[..3]);
    r.publish_addresses(1, &all[..1]);
    assert_eq!(read_all(&r, 1).unwrap(), &all[..1]);
    // Unusable ones are left out wherever they would land.
    let mut mixed = many(5, 2);
    mixed.insert(3, v4([127, 0, 0, 1]));
    mixed.insert(1, v6("fe80::1"));
    r.publish_addresses(1, &mixed);
    assert_eq!(read_all(&r, 1).unwrap(), many(5, 2));
    // At most MAX_PUBLISHED; a short buffer takes the first ones.
    let lots = many(MAX_PUBLISHED + 6, 3);
    r.publish_addresses(1, &lots);
    assert_eq!(read_all(&r, 1).unwrap(), &lots[..MAX_PUBLISHED]);
    let mut four = [[0u8; 16]; 4];
    assert_eq!(r.read_published(1, &mut four), Some(4));
    assert_eq!(&four[..], &lots[..4]);
    assert_eq!(
        read_all(&r, 2),
        None,
        "another node's publication is untouched"
    );
}

#[test]
fn a_page_without_the_magic_or_with_a_count_too_big_holds_nothing() {
    let r = formatted();
    let all = many(6, 4);
    r.publish_addresses(1, &all);
    let page = page_of(&r, 1);
    // A node older than the address page: whatever its first heap page holds (a ring).
    r.seg().store_u64(page + ADDR_PAGE_MAGIC_OFF, 0x1234);
    assert_eq!(read_all(&r, 1).unwrap(), &all[..PUBLISHED_ADDRS]);
    r.seg()
        .store_u64(page + ADDR_PAGE_MAGIC_OFF, ADDR_PAGE_MAGIC);
    assert_eq!(read_all(&r, 1).unwrap(), all);
    for bad in [PAGE_ADDRS as u64 + 1, u64::MAX, 1 << 40] {
        r.seg().store_u64(page + ADDR_PAGE_COUNT, bad);
        assert_eq!(read_all(&r, 1).unwrap(), &all[..PUBLISHED_ADDRS], "{bad}");
    }
}

#[test]
fn whatever_a_peer_writes_in_its_address_page_yields_only_usable_addresses() {
    let r = formatted();
    r.publish_addresses(1, &many(8, 5));
    let page = page_of(&r, 1);
    let mut rng = XorShift(0xadd7_9a9e);
    let mut taken = 0;
    for round in 0..5_000 {
        for w in 0..(ADDR_PAGE_ADDRS / 8 + PAGE_ADDRS * 2) {
            r.seg().store_u64(page + w * 8, rng.next());
        }
        if round % 2 == 0 {
            r.seg()
                .store_u64(page + ADDR_PAGE_MAGIC_OFF, ADDR_PAGE_MAGIC);
            r.seg()
                .store_u64(page + ADDR_PAGE_COUNT, rng.next() % (PAGE_ADDRS as u64 + 1));
        }
        let got = read_all(&r, 1).unwrap();
        assert!(got.len() <= MAX_PUBLISHED);
        for a in &got {
            assert!(crate::proto::region::usable(a), "{a:?}");
        }
        taken += got.len();
    }
    assert!(taken > 0);
}

#[test]
fn publishing_writes_only_the_own_entry_and_address_page() {
    let r = formatted();
    let len = r.seg().len();
    let before: Vec<u64> = (0..len / 8).map(|i| r.seg().load_u64(i * 8)).collect();
    r.publish_addresses(2, &many(20, 6));
    let entry = NODE_TABLE + 2 * NODE_ENTRY_SIZE;
    let page = page_of(&r, 2);
    for (i, old) in before.iter().enumerate() {
        let off = i * 8;
        let own = (entry + NODE_ADDR_SEQ..entry + NODE_ADDRS + 32).contains(&off)
            || (page..page + ADDR_PAGE_ADDRS + PAGE_ADDRS * 16).contains(&off);
        assert!(
            own || r.seg().load_u64(off) == *old,
            "word {off:#x} changed"
        );
    }
}

#[test]
fn a_racing_reader_never_takes_a_torn_publication_across_entry_and_page() {
    race_reader(&formatted(), [many(9, 7), many(5, 8)], |r, sets| {
        let got = read_all(r, 1)?;
        let which = sets
            .iter()
            .position(|s| *s == got)
            .unwrap_or_else(|| panic!("torn read: {got:?}"));
        Some(which)
    });
}
