//! The listening UNIX socket and its file.
//!
//! A socket file nobody listens on is what a killed server leaves behind: it
//! is removed.  One a live server answers on is not touched, and neither is a
//! path that is not a socket at all.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

pub struct Listener {
    path: PathBuf,
    /// The inode we bound, so that Drop never removes someone else's socket.
    ino: u64,
    pub socket: UnixListener,
}

/// Fails if `path` is in use or not a socket, removes it if it is stale.
/// Called before anything else is created, so a refused start leaves no trace.
pub fn clear_stale(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use by a running server", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            fs::remove_file(path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot remove the stale {}: {e}", path.display()),
                )
            })
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

impl Listener {
    pub fn bind(path: &Path) -> io::Result<Self> {
        let socket = UnixListener::bind(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on {}: {e}", path.display()),
            )
        })?;
        // accept() after poll() must not block if the client went away meanwhile.
        socket.set_nonblocking(true)?;
        let ino = fs::symlink_metadata(path)?.ino();
        Ok(Listener {
            path: path.to_path_buf(),
            ino,
            socket,
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = fs::remove_file(&self.path);
        }
    }
}
