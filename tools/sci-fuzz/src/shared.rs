//! What the threads of one worker process share: the context they all read, and a slot
//! each that says which call it is in (the watchdog reads the slots). Kept out of
//! `worker.rs` (which starts the threads) and `ops.rs` (which runs their calls), so that
//! each of the two needs this file and not the other.

use crate::addr::Peer;
use crate::mem::BadPages;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64};
use std::sync::Mutex;
use std::time::Instant;

/// Fuzz threads per worker process, at most.
pub const MAX_THREADS: usize = 64;

/// What one fuzz thread is doing: the call it is in and since when (0: not in a call).
pub struct Slot {
    pub call: AtomicU32,
    pub since: AtomicU64,
    pub arg: AtomicI64,
    pub tid: AtomicI32,
    pub done: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const SLOT: Slot = Slot {
    call: AtomicU32::new(0),
    since: AtomicU64::new(0),
    arg: AtomicI64::new(0),
    tid: AtomicI32::new(0),
    done: AtomicBool::new(false),
};
pub static SLOTS: [Slot; MAX_THREADS] = [SLOT; MAX_THREADS];

/// What the threads of one worker process share (read-mostly).
pub struct Ctx {
    pub family: i32,
    pub peers: Vec<Peer>,
    pub proc_index: u32,
    pub bad: BadPages,
    pub deadline: Instant,
    pub trace: bool,
    /// Sockets any thread may use (not close): concurrent calls on one socket.
    pub shared: Mutex<Vec<i32>>,
    /// Ports the threads' own listeners listen on: (port, IPv6, AF_SCI).
    pub own_ports: Mutex<Vec<(u16, bool, bool)>>,
}
