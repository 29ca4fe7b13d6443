// SPDX-License-Identifier: GPL-2.0

//! The af_sci protocol core: ring layout, cursors, message queues, control
//! frames, sequence ageing, doorbells, the shared region and a connection end's state,
//! without I/O.
//!
//! Plain `core` Rust: no `std`, no `alloc`, no kernel crate, no `unsafe`, no
//! floats, no panics on any input (no peer-controlled indexing, no unwrap,
//! only wrapping/checked/saturating arithmetic: the kernel builds with
//! overflow checks on). It is compiled into `af_sci.ko`
//! (`#[path = "proto/mod.rs"] mod proto;` in the crate root) and into the host
//! crate `tools/sci-proto`, where `cargo test -p sci-proto` runs its unit,
//! property, two-thread stress and hostile-peer tests. Shared memory is reached
//! only through the [`Segment`](segment::Segment) trait.
//!
//! This documentation is the specification the kernel code follows.
//!
//! # Queues
//!
//! A connection has one unidirectional queue per direction (SCILib's message
//! queues, seed §5.3). A queue's ring lives in the **receiver's** segment, in
//! its *receive area*:
//!
//! ```text
//! receive area (receiver's segment, base 64-aligned)
//! 0x00 u32 magic "SCIQ" | 0x04 u32 version | 0x08 u64 ring size |
//! 0x10 u64 generation   | 0x18 u64 start cursor            line 0: receiver, at creation only
//! 0x40 u64 producer cursor | 0x48 u64 producer flag word     line 1: sender (remote stores)
//! 0x80 ring data: ring size bytes                            sender (remote stores)
//! ```
//!
//! The consumer cursor and the receiver's flags do **not** live there. They
//! live in a small *credit area* in the **sender's** segment, which the
//! receiver writes remotely:
//!
//! ```text
//! credit area (sender's segment, base 64-aligned, 64 bytes)
//! 0x00 u64 consumer cursor | 0x08 u64 consumer flag word     line 0: receiver (remote stores)
//! ```
//!
//! Why: each side then *reads* only its own, local memory on the fast path
//! and *writes* the peer's. The receiver polls the producer cursor and flags
//! in its own segment; the sender learns free space from the consumer cursor
//! in its own segment. Remote reads over a fabric (SCI, PCIe NTB) are
//! round-trips that stall the CPU for microseconds; remote writes are posted
//! and cheap. SCILib never reads the remote copy of `MSG_HEAD` for the same
//! reason, and SMC-D/SMC-R do the same: each side's RMBE holds the data and
//! cursors *written to it* by the peer, announced through CDC messages into
//! the other side's memory. Every field has exactly one writer, and each
//! writer's fields sit on their own 64-byte cache line.
//!
//! Offsets are in [`ring`]. The ring is 128-aligned inside its area; the
//! size is a power of two between 64 bytes and 1 GiB.
//!
//! ## Cursors
//!
//! Cursors are `u64` byte counts (wrap-free in practice; wrapping arithmetic
//! anyway), starting at an agreed start value; ring offset =
//! `cursor % ring_size`. The ring size is fixed by the receiver when it
//! allocates the ring and is carried to the sender in the connect frame; the
//! receiver uses only its own copy, never the header's, which it checks once
//! at attach time ([`Consumer::new`](queue::Consumer::new)); the sender checks
//! the offered size and placement against the length of the segment it mapped
//! ([`QueueOffer::validate`](frame::QueueOffer::validate)).
//!
//! Every span handed to a caller is computed from this side's own geometry.
//! The peer can corrupt only the byte contents and its own cursor and flags. A
//! producer cursor that goes backwards or claims more than the ring holds, a
//! consumer cursor that goes backwards or past what was published, or data
//! after "done writing", is a [`ProtocolError`](error::ProtocolError),
//! latched by the endpoint: the kernel aborts the connection. No span ever
//! leaves the ring.
//!
//! ## Producer
//!
//! [`Producer::writable`](queue::Producer::writable) returns up to two
//! contiguous spans (segment offsets in the receiver's segment) covering the
//! free space; the caller copies straight from the user's `iov_iter` into them
//! (one copy in, one copy out at the receiver), then
//! [`commit`](queue::Producer::commit)s `n` bytes, which stores the new
//! producer cursor last (Release). [`stage`](queue::Producer::stage) +
//! [`publish`](queue::Producer::publish) split the two for gathering: staged
//! bytes are in the peer's ring but not yet visible.
//!
//! Small-message fast path (the seed's INLINE protocol): a write of at most
//! [`INLINE_MAX`](gather::INLINE_MAX) bytes uses
//! [`reserve`](queue::Producer::reserve) (all or nothing), one copy (split at
//! the ring's end at most), one cursor store. Gathering (Nagle, `TCP_NODELAY`,
//! `TCP_CORK`, `MSG_MORE`) is the pure
//! [`gather_decision`](gather::gather_decision), modelled on
//! `tcp_nagle_check`.
//!
//! ## Consumer and the lazy consumer update
//!
//! [`Consumer::readable`](queue::Consumer::readable) returns the spans holding
//! data; [`consume`](queue::Consumer::consume)`(n)` advances the local cursor
//! only. The cursor is *published* (one remote store) only when
//! [`should_publish_consumer`](queue::should_publish_consumer) says so: at
//! least a threshold was consumed (default a quarter of the ring,
//! configurable), or the writer asked for a notification, or the writer's
//! view of the ring is full; and always before the reader sleeps
//! ([`Consumer::prepare_wait`](queue::Consumer::prepare_wait)). So a writer
//! never waits for space that was freed but not announced while its reader
//! still reads or waits.
//!
//! ## Waiting and notification
//!
//! Poll-then-sleep as in seed §5.4.3: a side that must wait first posts a
//! wait request (the "wants notify" bit plus a fresh 24-bit token in its flag
//! word, a remote store), then issues a full fence
//! ([`Segment::fence`](segment::Segment::fence)), then re-checks the peer's
//! cursor (a local load), and sleeps only if nothing changed. The other side
//! stores its cursor, fences, and loads the flag word: if a request with a
//! token it has not answered is posted, it rings the doorbell. One of the two
//! always sees the other's store (store → fence → load on both sides), so no
//! wake-up is lost, and each wait request costs at most one doorbell. Flag
//! changes that end a stream (done writing, closed, abort) always ring it.
//! `poll()` posts a wait request the same way when it reports "not ready".
//! A doorbell can still be lost on its way (the fabric's delivery is not this
//! core's); [`Consumer::wake_due`](queue::Consumer::wake_due) and
//! [`Producer::wake_due`](queue::Producer::wake_due) tell, from loads only,
//! that a side with a posted request has a cursor or flag change it was not
//! woken for, so a periodic sweep can wake it.
//!
//! ## Flag words
//!
//! `generation << 32 | token << 8 | bits` ([`cursor::FlagWord`]). Producer
//! bits: wants-notify, done-writing, closed, abort. Consumer bits:
//! wants-notify, closed. A word whose generation is not the connection's
//! reads as "no flags": a late store from an earlier connection that used the
//! same area cannot end a new one. Terminal bits are latched locally once
//! seen. "Closed" is the last store a side makes to the peer's segment; after
//! the producer's "closed" (or "abort") the peer may release the area.
//!
//! # Control mailbox
//!
//! Connection setup travels over a per-node-pair [`mailbox`] of fixed
//! 64-byte, versioned, CRC-checked [`frame`]s (connect request, accept,
//! reject, close), never over the TCP byte stream. A frame's last word
//! carries its sequence number and is stored last; sequence numbers and
//! connection generations are compared by age (`(a - b) as i32 < 0`, seed
//! §5.3.2). A connection is named by `(slot, generation)` on each node; a slot
//! gets a new generation on every reuse, and [`mailbox::route`] drops frames
//! addressed to an older generation ("sequence ageing"), answering a late
//! accept of an abandoned connect with `Close(Abandoned)`.
//!
//! # A connection end's state
//!
//! [`state`]: its set-up [`Phase`](state::Phase), what it did
//! ([`Local`](state::Local)), what its peer said ([`Peer`](state::Peer)), and the
//! decisions the kernel's connection takes from them: the TCP state, `poll`'s
//! readiness, what a `send` or `recv` that finds a direction over reports
//! (`EOF`, `ECONNRESET` once, the first write into a closed connection accepted then
//! `EPIPE`), `shutdown`, `close` (graceful or abort) and when its memory may be used
//! again ([`release`](state::release)).
//!
//! # Reuse of released areas
//!
//! Memory the peer could still write must not be handed to a new connection until
//! the peer has closed its end (its close flags are its last stores into it) or the
//! mapping is revoked; until then a closed end stays in the connection table, and an
//! end whose peer's state is unknown waits out a grace period. A new connection in
//! the same area gets a new generation and start cursor, so a stale flag store is
//! ignored and a stale cursor store is caught by cursor validation.
//!
//! # Shared region (inter-VM fabric)
//!
//! A fabric whose nodes share one memory region (ivshmem's BAR between QEMU guests)
//! lays it out as [`region`] describes: a header a formatter writes once, a node table
//! (state, generation, heartbeat, links), and one area per node with the [`doorbell`]
//! counters its peers write, its mailboxes, its export directory and the heap its segments come from
//! ([`pages`]). Every value read from the region is validated before use; places are
//! computed from the header's parameters, never read as pointers. [`liveness`] is the
//! heartbeat watch and the link protocol that tells the layer above when a peer went
//! away and lets a restarted peer rejoin.
//!
//! # Integration checklist (kernel side)
//!
//! - Setup, each side: allocate zeroed memory for its receive area and a
//!   credit area (both 64-aligned), [`init_rx_area`](queue::init_rx_area) and
//!   [`init_credit_area`](queue::init_credit_area) with the *own* generation
//!   and the start cursor that names the connecting end
//!   ([`connect_start`](queue::connect_start)), offer them in the connect request / accept
//!   ([`QueueOffer`](frame::QueueOffer)); validate the peer's offer against
//!   the mapped length ([`QueueOffer::validate`](frame::QueueOffer::validate)).
//!   Both ends of one queue must use the same [`QueueParams`](queue::QueueParams):
//!   the receiver's offer fixes size and start, and the generation is the one
//!   both sides agree on for the connection.
//! - `Segment` implementations bounds- and alignment-check every access
//!   (ignore a bad store, load 0) even though the core never passes a bad
//!   offset; `fence` is `smp_mb()` plus any flush posted remote writes need.
//! - `sendmsg`: [`send_end`](state::send_end) first; small writes
//!   through `reserve`, larger through `writable` (truncate the spans to the
//!   iov length); `stage`, then [`gather_decision`](gather::gather_decision)
//!   (with `room = free()`, `force` before sleeping); on `Hold` with data in
//!   flight, `request_notify`. Ring the doorbell whenever `publish`/`commit`
//!   return `true`.
//! - `recvmsg`: `readable`, copy, `consume_and_update`; ring on `true`. When
//!   empty: `prepare_wait`, ring if `notify_peer`, sleep if `sleep`, then
//!   `finish_wait`; [`recv_end`](state::recv_end) says what an empty ring
//!   means (an abort arrives through the *other* queue's flags).
//! - `poll`: when reporting "not readable"/"not writable", post the wait
//!   request the same way, or epoll never hears of new data.
//! - Doorbell handler (one doorbell per connection): wake readers and writers,
//!   and re-run the gathering decision for held bytes.
//! - Close order: flush, `Consumer::set_closed`, `Producer::set_closed` (the
//!   last store into the peer's segment), doorbell. On a
//!   [`ProtocolError`](error::ProtocolError): `Producer::set_abort`,
//!   `Consumer::set_closed` (both work on a latched endpoint), doorbell; the
//!   call fails with `EPROTO`.
//! - Control mailbox: [`init_slots`](mailbox::init_slots) /
//!   [`init_ack`](mailbox::init_ack) before announcing; sequence numbers start
//!   at [`MB_FIRST_SEQ`](mailbox::MB_FIRST_SEQ); every received frame goes
//!   through [`route`](mailbox::route) before it touches a connection.
//! - The kernel crate includes this module with `#[allow(dead_code)]` until
//!   the data path uses all of it.

pub(crate) mod cursor;
pub(crate) mod doorbell;
pub(crate) mod error;
pub(crate) mod frame;
pub(crate) mod gather;
pub(crate) mod liveness;
pub(crate) mod mailbox;
pub(crate) mod pages;
pub(crate) mod queue;
pub(crate) mod record;
pub(crate) mod region;
pub(crate) mod resume;
pub(crate) mod ring;
pub(crate) mod segment;
pub(crate) mod spin;
pub(crate) mod state;
