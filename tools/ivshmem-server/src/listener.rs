//! The listening UNIX socket and its file.
//!
//! A socket file nobody listens on is what a killed server leaves behind: it
//! is removed.  One a live server answers on is not touched, and neither is a
//! path that is not a socket at all.  A live server is looked for in
//! /proc/net/unix first, because connecting to it to find out would show
//! its guests a peer that comes and goes.

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
    let in_use = || {
        io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use by a running server", path.display()),
        )
    };
    if listening(path) {
        return Err(in_use());
    }
    // Not seen (another network namespace, or bound under another name):
    // only a connection attempt can tell.
    match UnixStream::connect(path) {
        Ok(_) => Err(in_use()),
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

/// Whether /proc/net/unix lists a listening socket bound to `path` (as given
/// or made absolute).  Lines: "Num RefCount Protocol Flags Type St Inode Path".
fn listening(path: &Path) -> bool {
    const SO_ACCEPTCON: u32 = 1 << 16;
    let abs = std::env::current_dir()
        .map(|d| d.join(path))
        .unwrap_or_default();
    let Ok(table) = fs::read_to_string("/proc/net/unix") else {
        return false;
    };
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.splitn(8, ' ').collect();
        f.len() == 8
            && u32::from_str_radix(f[3], 16).is_ok_and(|flags| flags & SO_ACCEPTCON != 0)
            && (Path::new(f[7]) == path || Path::new(f[7]) == abs)
    })
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
