//! The listening UNIX socket and its file.
//!
//! The socket file appears at its path only once the server listens, so that
//! a client may connect as soon as it sees the file (scripts wait for it and
//! then start QEMU).  bind() creates the file and listen() comes after it: a
//! connection in between is refused (ECONNREFUSED).  So the socket is bound
//! and set listening under a temporary name in the same directory,
//! `PATH.PID.tmp`, and then renamed onto PATH, which is atomic and keeps the
//! inode.  A server killed (SIGKILL) between bind() and the rename leaves the
//! temporary file behind; any failure of ours removes it.
//!
//! A socket file nobody listens on is what a killed server leaves behind: it
//! is removed.  One a live server answers on is not touched, and neither is a
//! path that is not a socket at all.  A live server is looked for in
//! /proc/net/unix first, because connecting to it to find out would show
//! its guests a peer that comes and goes.

use std::ffi::{CString, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
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
///
/// The kernel shows the name a socket was bound to, and a rename does not
/// change it: a server of this version shows up as `PATH.PID.tmp` (see
/// `temporary_name`), so that name counts too, whatever the PID.  Relying on
/// the connection attempt instead would make every such check a peer that
/// comes and goes.  A match with a PID other than the owner of PATH is still
/// right: the socket is another server that is about to take PATH (it
/// listens, the rename follows), or one that did and whose file has since
/// been replaced, where the check was always fooled by the exact name too.
fn listening(path: &Path) -> bool {
    const SO_ACCEPTCON: u32 = 1 << 16;
    let abs = std::env::current_dir()
        .map(|d| d.join(path))
        .unwrap_or_default();
    let Ok(table) = fs::read("/proc/net/unix") else {
        return false;
    };
    table.split(|&b| b == b'\n').skip(1).any(|line| {
        let f: Vec<&[u8]> = line.splitn(8, |&b| b == b' ').collect();
        f.len() == 8
            && std::str::from_utf8(f[3])
                .ok()
                .and_then(|flags| u32::from_str_radix(flags, 16).ok())
                .is_some_and(|flags| flags & SO_ACCEPTCON != 0)
            && (names(f[7], path) || names(f[7], &abs))
    })
}

/// Whether a socket bound to `bound` is one for `path`: bound to it, or to
/// a temporary name of it, `PATH.DIGITS.tmp`.
fn names(bound: &[u8], path: &Path) -> bool {
    let path = path.as_os_str().as_bytes();
    bound == path
        || bound
            .strip_prefix(path)
            .and_then(|rest| rest.strip_prefix(b"."))
            .and_then(|rest| rest.strip_suffix(b".tmp"))
            .is_some_and(|pid| !pid.is_empty() && pid.iter().all(u8::is_ascii_digit))
}

fn is_socket(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// `PATH.PID.tmp`: in PATH's directory (a rename cannot cross file systems),
/// and this process's alone.  Being 6 to 12 bytes longer than PATH, it lowers
/// the limit on PATH's length (107 bytes for a UNIX socket).
fn temporary_name(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

/// Renames `from` to `to` unless `to` exists (EEXIST then), atomically, as
/// bind() on `to` itself would refuse it.  File systems without
/// RENAME_NOREPLACE get a hard link and an unlink instead, which is as
/// atomic for `to` but shows both names for a moment.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
    };
    let (cfrom, cto) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated strings that outlive the call; AT_FDCWD
    // makes relative paths relative to the working directory, as elsewhere.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            cfrom.as_ptr(),
            libc::AT_FDCWD,
            cto.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    fs::hard_link(from, to)?;
    // The socket is at `to` now; a leftover `from` would only be clutter.
    let _ = fs::remove_file(from);
    Ok(())
}

impl Listener {
    /// Listens on `path`, whose file appears only once the socket listens
    /// (see the module comment).  A file that appeared at `path` since
    /// `clear_stale` (another server starting at the same time) is not
    /// replaced: that is an error, as bind() on `path` would have made it.
    pub fn bind(path: &Path) -> io::Result<Self> {
        let tmp = temporary_name(path);
        // Left by a killed process that had our pid: nobody else's name.
        if is_socket(&tmp) {
            let _ = fs::remove_file(&tmp);
        }
        // bind() and listen().  If listen() failed, bind() created the file;
        // if bind() failed, there is none, or one that is not a socket
        // (EADDRINUSE), which is not ours to remove.
        let socket = UnixListener::bind(&tmp).map_err(|e| {
            if is_socket(&tmp) {
                let _ = fs::remove_file(&tmp);
            }
            io::Error::new(
                e.kind(),
                format!(
                    "cannot listen on {} (bound first as {}): {e}",
                    path.display(),
                    tmp.display()
                ),
            )
        })?;
        let publish = || -> io::Result<u64> {
            // accept() after poll() must not block if the client went away
            // meanwhile.
            socket.set_nonblocking(true)?;
            let ino = fs::symlink_metadata(&tmp)?.ino();
            rename_noreplace(&tmp, path)?;
            Ok(ino)
        };
        match publish() {
            Ok(ino) => Ok(Listener {
                path: path.to_path_buf(),
                ino,
                socket,
            }),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(io::Error::new(
                    e.kind(),
                    format!("cannot listen on {}: {e}", path.display()),
                ))
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = fs::remove_file(&self.path);
        }
    }
}
