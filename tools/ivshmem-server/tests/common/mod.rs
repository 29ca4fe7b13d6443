//! Test harness: runs the real server binary and talks to it as a fake QEMU
//! client, receiving the descriptors over SCM_RIGHTS.

#![allow(dead_code)] // not every test file uses every helper

use std::fs;
use std::io::{self, Read};
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ivshmem-server");

/// A directory removed at the end of the test.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "ivshmem-test.{}.{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running server; killed (SIGKILL) if the test ends without stopping it.
pub struct Server {
    /// The server, or the strace that runs it (`start_traced`).
    pub child: Child,
    /// The server's process id: `child`'s, or that of the server strace runs.
    pub pid: u32,
    pub socket: PathBuf,
    pub shm: PathBuf,
    pub log: PathBuf,
}

impl Server {
    /// Starts a server on DIR/sock with DIR/shm and the extra arguments, and
    /// waits for its socket.
    pub fn start(dir: &TempDir, extra: &[&str]) -> Server {
        let (socket, shm) = (dir.path("sock"), dir.path("shm"));
        let mut args = vec![
            "--socket",
            socket.to_str().unwrap(),
            "--shm",
            shm.to_str().unwrap(),
            "--verbose",
        ];
        args.extend(extra);
        Server::spawn(&args, socket.clone(), shm.clone())
    }

    /// Runs the server with exactly `args`, which must make it listen on
    /// `socket` with its memory at `shm`, and waits for the socket.
    pub fn spawn(args: &[&str], socket: PathBuf, shm: PathBuf) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        Server::spawn_command(cmd, socket, shm)
    }

    /// Like `start`, but the server runs under strace with `strace_args`
    /// (fault injection: see strace(1), "-e inject").  strace is a test
    /// dependency (scripts/deps.sh installs it): without it, this panics.
    ///
    /// strace is `child` and the server its child, whose pid comes from the
    /// pid file: `stop` and the drop signal the server, and strace exits
    /// after it.  (With strace -D the server would be our child, but the
    /// tracer would be no ancestor of it, which Yama's ptrace_scope 1
    /// forbids, and nobody would reap the orphaned tracer.)
    pub fn start_traced(dir: &TempDir, strace_args: &[&str], extra: &[&str]) -> Server {
        let (socket, shm, pidfile) = (dir.path("sock"), dir.path("shm"), dir.path("pid"));
        let mut args = vec![
            "--socket",
            socket.to_str().unwrap(),
            "--shm",
            shm.to_str().unwrap(),
            "--pidfile",
            pidfile.to_str().unwrap(),
            "--verbose",
        ];
        args.extend(extra);
        let cmd = strace(strace_args, &args);
        // The server writes its pid file before it creates its socket.
        Server::spawn_command(cmd, socket.clone(), shm.clone()).with_pid_from(&pidfile)
    }

    /// Runs `cmd`, which must run the server on `socket` with its memory at
    /// `shm`, and waits for the socket.
    pub fn spawn_command(mut cmd: Command, socket: PathBuf, shm: PathBuf) -> Server {
        let stale = inode(&socket);
        // The log goes next to the socket and is shown if the test fails.
        let log = socket.with_extension("log");
        let child = cmd
            .stdin(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .expect("cannot run the server");
        let mut server = Server {
            pid: child.id(),
            child,
            socket,
            shm,
            log,
        };
        server.wait_ready(stale);
        server
    }

    fn with_pid_from(mut self, pidfile: &Path) -> Server {
        let text =
            fs::read_to_string(pidfile).unwrap_or_else(|e| panic!("{}: {e}", pidfile.display()));
        self.pid = text.trim().parse().expect("a pid in the pid file");
        self
    }

    /// Waits for a socket file other than the `stale` one.  The server
    /// creates it only once it listens, so that a client may connect as
    /// soon as the file is there, as QEMU started by a script does.
    fn wait_ready(&mut self, stale: Option<u64>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while inode(&self.socket).is_none() || inode(&self.socket) == stale {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("server exited early: {st}");
            }
            assert!(
                Instant::now() < deadline,
                "server did not create its socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.socket)
    }

    /// Sends `sig` and waits (at most 10 s) for the exit status (strace's
    /// is the server's).
    pub fn stop(&mut self, sig: i32) -> ExitStatus {
        // SAFETY: kill takes no pointers.  The pid is our child's, or that
        // of the server strace runs, whose pid stays its own until strace
        // reaps it (strace then exits: see the loop below).
        assert_eq!(unsafe { libc::kill(self.pid as i32, sig) }, 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "server ignored signal {sig}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child, self.pid);
        if std::thread::panicking() {
            let log = fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- server log ---\n{log}------------------");
        }
    }
}

/// The server with `args` under strace with `strace_args`; panics if strace
/// is not installed.
fn strace(strace_args: &[&str], args: &[&str]) -> Command {
    match Command::new("strace").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("strace -V failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            panic!("this test needs strace ({e}): apt-get install strace, or run scripts/deps.sh")
        }
    }
    let mut cmd = Command::new("strace");
    // -o: the trace goes nowhere; stderr is the server's own.
    cmd.args(["-f", "-qq", "-o", "/dev/null"])
        .args(strace_args)
        .arg("--")
        .arg(BIN)
        .args(args);
    cmd
}

/// Kills the server (SIGKILL) and reaps `child`: the server, or the strace
/// that runs it (`pid`: the server's if known, else `child`'s).  Under strace
/// the server is killed, not strace, which would leave it running untraced;
/// strace then exits.
fn kill_and_reap(child: &mut Child, pid: u32) {
    if child.try_wait().is_ok_and(|st| st.is_none()) {
        let mut pids = children(child.id());
        if pids.is_empty() {
            pids.push(pid);
        }
        for p in pids {
            // SAFETY: kill takes no pointers.  `p` is our running child or
            // one of its children, which only it reaps.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().is_ok_and(|st| st.is_none()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The children of process `pid` (for strace, the server it runs).
fn children(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn inode(path: &Path) -> Option<u64> {
    fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// Runs the server to completion (for option errors).
pub fn run(args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    run_command(cmd, args)
}

/// Runs the server with `args` under strace with `strace_args` (see
/// `Server::start_traced`) to completion.
pub fn run_traced(strace_args: &[&str], args: &[&str]) -> Output {
    run_command(strace(strace_args, args), args)
}

fn run_command(mut cmd: Command, args: &[&str]) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let pid = child.id();
            kill_and_reap(&mut child, pid);
            panic!("server {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// One protocol message: the value and the descriptor that came with it.
#[derive(Debug)]
pub struct Msg {
    pub value: i64,
    pub fd: Option<OwnedFd>,
}

/// A fake QEMU: a client socket and the messages it reads.
pub struct Client {
    pub stream: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> Client {
        let stream = UnixStream::connect(path).expect("cannot connect to the server");
        Client { stream }
    }

    /// The next message, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> io::Result<Msg> {
        self.stream.set_read_timeout(Some(timeout))?;
        let mut buf = [0u8; 8];
        let mut got = 0;
        let mut fd = None;
        while got < buf.len() {
            let (n, f) = recv_with_fd(self.stream.as_raw_fd(), &mut buf[got..])?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ));
            }
            if let Some(f) = f {
                assert!(fd.is_none(), "two descriptors in one message");
                fd = Some(f);
            }
            got += n;
        }
        Ok(Msg {
            value: i64::from_le_bytes(buf),
            fd,
        })
    }

    pub fn recv(&mut self) -> Msg {
        self.recv_timeout(Duration::from_secs(10))
            .expect("no message from the server")
    }

    /// The next message, which must be `value` without a descriptor.
    pub fn expect_plain(&mut self, value: i64) {
        let m = self.recv();
        assert_eq!(m.value, value, "unexpected message {m:?}");
        assert!(m.fd.is_none(), "message {value} came with a descriptor");
    }

    /// The next message, which must be `value` with a descriptor.
    pub fn expect_fd(&mut self, value: i64) -> OwnedFd {
        let m = self.recv();
        assert_eq!(m.value, value, "unexpected message {m:?}");
        m.fd.unwrap_or_else(|| panic!("message {value} came without a descriptor"))
    }

    /// `n` messages `value`, each with an eventfd: the vectors of one peer.
    pub fn expect_vectors(&mut self, value: i64, n: usize) -> Vec<OwnedFd> {
        (0..n)
            .map(|_| {
                let fd = self.expect_fd(value);
                assert_eq!(fd_kind(&fd), "anon_inode:[eventfd]");
                fd
            })
            .collect()
    }

    /// Version, id, shared memory: returns the id and the memory's descriptor.
    pub fn expect_greeting(&mut self) -> (i64, OwnedFd) {
        self.expect_plain(0);
        let id = self.recv();
        assert!(id.fd.is_none(), "the id came with a descriptor");
        assert!((0..=65535).contains(&id.value), "bad id {}", id.value);
        let shm = self.expect_fd(-1);
        (id.value, shm)
    }

    /// Nothing more arrives within a short while.
    pub fn expect_silence(&mut self) {
        match self.recv_timeout(Duration::from_millis(300)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => panic!("expected no message, got {other:?}"),
        }
    }

    /// The server closes the connection (with no further message).
    pub fn expect_eof(&mut self) {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => {}
            other => panic!("expected the connection to close, got {other:?}"),
        }
    }
}

/// recvmsg for up to buf.len() bytes with room for a few descriptors, all of
/// which are returned so that extra ones would be noticed.
fn recv_with_fd(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 8]>();
    // SAFETY: msg points at live buffers of the lengths it states.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    assert_eq!(
        msg.msg_flags & libc::MSG_CTRUNC,
        0,
        "control data truncated"
    );
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of
    // well-formed cmsg headers, which the CMSG_* macros walk; SCM_RIGHTS data
    // is an array of ints, now descriptors of this process that we own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    assert!(fds.len() <= 1, "{} descriptors in one message", fds.len());
    Ok((n as usize, fds.pop()))
}

/// What /proc says a descriptor is ("anon_inode:[eventfd]", a path, ...).
pub fn fd_kind(fd: &OwnedFd) -> String {
    fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .unwrap()
        .display()
        .to_string()
}

/// Rings a doorbell: adds 1 to an eventfd.
pub fn ring(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: `one` is 8 readable bytes.
    let n = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    assert_eq!(n, 8, "eventfd write: {}", io::Error::last_os_error());
}

/// Reads an eventfd's counter, waiting at most `timeout`; None if it stayed 0.
pub fn take(fd: &OwnedFd, timeout: Duration) -> Option<u64> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    assert!(r >= 0, "poll: {}", io::Error::last_os_error());
    if r == 0 {
        return None;
    }
    let mut v = [0u8; 8];
    // SAFETY: `v` is 8 writable bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    assert_eq!(n, 8, "eventfd read: {}", io::Error::last_os_error());
    Some(u64::from_ne_bytes(v))
}

/// The size of the file behind a descriptor.
pub fn fd_size(fd: &OwnedFd) -> u64 {
    // SAFETY: stat is plain data, filled by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is writable.
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }, 0);
    assert_eq!(
        st.st_mode & libc::S_IFMT,
        libc::S_IFREG,
        "not a regular file"
    );
    st.st_size as u64
}

/// A shared read-write mapping of a whole descriptor, unmapped on drop.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    pub fn new(fd: &OwnedFd) -> Mapping {
        let len = fd_size(fd) as usize;
        // SAFETY: a fresh shared mapping of a file we hold; no aliasing with
        // Rust objects.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(
            ptr,
            libc::MAP_FAILED,
            "mmap: {}",
            io::Error::last_os_error()
        );
        Mapping {
            ptr: ptr.cast(),
            len,
        }
    }

    /// Volatile, as another mapping (another "guest") may change the memory.
    pub fn write(&self, off: usize, bytes: &[u8]) {
        assert!(off + bytes.len() <= self.len);
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: in bounds of the mapping (checked above).
            unsafe { self.ptr.add(off + i).write_volatile(*b) };
        }
    }

    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        // SAFETY: in bounds of the mapping (checked above).
        (0..len)
            .map(|i| unsafe { self.ptr.add(off + i).read_volatile() })
            .collect()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), not used after this.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
