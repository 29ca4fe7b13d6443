//! Where every word of a live region is, for host programs that act on the region as
//! one of its nodes would (`tools/sci-hostile`, which lies as a node to test its
//! peers). Everything is computed by the protocol core in `rust/proto`, the code the
//! kernel module runs, so a host program and the guests agree on every offset.
//!
//! A region is seen as 64-bit words (`&[AtomicU64]`, the host's byte order, which is
//! the guests'). Offsets are byte offsets from the region's start.

use core::sync::atomic::AtomicU64;

use crate::manager::Words;
use crate::proto::frame::{
    CloseReason, ConnId, Frame, FrameKind, QueueOffer, RejectReason, WireIp,
};
use crate::proto::mailbox::MB_ACK;
use crate::proto::region::{
    next_odd, read_header, to_words, usable, v4_mapped, DirEntry, HeaderState, Layout, NodeState,
    NodeWord, Region, NODE_ADDRS, NODE_ADDR_SEQ, NODE_HEARTBEAT, NODE_WORD,
};
use crate::proto::ring;

/// Receive area: u64 ring size (written by the receiver at creation).
pub const RX_RING_SIZE: usize = ring::RX_RING_SIZE;
/// Receive area: u64 connection generation.
pub const RX_GENERATION: usize = ring::RX_GENERATION;
/// Receive area: u64 start cursor.
pub const RX_START: usize = ring::RX_START;
/// Receive area: u64 producer cursor (written by the sender).
pub const RX_PROD_CURSOR: usize = ring::RX_PROD_CURSOR;
/// Receive area: u64 producer flag word (written by the sender).
pub const RX_PROD_FLAGS: usize = ring::RX_PROD_FLAGS;
/// Receive area: the first byte of ring data.
pub const RX_DATA: usize = ring::RX_DATA;
/// Credit area: u64 consumer cursor (written by the receiver, in the sender's segment).
pub const CREDIT_CONS_CURSOR: usize = ring::CREDIT_CONS_CURSOR;
/// Credit area: u64 consumer flag word.
pub const CREDIT_CONS_FLAGS: usize = ring::CREDIT_CONS_FLAGS;
/// Addresses a node publishes in its node table entry (16 bytes each).
pub const PUBLISHED_ADDRS: usize = crate::proto::region::PUBLISHED_ADDRS;
/// Addresses a node publishes in its address page (16 bytes each), beyond the entry's.
pub const PAGE_ADDRS: usize = crate::proto::region::PAGE_ADDRS;
/// Address page: offset of the magic.
pub const ADDR_PAGE_MAGIC_OFF: usize = crate::proto::region::ADDR_PAGE_MAGIC_OFF;
/// Address page: offset of the count.
pub const ADDR_PAGE_COUNT: usize = crate::proto::region::ADDR_PAGE_COUNT;
/// Address page: offset of the first address.
pub const ADDR_PAGE_ADDRS: usize = crate::proto::region::ADDR_PAGE_ADDRS;
/// Address page: the magic that says the page holds addresses.
pub const ADDR_PAGE_MAGIC: u64 = crate::proto::region::ADDR_PAGE_MAGIC;
/// Words of a mailbox frame.
pub const FRAME_WORDS: usize = crate::proto::frame::FRAME_WORDS;

/// Bytes of a receive area with a ring of `ring_size` bytes (header + data): where the
/// kernel puts a connection end's credit area in its segment (its receive area is at 0).
pub fn rx_area_size(ring_size: u64) -> Option<usize> {
    let g = ring::RingGeometry::from_size(ring_size).ok()?;
    Some(g.rx_area_size())
}

/// The places of a formatted region.
#[derive(Clone, Copy, Debug)]
pub struct Map {
    /// The layout the header describes, checked against the mapping.
    layout: Layout,
}

/// A doorbell block: `groups` u32 group counters at `off`, then `channels` u32 channel
/// counters at `off + counters`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bells {
    /// Offset of the block.
    pub off: usize,
    /// Bytes of the block.
    pub size: usize,
    /// Group counters (one per 64 channels).
    pub groups: usize,
    /// Block-relative offset of the channel counters.
    pub counters: usize,
    /// Channel counters.
    pub channels: usize,
}

/// A mailbox from one node to another: its slot area (in the receiver's area) and its
/// ack word (in the sender's area, written by the receiver: the next sequence number
/// it expects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mailbox {
    /// Offset of slot 0 (slot `i` at `slots + 128 * i`).
    pub slots: usize,
    /// Slot count (a power of two).
    pub count: u32,
    /// Offset of the u64 ack word.
    pub ack: usize,
}

/// A segment a node exports: `len` bytes at `off`, export generation `generation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    /// The channel (the connection's slot on its node).
    pub channel: u32,
    /// Offset of the segment.
    pub off: usize,
    /// Its length.
    pub len: usize,
    /// The export generation.
    pub generation: u16,
}

impl Map {
    /// The map of the region in `words`, if a node formatted it with a layout this code
    /// knows.
    pub fn read(words: &[AtomicU64]) -> Option<Self> {
        let seg = Words(words);
        match read_header(&seg) {
            HeaderState::Ready(layout) => Region::new(seg, layout).ok().map(|r| Self {
                layout: *r.layout(),
            }),
            _ => None,
        }
    }

    /// Node table entries.
    pub fn nodes(&self) -> usize {
        self.layout.nodes()
    }

    /// Channels per node.
    pub fn channels(&self) -> usize {
        self.layout.channels()
    }

    /// Offset of `node`'s node word.
    pub fn node_word(&self, node: u16) -> Option<usize> {
        self.layout.node_entry(node)?.checked_add(NODE_WORD)
    }

    /// Offset of `node`'s heartbeat counter.
    pub fn heartbeat(&self, node: u16) -> Option<usize> {
        self.layout.node_entry(node)?.checked_add(NODE_HEARTBEAT)
    }

    /// Offset of `node`'s address page (the first page of its heap), if it has a heap.
    pub fn address_page(&self, node: u16) -> Option<usize> {
        let page = crate::proto::region::ADDR_PAGE;
        (self.layout.heap_pages() > page).then_some(())?;
        self.layout
            .heap(node)?
            .checked_add(page.checked_mul(crate::proto::region::PAGE_SIZE)?)
    }

    /// Offsets of `node`'s published addresses: the sequence word, and the first of
    /// [`PUBLISHED_ADDRS`] addresses of 16 bytes (two words each, little-endian bytes).
    pub fn addresses(&self, node: u16) -> Option<(usize, usize)> {
        let entry = self.layout.node_entry(node)?;
        Some((
            entry.checked_add(NODE_ADDR_SEQ)?,
            entry.checked_add(NODE_ADDRS)?,
        ))
    }

    /// The addresses `node` publishes, read and checked as the kernel reads them (`None`:
    /// nothing published, or a write in progress; an unusable slot is `None`).
    pub fn published(
        &self,
        words: &[AtomicU64],
        node: u16,
    ) -> Option<[Option<[u8; 16]>; PUBLISHED_ADDRS]> {
        Region::new(Words(words), self.layout)
            .ok()?
            .published_addresses(node)
    }

    /// Publishes `addrs` as `node`'s addresses, as the kernel of that node does.
    pub fn publish(&self, words: &[AtomicU64], node: u16, addrs: &[[u8; 16]]) {
        if let Ok(region) = Region::new(Words(words), self.layout) {
            region.publish_addresses(node, addrs);
        }
    }

    /// Offset of the link word `node` publishes for `peer`.
    pub fn link(&self, node: u16, peer: u16) -> Option<usize> {
        self.layout.link(node, peer)
    }

    /// `node`'s area: offset and length.
    pub fn area(&self, node: u16) -> Option<(usize, usize)> {
        Some((self.layout.area(node)?, self.layout.area_size()))
    }

    /// `node`'s heap: offset and pages.
    pub fn heap(&self, node: u16) -> Option<(usize, usize)> {
        Some((self.layout.heap(node)?, self.layout.heap_pages()))
    }

    /// The doorbell block `from` → `to` (in `to`'s area, written by `from`).
    pub fn bells(&self, to: u16, from: u16) -> Option<Bells> {
        let g = self.layout.bells();
        let groups = g.channels() / crate::proto::doorbell::GROUP_CHANNELS;
        Some(Bells {
            off: self.layout.bell_block(to, from)?,
            size: g.size(),
            groups,
            counters: g.size().checked_sub(g.channels().checked_mul(4)?)?,
            channels: g.channels(),
        })
    }

    /// The mailbox `from` → `to`.
    pub fn mailbox(&self, from: u16, to: u16) -> Option<Mailbox> {
        Some(Mailbox {
            slots: self.layout.mb_slots(to, from)?,
            count: self.layout.mailbox().slots(),
            ack: self.layout.mb_ack(from, to)?.checked_add(MB_ACK)?,
        })
    }

    /// Offset of `node`'s export directory entry for `channel`.
    pub fn dir_entry(&self, node: u16, channel: u32) -> Option<usize> {
        self.layout.dir_entry(node, channel)
    }

    /// What `node` exports under `channel`, validated as the kernel validates it.
    pub fn export(&self, words: &[AtomicU64], node: u16, channel: u32) -> Option<Export> {
        let region = Region::new(Words(words), self.layout).ok()?;
        let (span, generation) = region.lookup(node, channel)?;
        Some(Export {
            channel,
            off: span.off,
            len: span.len,
            generation,
        })
    }

    /// Every segment `node` exports.
    pub fn exports<'a>(
        &self,
        words: &'a [AtomicU64],
        node: u16,
    ) -> impl Iterator<Item = Export> + 'a {
        let map = *self;
        (0..self.layout.channels()).filter_map(move |c| {
            let c = u32::try_from(c).ok()?;
            map.export(words, node, c)
        })
    }
}

/// A node word's state, as packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Never joined.
    Absent,
    /// Joining.
    Joining,
    /// Up.
    Up,
    /// Left.
    Down,
}

/// A node word, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its state.
    pub state: State,
    /// It takes interrupts.
    pub doorbell: bool,
    /// Its doorbell id.
    pub doorbell_id: u16,
    /// Its generation.
    pub generation: u32,
}

impl Node {
    /// Unpacks a node word (`None`: a word the kernel refuses).
    pub fn unpack(w: u64) -> Option<Self> {
        let n = NodeWord::unpack(w)?;
        Some(Self {
            state: match n.state {
                NodeState::Absent => State::Absent,
                NodeState::Joining => State::Joining,
                NodeState::Up => State::Up,
                NodeState::Down => State::Down,
            },
            doorbell: n.doorbell,
            doorbell_id: n.doorbell_id,
            generation: n.generation,
        })
    }

    /// Packs it.
    pub fn pack(self) -> u64 {
        NodeWord {
            state: match self.state {
                State::Absent => NodeState::Absent,
                State::Joining => NodeState::Joining,
                State::Up => NodeState::Up,
                State::Down => NodeState::Down,
            },
            doorbell: self.doorbell,
            doorbell_id: self.doorbell_id,
            generation: self.generation,
        }
        .pack()
    }
}

/// Whether a node may stand behind a published address, as the kernel judges it.
pub fn address_usable(a: &[u8; 16]) -> bool {
    usable(a)
}

/// The two words a published address is stored as, as the kernel stores them.
pub fn address_words(a: &[u8; 16]) -> [u64; 2] {
    to_words(a)
}

/// A published IPv4 address (`::ffff:a.b.c.d`).
pub fn address_v4(a: [u8; 4]) -> [u8; 16] {
    v4_mapped(a)
}

/// The odd value that opens a rewrite of published addresses whose sequence word is
/// `seq`, as the kernel's writer picks it (the even one after it closes the rewrite).
pub fn address_seq_open(seq: u64) -> u64 {
    next_odd(seq)
}

/// A link word: the peer's generation (low half) and the link sequence (high half).
pub fn link_word(generation: u32, seq: u32) -> u64 {
    u64::from(generation) | (u64::from(seq) << 32)
}

/// A directory entry with any fields (unchecked: a lie may name pages past the heap).
pub fn dir_entry_raw(page: u32, pages: u32, generation: u16) -> u64 {
    let field = (1u64 << 24) - 1;
    (u64::from(page) & field) | ((u64::from(pages) & field) << 24) | (u64::from(generation) << 48)
}

/// A directory entry, unpacked: (first page, pages, generation); `None` if empty.
pub fn dir_entry_unpack(w: u64) -> Option<(u32, u32, u16)> {
    DirEntry::unpack(w).map(|e| (e.page, e.pages, e.generation))
}

/// A connection id on a node: (slot, generation).
pub type Conn = (u32, u32);

/// A control frame to forge. Every frame is well formed (the right magic, version and
/// checksum), so that the receiver's own checks decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forged {
    /// A connect request from `src` to `dst_ip:dst_port` (IPv4), offering a queue.
    Request {
        /// The requester's id (its slot is its exported channel).
        src: Conn,
        /// The address dialled.
        dst_ip: [u8; 4],
        /// The port dialled.
        dst_port: u16,
        /// The requester's address.
        src_ip: [u8; 4],
        /// The offer: ring log2, receive area, credit area, start cursor.
        offer: (u8, u64, u64, u64),
        /// For an implicit connection of datagram sockets (`dst_port` is a datagram
        /// socket's).
        datagram: bool,
    },
    /// An accept of `dst`'s request by `src`, offering a queue.
    Accept {
        /// The listener's end.
        src: Conn,
        /// The connector's end.
        dst: Conn,
        /// The offer.
        offer: (u8, u64, u64, u64),
    },
    /// A reject of `dst`'s request (reason 1..=6 as on the wire; others: no listener).
    Reject {
        /// Any id of the rejecting node.
        src: Conn,
        /// The connector's end.
        dst: Conn,
        /// Reject reason.
        reason: u8,
    },
    /// A close of `dst` by its peer end `src` (`abort`: RST).
    Close {
        /// The closing end.
        src: Conn,
        /// The end closed.
        dst: Conn,
        /// Abort rather than graceful.
        abort: bool,
    },
}

/// A connection id as the core has it.
fn conn(c: Conn) -> ConnId {
    ConnId {
        slot: c.0,
        generation: c.1,
    }
}

/// A queue offer as the core has it.
fn offer((ring_log2, rx_area, credit_area, start): (u8, u64, u64, u64)) -> QueueOffer {
    QueueOffer {
        ring_log2,
        rx_area,
        credit_area,
        start,
    }
}

/// The sixteen words of `f` with sequence number `seq`, as a sender stores them into a
/// mailbox slot (the last word, sequence and checksum, stored last).
pub fn encode_frame(f: &Forged, seq: u32) -> [u64; FRAME_WORDS] {
    let mut frame = match *f {
        Forged::Request {
            src,
            dst_ip,
            dst_port,
            src_ip,
            offer: o,
            datagram,
        } => {
            let r = Frame::connect_request(
                conn(src),
                (WireIp::V4(src_ip), 40000),
                (WireIp::V4(dst_ip), dst_port, 0),
                offer(o),
            );
            if datagram {
                r.for_datagrams()
            } else {
                r
            }
        }
        Forged::Accept { src, dst, offer: o } => {
            let mut a = Frame::new(FrameKind::Accept);
            a.src = conn(src);
            a.dst = conn(dst);
            a.src_ip = WireIp::V4([10, 0, 0, 2]);
            a.dst_ip = WireIp::V4([10, 0, 0, 1]);
            a.offer = offer(o);
            a
        }
        Forged::Reject { src, dst, reason } => {
            let mut r = Frame::new(FrameKind::Reject);
            r.src = conn(src);
            r.dst = conn(dst);
            r.reason = crate::proto::frame::Reason::Reject(match reason {
                2 => RejectReason::BacklogFull,
                3 => RejectReason::NoResources,
                4 => RejectReason::Version,
                5 => RejectReason::Policy,
                6 => RejectReason::BadOffer,
                _ => RejectReason::NoListener,
            });
            r
        }
        Forged::Close { src, dst, abort } => Frame::close(
            conn(src),
            conn(dst),
            if abort {
                CloseReason::Abort
            } else {
                CloseReason::Graceful
            },
        ),
    };
    frame.seq = seq;
    frame.encode()
}

/// A flag word: the connection's generation, a wait token and flag bits (1 wants
/// notify, 2 done writing, 4 closed, 8 abort).
pub fn flag_word(generation: u32, token: u32, bits: u8) -> u64 {
    crate::proto::cursor::FlagWord {
        generation,
        token,
        bits,
    }
    .pack()
}

/// Whether `words` decode as a frame the kernel takes (for tests of forged frames).
pub fn frame_decodes(words: &[u64; FRAME_WORDS]) -> bool {
    Frame::decode(words).is_ok()
}

/// For tests of host programs: formats the region in `words` for `nodes` nodes (the
/// kernel's default parameters), has each of `up` join (its area initialized, node word
/// up with generation `generation`, linked with every other node of `up`), and exports
/// for each of them `segments` connection segments (rings of `ring_size` bytes, receive
/// area at 0 and credit area after it, as the kernel lays them out).
pub fn format_for_tests(
    words: &[AtomicU64],
    nodes: u32,
    up: &[u16],
    generation: u32,
    segments: u32,
    ring_size: u64,
) -> Option<Map> {
    use crate::proto::queue::{init_credit_area, init_rx_area, QueueParams};
    use crate::proto::region::{
        default_params, format, ClaimOutcome, Claimant, LinkWord, PAGE_SIZE,
    };
    use crate::proto::segment::Segment;

    let seg = Words(words);
    let size = u64::try_from(seg.len()).ok()?;
    let mut claimant = Claimant::new(0, 1);
    let ticket = match claimant.attempt(&seg, 0, 0, 1000) {
        ClaimOutcome::Won(t) => t,
        _ => return None,
    };
    let region = format(Words(words), default_params(size, nodes), 0, ticket).ok()?;
    claimant.withdraw(&seg);
    let geometry = ring::RingGeometry::from_size(ring_size).ok()?;
    let seg_pages = geometry
        .rx_area_size()
        .checked_add(ring::CREDIT_AREA_SIZE)?
        .div_ceil(PAGE_SIZE);
    for &me in up {
        region.init_area(me).ok()?;
        region.set_node_word(
            me,
            NodeWord {
                state: NodeState::Up,
                doorbell: false,
                doorbell_id: 0,
                generation,
            },
        );
        for &peer in up.iter().filter(|&&p| p != me) {
            region.set_link(me, peer, LinkWord { generation, seq: 1 });
        }
        for c in 0..segments {
            let page = usize::try_from(c).ok()?.checked_mul(seg_pages)?;
            let entry = DirEntry {
                page: u32::try_from(page).ok()?,
                pages: u32::try_from(seg_pages).ok()?,
                generation: 1,
            };
            region.set_export(me, c, Some(entry));
            let span = region.heap_span(me, page, seg_pages)?;
            let params = QueueParams {
                geometry,
                generation: c.checked_add(1)?,
                start: u64::from(c).checked_mul(1000)?,
            };
            init_rx_area(&seg, span.off, params).ok()?;
            init_credit_area(&seg, span.off.checked_add(geometry.rx_area_size())?, params).ok()?;
        }
    }
    Map::read(words)
}
