//! The shared memory region: a file the server creates, sizes and removes.
//!
//! A file left by an earlier run is removed first, so every run starts with
//! zeroed memory and nobody keeps using a region the server no longer owns.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // The clients keep their mappings; only the name goes.
        let _ = fs::remove_file(&self.path);
    }
}
