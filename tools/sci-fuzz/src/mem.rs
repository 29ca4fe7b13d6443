//! Memory the fuzzer hands to the kernel.
//!
//! The fuzzer never passes a pointer into its own live data: every pointer a syscall gets
//! is one of
//! * a place in a thread's scratch arena, a mapping with inaccessible guard pages on both
//!   sides, so whatever length goes with the pointer the kernel cannot reach beyond it (it
//!   faults, EFAULT or a short copy). The arena has a data zone (buffers, addresses,
//!   option values) and a separate structure zone (iovec, msghdr, mmsghdr, pollfd arrays)
//!   that data pointers never point into, so the kernel writing received bytes cannot
//!   change a structure it is reading in the same call;
//! * one of the process's bad pointers: NULL, a low address below mmap_min_addr, a
//!   PROT_NONE page kept reserved (never unmapped, so nothing else is ever mapped there), a
//!   read-only page, a kernel address, a non-canonical address.
//!
//! Rust code reads the arenas only as bytes through raw pointers ([`Arena::put`],
//! [`Arena::get`]), never as references, as the kernel may write them at any time from the
//! fuzzer's point of view.

use crate::rng::Rng;
use std::ptr;

pub const PAGE: usize = 4096;
pub const DATA_SIZE: usize = 256 * 1024;
pub const STRUCT_SIZE: usize = 64 * 1024;

/// Maps `len` bytes anonymous with `prot`, or exits (the fuzzer cannot work without).
fn map(len: usize, prot: i32) -> *mut u8 {
    // SAFETY: an anonymous private mapping at an address of the kernel's choice touches
    // no existing memory.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        eprintln!(
            "sci-fuzz: mmap of {len} bytes failed: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
    p as *mut u8
}

fn protect(p: *mut u8, len: usize, prot: i32) {
    // SAFETY: `p..p+len` lies in a mapping `map` made and that is never unmapped; only its
    // protection changes, and no Rust reference points into it.
    let r = unsafe { libc::mprotect(p as *mut libc::c_void, len, prot) };
    if r != 0 {
        eprintln!(
            "sci-fuzz: mprotect failed: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(2);
    }
}

/// One thread's scratch memory: `[guard][data][guard][structs][guard]`.
#[derive(Clone, Copy)]
pub struct Arena {
    pub data: u64,
    pub structs: u64,
}

impl Arena {
    pub fn new(rng: &mut Rng) -> Arena {
        let total = PAGE + DATA_SIZE + PAGE + STRUCT_SIZE + PAGE;
        let base = map(total, libc::PROT_NONE);
        let data = base.wrapping_add(PAGE);
        let structs = base.wrapping_add(PAGE + DATA_SIZE + PAGE);
        protect(data, DATA_SIZE, libc::PROT_READ | libc::PROT_WRITE);
        protect(structs, STRUCT_SIZE, libc::PROT_READ | libc::PROT_WRITE);
        let a = Arena {
            data: data as u64,
            structs: structs as u64,
        };
        let mut noise = vec![0u8; DATA_SIZE];
        rng.fill(&mut noise);
        a.put(a.data, &noise);
        a
    }

    /// Whether `addr..addr+len` lies in the arena's data or structure zone.
    fn inside(&self, addr: u64, len: usize) -> bool {
        let end = addr.checked_add(len as u64);
        let within =
            |base: u64, size: usize| addr >= base && end.is_some_and(|e| e <= base + size as u64);
        within(self.data, DATA_SIZE) || within(self.structs, STRUCT_SIZE)
    }

    /// Copies `bytes` to `addr`, which must lie in the arena (checked: never elsewhere).
    pub fn put(&self, addr: u64, bytes: &[u8]) {
        assert!(
            self.inside(addr, bytes.len()),
            "arena write outside the arena"
        );
        // SAFETY: checked to lie within the arena's read-write zones, which no Rust
        // reference covers; `bytes` is not in the arena (it is a Rust value).
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    }

    /// Reads `N` bytes at `addr` in the arena (checked).
    pub fn get<const N: usize>(&self, addr: u64) -> [u8; N] {
        assert!(self.inside(addr, N), "arena read outside the arena");
        let mut out = [0u8; N];
        // SAFETY: as in `put`; a racing kernel write can only change the bytes read.
        unsafe { ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), N) };
        out
    }

    /// The two descriptors pipe2 or socketpair stored at `addr`.
    pub fn fd_pair(&self, addr: u64) -> (i32, i32) {
        let b: [u8; 8] = self.get(addr);
        (
            i32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            i32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
        )
    }

    pub fn put_u32(&self, addr: u64, v: u32) {
        self.put(addr, &v.to_ne_bytes());
    }

    pub fn put_u64(&self, addr: u64, v: u64) {
        self.put(addr, &v.to_ne_bytes());
    }

    /// A place in the data zone with room for `len` bytes when it fits (any alignment),
    /// else near the end so that a long access runs into the guard page.
    pub fn data_at(&self, rng: &mut Rng, len: u64) -> u64 {
        let len = len.min(DATA_SIZE as u64);
        let room = DATA_SIZE as u64 - len;
        let off = match rng.below(4) {
            0 => 0,
            1 => rng.below(room + 1) & !7,
            _ => rng.below(room + 1),
        };
        self.data + off
    }

    /// The end of the data zone minus `back` bytes: accesses longer than `back` fault.
    pub fn data_tail(&self, back: u64) -> u64 {
        self.data + DATA_SIZE as u64 - back.min(DATA_SIZE as u64)
    }
}

/// The process's bad pointers and its read-only page.
#[derive(Clone, Copy)]
pub struct BadPages {
    pub none: u64,
    pub ro: u64,
}

impl BadPages {
    /// `ro_content` is copied into the read-only page before it is made read-only.
    pub fn new(ro_content: &[u8]) -> BadPages {
        let none = map(2 * PAGE, libc::PROT_NONE);
        let ro = map(PAGE, libc::PROT_READ | libc::PROT_WRITE);
        let n = ro_content.len().min(PAGE);
        // SAFETY: `ro` is a fresh read-write mapping of PAGE bytes; `n <= PAGE`.
        unsafe { ptr::copy_nonoverlapping(ro_content.as_ptr(), ro, n) };
        protect(ro, PAGE, libc::PROT_READ);
        BadPages {
            none: none as u64,
            ro: ro as u64,
        }
    }

    /// A pointer the kernel must refuse or that faults (or the read-only page, which
    /// faults only when written).
    pub fn pick(&self, rng: &mut Rng) -> u64 {
        match rng.below(8) {
            0 => 0,                                              // NULL
            1 => rng.range(1, 0xfff),                            // just above NULL
            2 => 0x1000 + rng.below(0xe000),                     // below mmap_min_addr
            3 => self.none + rng.below(2 * PAGE as u64),         // PROT_NONE, reserved
            4 => self.ro + rng.below(PAGE as u64),               // read-only
            5 => 0xffff_8880_0000_0000 + rng.below(1 << 20) * 8, // kernel direct map
            6 => 0x0000_8000_0000_0000 + rng.below(1 << 20),     // non-canonical
            _ => u64::MAX - rng.below(64),                       // wraps
        }
    }
}
