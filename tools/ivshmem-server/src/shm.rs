//! The shared memory region: a file the server creates, sizes and removes.
//!
//! A file left by an earlier run is removed first, so every run starts with
//! zeroed memory and nobody keeps using a region the server no longer owns.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

pub struct SharedMemory {
    path: PathBuf,
    file: File,
}

impl SharedMemory {
    /// Creates `path` afresh (mode 0600) with `size` bytes.
    pub fn create(path: &Path, size: u64) -> io::Result<Self> {
        match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot remove the stale {}: {e}", path.display()),
                ))
            }
            _ => {}
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
            })?;
        // From here on, dropping `shm` removes the file.
        let shm = SharedMemory {
            path: path.to_path_buf(),
            file,
        };
        shm.file.set_len(size).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot size {} to {size} bytes: {e}", path.display()),
            )
        })?;
        Ok(shm)
    }

    /// The descriptor sent to every client with the value -1.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Maps the whole region into the server, shared with the guests (for the fence
    /// the server applies when a guest departs: see `Server::remove`).
    pub fn map(&self) -> io::Result<Mapping> {
        let len = usize::try_from(self.file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region too large"))?;
        let words = len / 8;
        if words == 0 {
            return Ok(Mapping {
                ptr: std::ptr::null_mut(),
                words: 0,
            });
        }
        // SAFETY: a fresh shared mapping of our own descriptor, at an address the kernel
        // chooses; nothing else in this process refers to that address range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                words * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            words,
        })
    }
}

/// The region mapped into the server, as 64-bit words the guests also access atomically.
pub struct Mapping {
    ptr: *mut AtomicU64,
    words: usize,
}

impl Mapping {
    pub fn words(&self) -> &[AtomicU64] {
        if self.words == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a page-aligned mapping of `words * 8` bytes that lives until
        // `self` is dropped; shared memory that other processes change concurrently is
        // only ever accessed through atomics, which is what `AtomicU64` is for.
        unsafe { std::slice::from_raw_parts(self.ptr, self.words) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.words != 0 {
            // SAFETY: unmaps exactly the range `map` mapped; no reference into it
            // outlives `self` (`words` borrows `self`).
            unsafe { libc::munmap(self.ptr.cast(), self.words * 8) };
        }
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // The clients keep their mappings; only the name goes.
        let _ = fs::remove_file(&self.path);
    }
}
