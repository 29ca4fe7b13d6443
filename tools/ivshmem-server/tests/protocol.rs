//! The client-server protocol as a QEMU ivshmem-doorbell device sees it:
//! the message sequence, what the descriptors are and that they connect the
//! peers (doorbells and shared memory), departures and id reuse.

mod common;

use common::{fd_size, ring, take, Mapping, Server, TempDir};
use std::time::Duration;

const NO_WAIT: Duration = Duration::from_millis(0);
const WAIT: Duration = Duration::from_secs(5);

#[test]
fn a_lone_client_gets_version_id_memory_and_its_vectors() {
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--size", "64K", "--vectors", "3"]);
    let mut a = server.connect();
    let (id, shm) = a.expect_greeting();
    assert_eq!(id, 0, "the first client gets id 0");
    assert_eq!(fd_size(&shm), 64 << 10);
    let own = a.expect_vectors(0, 3);
    a.expect_silence();
    // Three distinct eventfds, all quiet.
    for fd in &own {
        assert_eq!(take(fd, NO_WAIT), None);
    }
}

#[test]
fn two_clients_learn_of_each_other() {
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--vectors", "2"]);
    let mut a = server.connect();
    assert_eq!(a.expect_greeting().0, 0);
    let _a_own = a.expect_vectors(0, 2);
    a.expect_silence();

    let mut b = server.connect();
    let (b_id, _) = b.expect_greeting();
    assert_eq!(b_id, 1);
    // B: A's vectors, then its own.
    let _b_to_a = b.expect_vectors(0, 2);
    let _b_own = b.expect_vectors(1, 2);
    b.expect_silence();
    // A: B's arrival, one message per vector.
    let _a_to_b = a.expect_vectors(1, 2);
    a.expect_silence();
}

#[test]
fn a_doorbell_rings_on_the_peers_own_vector_only() {
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--vectors", "2"]);
    let mut a = server.connect();
    a.expect_greeting();
    let a_own = a.expect_vectors(0, 2);
    let mut b = server.connect();
    b.expect_greeting();
    let b_to_a = b.expect_vectors(0, 2);
    let b_own = b.expect_vectors(1, 2);
    let a_to_b = a.expect_vectors(1, 2);

    // A rings B's vector 1: B sees it there, nowhere else.
    ring(&a_to_b[1]);
    assert_eq!(take(&b_own[1], WAIT), Some(1));
    assert_eq!(
        take(&b_own[1], NO_WAIT),
        None,
        "the read consumed the count"
    );
    assert_eq!(take(&b_own[0], NO_WAIT), None);
    assert_eq!(take(&a_own[0], NO_WAIT), None);
    assert_eq!(take(&a_own[1], NO_WAIT), None);

    // B rings A's vector 0 twice: one read sees both.
    ring(&b_to_a[0]);
    ring(&b_to_a[0]);
    assert_eq!(take(&a_own[0], WAIT), Some(2));
    assert_eq!(take(&a_own[1], NO_WAIT), None);
    assert_eq!(take(&b_own[0], NO_WAIT), None);
}

#[test]
fn every_client_maps_the_same_memory() {
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--size", "1M"]);
    let mut a = server.connect();
    let (_, a_shm) = a.expect_greeting();
    let mut b = server.connect();
    let (_, b_shm) = b.expect_greeting();
    let (ma, mb) = (Mapping::new(&a_shm), Mapping::new(&b_shm));
    assert_eq!(mb.read(0, 16), vec![0; 16], "the region starts zeroed");
    ma.write(0, b"hello from A");
    mb.write((1 << 20) - 4, b"tail");
    assert_eq!(mb.read(0, 12), b"hello from A");
    assert_eq!(ma.read((1 << 20) - 4, 4), b"tail");
    // And the file the server named is that memory too.
    let file = std::fs::read(&server.shm).unwrap();
    assert_eq!(file.len(), 1 << 20);
    assert_eq!(&file[..12], b"hello from A");
}

#[test]
fn departures_are_announced_and_ids_are_not_reused_at_once() {
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--vectors", "1"]);
    let mut c0 = server.connect();
    c0.expect_greeting();
    c0.expect_vectors(0, 1);
    let mut c1 = server.connect();
    c1.expect_greeting();
    c1.expect_vectors(0, 1);
    c1.expect_vectors(1, 1);
    c0.expect_vectors(1, 1);
    let mut c2 = server.connect();
    assert_eq!(c2.expect_greeting().0, 2);
    c2.expect_vectors(0, 1);
    c2.expect_vectors(1, 1);
    c2.expect_vectors(2, 1);
    c0.expect_vectors(2, 1);
    c1.expect_vectors(2, 1);

    // Peer 1 goes: the others are told, with no descriptor.
    drop(c1);
    c0.expect_plain(1);
    c2.expect_plain(1);
    c0.expect_silence();

    // A newcomer gets the next id, 3, not the departed 1 (QEMU's device
    // mishandles a reused id), and the remaining peers' vectors in id order.
    let mut c3 = server.connect();
    assert_eq!(c3.expect_greeting().0, 3);
    c3.expect_vectors(0, 1);
    c3.expect_vectors(2, 1);
    c3.expect_vectors(3, 1);
    c3.expect_silence();
    c0.expect_vectors(3, 1);
    c2.expect_vectors(3, 1);

    drop(c0);
    c2.expect_plain(0);
    c3.expect_plain(0);
    let mut c4 = server.connect();
    assert_eq!(c4.expect_greeting().0, 4);
    c4.expect_vectors(2, 1);
    c4.expect_vectors(3, 1);
    c4.expect_vectors(4, 1);
}

#[test]
fn a_restarted_peer_gets_working_doorbells() {
    // The "peer killed mid-stream" case: B dies, a new B comes, and A must
    // use the new B's descriptors (the old ones ring nobody).
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--vectors", "1"]);
    let mut a = server.connect();
    a.expect_greeting();
    let _a_own = a.expect_vectors(0, 1);
    let mut b = server.connect();
    b.expect_greeting();
    b.expect_vectors(0, 1);
    let old_b_own = b.expect_vectors(1, 1);
    let old_a_to_b = a.expect_vectors(1, 1);
    drop(b);
    a.expect_plain(1);

    let mut b = server.connect();
    assert_eq!(b.expect_greeting().0, 2);
    b.expect_vectors(0, 1);
    let b_own = b.expect_vectors(2, 1);
    let a_to_b = a.expect_vectors(2, 1);
    ring(&old_a_to_b[0]);
    assert_eq!(
        take(&b_own[0], Duration::from_millis(200)),
        None,
        "old doorbell reached the new peer"
    );
    assert_eq!(take(&old_b_own[0], NO_WAIT), Some(1));
    ring(&a_to_b[0]);
    assert_eq!(take(&b_own[0], WAIT), Some(1));
}

#[test]
fn clients_beyond_max_peers_are_refused() {
    let dir = TempDir::new();
    let server = Server::start(&dir, &["--max-peers", "2", "--vectors", "1"]);
    let mut a = server.connect();
    a.expect_greeting();
    let mut b = server.connect();
    b.expect_greeting();
    let mut c = server.connect();
    c.expect_eof();
    // The refusal is invisible to the others, and a slot frees up on departure.
    a.expect_vectors(0, 1);
    a.expect_vectors(1, 1);
    a.expect_silence();
    drop(b);
    a.expect_plain(1);
    let mut c = server.connect();
    assert_eq!(c.expect_greeting().0, 2);
}

/// The fabric manager's fence: when a guest's QEMU goes away, the af_sci node whose
/// doorbell id is that peer's id is marked down in the region (before the others are
/// told of the departure), and nothing else changes. The region is written here as
/// af_sci's rust/proto/region/ lays out version 2 (version 1's header and node table,
/// with per-sender doorbell counters in the node areas); a change of that layout breaks
/// this test on purpose.
#[test]
fn a_departed_guests_af_sci_node_is_marked_down() {
    const SIZE: usize = 1 << 20;
    const NODE_TABLE: usize = 0x100;
    const NODE_ENTRY: usize = 0x140;
    // state (8 bits: 2 up, 3 down), flags (8: 1 doorbell), doorbell id (16), generation (32)
    let word = |state: u64, id: u64, generation: u64| state | 1 << 8 | id << 16 | generation << 32;
    let node_word = |m: &Mapping, n: usize| {
        u64::from_le_bytes(m.read(NODE_TABLE + n * NODE_ENTRY, 8).try_into().unwrap())
    };

    // Peers 0 and 1 of a fresh server, and the shared memory.
    let two_peers = |dir: &TempDir| {
        let server = Server::start(dir, &["--size", "1M", "--vectors", "1"]);
        let mut c0 = server.connect();
        let (_, shm) = c0.expect_greeting();
        c0.expect_vectors(0, 1);
        let mut c1 = server.connect();
        assert_eq!(c1.expect_greeting().0, 1);
        c0.expect_vectors(1, 1);
        (server, c0, c1, Mapping::new(&shm))
    };

    let dir = TempDir::new();
    let (_server, mut c0, c1, m) = two_peers(&dir);
    m.write(0x00, b"SCIR");
    m.write(0x04, &2u32.to_le_bytes()); // layout version
    m.write(0x08, &(SIZE as u64).to_le_bytes());
    m.write(0x10, &2u32.to_le_bytes()); // nodes
    m.write(0x14, &1024u32.to_le_bytes()); // channels
    m.write(0x18, &4u32.to_le_bytes()); // log2 of the mailbox slots
    m.write(0x40, &2u64.to_le_bytes()); // format word: ready
                                        // Node 0 is the guest behind peer 1; node 1 the one behind peer 0.
    m.write(NODE_TABLE, &word(2, 1, 7).to_le_bytes());
    m.write(NODE_TABLE + NODE_ENTRY, &word(2, 0, 3).to_le_bytes());

    drop(c1);
    c0.expect_plain(1);
    assert_eq!(
        node_word(&m, 0),
        word(3, 1, 7),
        "peer 1's node is down, same generation"
    );
    assert_eq!(
        node_word(&m, 1),
        word(2, 0, 3),
        "the other node is untouched"
    );

    // A region nobody formatted is left alone.
    let dir2 = TempDir::new();
    let (_server2, mut d0, d1, m2) = two_peers(&dir2);
    m2.write(NODE_TABLE, &word(2, 1, 7).to_le_bytes());
    drop(d1);
    d0.expect_plain(1);
    assert_eq!(node_word(&m2, 0), word(2, 1, 7));
}
