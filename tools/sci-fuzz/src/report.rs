//! What a run counted: calls per syscall, errors per errno name, hangs and anomalies.
//!
//! Worker threads count into a [`Counts`] (arrays, no allocation per call); each worker
//! process merges its threads' counts into a [`Report`] and writes it to the parent as
//! text ([`Report::to_text`]), which parses and merges them ([`Report::parse`],
//! [`Report::merge`]) and prints the sum ([`Report::print`]).

use std::collections::BTreeMap;

/// The syscalls the fuzzer makes, as counted and printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Call {
    None = 0,
    Socket,
    Socketpair,
    Bind,
    Listen,
    Connect,
    Accept4,
    Sendmsg,
    Recvmsg,
    Sendto,
    Recvfrom,
    Sendmmsg,
    Recvmmsg,
    Sendfile,
    Splice,
    Setsockopt,
    Getsockopt,
    Ioctl,
    Shutdown,
    Getsockname,
    Getpeername,
    Poll,
    EpollCreate1,
    EpollCtl,
    EpollWait,
    Fork,
    ForkWait,
    Dup,
    Dup2,
    Dup3,
    Close,
    Fcntl,
    Read,
    Write,
    Readv,
    Writev,
    Pipe2,
}

pub const CALLS: usize = Call::Pipe2 as usize + 1;

impl Call {
    pub const ALL: [Call; CALLS] = [
        Call::None,
        Call::Socket,
        Call::Socketpair,
        Call::Bind,
        Call::Listen,
        Call::Connect,
        Call::Accept4,
        Call::Sendmsg,
        Call::Recvmsg,
        Call::Sendto,
        Call::Recvfrom,
        Call::Sendmmsg,
        Call::Recvmmsg,
        Call::Sendfile,
        Call::Splice,
        Call::Setsockopt,
        Call::Getsockopt,
        Call::Ioctl,
        Call::Shutdown,
        Call::Getsockname,
        Call::Getpeername,
        Call::Poll,
        Call::EpollCreate1,
        Call::EpollCtl,
        Call::EpollWait,
        Call::Fork,
        Call::ForkWait,
        Call::Dup,
        Call::Dup2,
        Call::Dup3,
        Call::Close,
        Call::Fcntl,
        Call::Read,
        Call::Write,
        Call::Readv,
        Call::Writev,
        Call::Pipe2,
    ];

    /// Which of the call's arguments are descriptors (named in an anomaly's report).
    pub fn fd_args(self) -> &'static [usize] {
        match self {
            Call::None
            | Call::Socket
            | Call::Socketpair
            | Call::Poll
            | Call::EpollCreate1
            | Call::Fork
            | Call::ForkWait
            | Call::Pipe2 => &[],
            Call::Sendfile | Call::Dup2 | Call::Dup3 => &[0, 1],
            Call::Splice | Call::EpollCtl => &[0, 2],
            _ => &[0],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Call::None => "none",
            Call::Socket => "socket",
            Call::Socketpair => "socketpair",
            Call::Bind => "bind",
            Call::Listen => "listen",
            Call::Connect => "connect",
            Call::Accept4 => "accept4",
            Call::Sendmsg => "sendmsg",
            Call::Recvmsg => "recvmsg",
            Call::Sendto => "sendto",
            Call::Recvfrom => "recvfrom",
            Call::Sendmmsg => "sendmmsg",
            Call::Recvmmsg => "recvmmsg",
            Call::Sendfile => "sendfile",
            Call::Splice => "splice",
            Call::Setsockopt => "setsockopt",
            Call::Getsockopt => "getsockopt",
            Call::Ioctl => "ioctl",
            Call::Shutdown => "shutdown",
            Call::Getsockname => "getsockname",
            Call::Getpeername => "getpeername",
            Call::Poll => "poll",
            Call::EpollCreate1 => "epoll_create1",
            Call::EpollCtl => "epoll_ctl",
            Call::EpollWait => "epoll_wait",
            Call::Fork => "fork",
            Call::ForkWait => "wait4",
            Call::Dup => "dup",
            Call::Dup2 => "dup2",
            Call::Dup3 => "dup3",
            Call::Close => "close",
            Call::Fcntl => "fcntl",
            Call::Read => "read",
            Call::Write => "write",
            Call::Readv => "readv",
            Call::Writev => "writev",
            Call::Pipe2 => "pipe2",
        }
    }

    pub fn from_u32(v: u32) -> Call {
        Call::ALL.get(v as usize).copied().unwrap_or(Call::None)
    }
}

/// errno values counted by number up to this; larger ones are counted as one bucket.
pub const ERRNOS: usize = 600;

/// Per-thread counters: cheap to bump on every call.
pub struct Counts {
    pub calls: [u64; CALLS],
    pub errors: [u64; CALLS],
    pub errnos: [u64; ERRNOS],
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            calls: [0; CALLS],
            errors: [0; CALLS],
            errnos: [0; ERRNOS],
        }
    }
}

impl Counts {
    pub fn count(&mut self, call: Call, errno: Option<i32>) {
        self.calls[call as usize] += 1;
        if let Some(e) = errno {
            self.errors[call as usize] += 1;
            let i = if e > 0 && (e as usize) < ERRNOS {
                e as usize
            } else {
                0
            };
            self.errnos[i] += 1;
        }
    }

    pub fn to_report(&self) -> Report {
        let mut r = Report::default();
        for c in Call::ALL {
            let (n, e) = (self.calls[c as usize], self.errors[c as usize]);
            if n > 0 {
                r.calls.insert(c.name().to_string(), (n, e));
            }
        }
        for (i, &n) in self.errnos.iter().enumerate() {
            if n > 0 {
                r.errnos.insert(errno_name(i as i32), n);
            }
        }
        r
    }
}

/// A run's (or one worker's) results, mergeable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// syscall name -> (calls, errors)
    pub calls: BTreeMap<String, (u64, u64)>,
    /// errno name -> errors
    pub errnos: BTreeMap<String, u64>,
    /// Free-form counters (peers' connections, fork children, ...): name -> count.
    pub notes: BTreeMap<String, u64>,
    /// Things that must not happen (a kernel-internal errno reaching user space, a call
    /// returning more than it was asked for), one line each.
    pub anomalies: Vec<String>,
    /// Hung calls reported by a worker's watchdog, one line each.
    pub hangs: Vec<String>,
}

impl Report {
    pub fn total_calls(&self) -> u64 {
        self.calls.values().map(|&(n, _)| n).sum()
    }

    pub fn total_errors(&self) -> u64 {
        self.calls.values().map(|&(_, e)| e).sum()
    }

    pub fn note(&mut self, name: &str, n: u64) {
        *self.notes.entry(name.to_string()).or_insert(0) += n;
    }

    pub fn merge(&mut self, other: &Report) {
        for (k, &(n, e)) in &other.calls {
            let v = self.calls.entry(k.clone()).or_insert((0, 0));
            v.0 += n;
            v.1 += e;
        }
        for (k, &n) in &other.errnos {
            *self.errnos.entry(k.clone()).or_insert(0) += n;
        }
        for (k, &n) in &other.notes {
            *self.notes.entry(k.clone()).or_insert(0) += n;
        }
        self.anomalies.extend(other.anomalies.iter().cloned());
        self.hangs.extend(other.hangs.iter().cloned());
    }

    /// The line format a worker sends its parent (one record per line).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (k, (n, e)) in &self.calls {
            s += &format!("call {k} {n} {e}\n");
        }
        for (k, n) in &self.errnos {
            s += &format!("errno {k} {n}\n");
        }
        for (k, n) in &self.notes {
            s += &format!("note {k} {n}\n");
        }
        for a in &self.anomalies {
            s += &format!("anomaly {}\n", a.replace('\n', " "));
        }
        for h in &self.hangs {
            s += &format!("hang {}\n", h.replace('\n', " "));
        }
        s
    }

    /// Parses [`Report::to_text`]'s format; lines it does not know are skipped.
    pub fn parse(text: &str) -> Report {
        let mut r = Report::default();
        for line in text.lines() {
            let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
            let f: Vec<&str> = rest.split(' ').collect();
            let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
            match kind {
                "call" => {
                    if let (Some(n), Some(e)) = (num(1), num(2)) {
                        let v = r.calls.entry(f[0].to_string()).or_insert((0, 0));
                        v.0 += n;
                        v.1 += e;
                    }
                }
                "errno" => {
                    if let Some(n) = num(1) {
                        *r.errnos.entry(f[0].to_string()).or_insert(0) += n;
                    }
                }
                "note" => {
                    if let Some(n) = num(1) {
                        *r.notes.entry(f[0].to_string()).or_insert(0) += n;
                    }
                }
                "anomaly" => r.anomalies.push(rest.to_string()),
                "hang" => r.hangs.push(rest.to_string()),
                _ => {}
            }
        }
        r
    }

    /// The report for people and greps: "sci-fuzz: call NAME N calls M errors",
    /// "sci-fuzz: errno NAME N", "sci-fuzz: note NAME N", anomalies and hangs.
    pub fn print(&self) {
        for (k, (n, e)) in &self.calls {
            println!("sci-fuzz: call {k:<14} {n:>9} calls {e:>9} errors");
        }
        let mut by_count: Vec<(&String, &u64)> = self.errnos.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (k, n) in by_count {
            println!("sci-fuzz: errno {k:<16} {n:>9}");
        }
        for (k, n) in &self.notes {
            println!("sci-fuzz: note {k} {n}");
        }
        for a in &self.anomalies {
            println!("sci-fuzz: ANOMALY {a}");
        }
        for h in &self.hangs {
            println!("sci-fuzz: HANG {h}");
        }
    }
}

/// The symbolic name of an errno value ("EINVAL"), "E<n>" for others; the kernel's
/// internal values (512 and up) by their kernel names, as they must never reach user space.
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EPIPE => "EPIPE",
        libc::EDOM => "EDOM",
        libc::ERANGE => "ERANGE",
        libc::EDEADLK => "EDEADLK",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENOMSG => "ENOMSG",
        libc::ENOSTR => "ENOSTR",
        libc::ENODATA => "ENODATA",
        libc::ETIME => "ETIME",
        libc::EPROTO => "EPROTO",
        libc::EBADMSG => "EBADMSG",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EBADFD => "EBADFD",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EPROTOTYPE => "EPROTOTYPE",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EPFNOSUPPORT => "EPFNOSUPPORT",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENETRESET => "ENETRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ENOBUFS => "ENOBUFS",
        libc::EISCONN => "EISCONN",
        libc::ENOTCONN => "ENOTCONN",
        libc::ESHUTDOWN => "ESHUTDOWN",
        libc::ETOOMANYREFS => "ETOOMANYREFS",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTDOWN => "EHOSTDOWN",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::ESTALE => "ESTALE",
        libc::EDQUOT => "EDQUOT",
        libc::ECANCELED => "ECANCELED",
        libc::EKEYREJECTED => "EKEYREJECTED",
        libc::EOWNERDEAD => "EOWNERDEAD",
        libc::ERFKILL => "ERFKILL",
        libc::EHWPOISON => "EHWPOISON",
        512 => "ERESTARTSYS",
        513 => "ERESTARTNOINTR",
        514 => "ERESTARTNOHAND",
        515 => "ENOIOCTLCMD",
        516 => "ERESTART_RESTARTBLOCK",
        517 => "EPROBE_DEFER",
        518 => "EOPENSTALE",
        519 => "ENOPARAM",
        521 => "EBADHANDLE",
        524 => "ENOTSUPP",
        526 => "EIOCBQUEUED",
        528 => "ERECALLCONFLICT",
        529 => "ENOGRACE",
        0 => "E?",
        _ => return format!("E{e}"),
    };
    name.to_string()
}

/// Whether an errno value is one of the kernel's internal ones (never for user space).
pub fn is_kernel_internal(e: i32) -> bool {
    (512..4096).contains(&e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_to_report() {
        let mut c = Counts::default();
        c.count(Call::Connect, None);
        c.count(Call::Connect, Some(libc::EINVAL));
        c.count(Call::Bind, Some(libc::EFAULT));
        let r = c.to_report();
        assert_eq!(r.calls["connect"], (2, 1));
        assert_eq!(r.calls["bind"], (1, 1));
        assert_eq!(r.errnos["EINVAL"], 1);
        assert_eq!(r.errnos["EFAULT"], 1);
        assert_eq!(r.total_calls(), 3);
        assert_eq!(r.total_errors(), 2);
    }

    #[test]
    fn text_round_trip() {
        let mut r = Report::default();
        r.calls.insert("sendmsg".into(), (10, 3));
        r.errnos.insert("EAGAIN".into(), 3);
        r.note("peer-accepted", 7);
        r.anomalies.push("recvfrom returned 99 > 10".into());
        r.hangs.push("worker 1 hung in connect for 30 s".into());
        assert_eq!(Report::parse(&r.to_text()), r);
    }

    #[test]
    fn merging_sums_everything() {
        let mut a = Report::default();
        a.calls.insert("connect".into(), (5, 2));
        a.errnos.insert("EINVAL".into(), 2);
        a.note("fork-children", 1);
        let mut b = Report::default();
        b.calls.insert("connect".into(), (1, 1));
        b.calls.insert("bind".into(), (4, 0));
        b.errnos.insert("EINVAL".into(), 1);
        b.errnos.insert("EFAULT".into(), 0);
        b.note("fork-children", 2);
        b.anomalies.push("x".into());
        let mut m = Report::default();
        m.merge(&Report::parse(&a.to_text()));
        m.merge(&Report::parse(&b.to_text()));
        assert_eq!(m.calls["connect"], (6, 3));
        assert_eq!(m.calls["bind"], (4, 0));
        assert_eq!(m.errnos["EINVAL"], 3);
        assert_eq!(m.notes["fork-children"], 3);
        assert_eq!(m.anomalies, vec!["x".to_string()]);
        assert_eq!(m.total_calls(), 10);
        assert_eq!(m.total_errors(), 3);
        // Merging is order-independent.
        let mut n = b.clone();
        n.merge(&a);
        assert_eq!(n.calls, m.calls);
        assert_eq!(n.errnos, m.errnos);
        // Text of a partial or garbled report is skipped line by line.
        let p = Report::parse("call connect 1 0\ncall bind x y\ngarbage\nerrno EBADF 2\n");
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.errnos["EBADF"], 2);
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::EINVAL), "EINVAL");
        assert_eq!(errno_name(libc::EWOULDBLOCK), "EAGAIN");
        assert_eq!(errno_name(515), "ENOIOCTLCMD");
        assert_eq!(errno_name(4000), "E4000");
        assert!(is_kernel_internal(512) && !is_kernel_internal(libc::EHWPOISON));
        for c in Call::ALL {
            assert_eq!(Call::from_u32(c as u32), c);
        }
    }
}
