//! The server: accepts clients, hands out ids, the shared memory and the
//! eventfds, and announces arrivals and departures, in the order of QEMU's
//! contrib/ivshmem-server (see `add`).
//!
//! Single-threaded: one poll() over the signal descriptor, the listening
//! socket and the clients.  Clients never send anything, so any input or
//! hang-up on a client socket is its disconnection.

use crate::listener::Listener;
use crate::peer::Peer;
use crate::protocol::{self, SHM, VERSION};
use crate::shm::{Mapping, SharedMemory};
use crate::signals;
use sci_proto::manager::{fence_departed, NotFenced};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

pub struct Server {
    listener: Listener,
    shm: SharedMemory,
    /// The region, to fence departed guests' af_sci nodes (see `fence`).
    region: Mapping,
    vectors: u16,
    max_peers: u32,
    verbose: bool,
    peers: BTreeMap<u16, Peer>,
    /// Where the search for the next id starts: after the last one given.
    next_id: u16,
    /// Saying goodbye to every client: departures are not fenced.
    shutting_down: bool,
}

/// The first id from `next` on (wrapping at 65536) that no peer holds, as in
/// QEMU's contrib server.  Ids of departed peers are not handed out again
/// soon on purpose: QEMU's ivshmem device (7.2 and later) frees a departed
/// peer's eventfd array without forgetting it, so a newcomer with that id
/// makes every other QEMU write freed memory and abort ("malloc(): unaligned
/// tcache chunk detected" when a restarted guest got its old id back).
fn next_free_id<V>(peers: &BTreeMap<u16, V>, next: u16) -> Option<u16> {
    (0..=u16::MAX)
        .map(|i| next.wrapping_add(i))
        .find(|id| !peers.contains_key(id))
}

impl Server {
    pub fn new(
        listener: Listener,
        shm: SharedMemory,
        vectors: u16,
        max_peers: u32,
        verbose: bool,
    ) -> io::Result<Self> {
        let region = shm
            .map()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot map the shared memory: {e}")))?;
        Ok(Server {
            listener,
            shm,
            region,
            vectors,
            max_peers,
            verbose,
            peers: BTreeMap::new(),
            next_id: 0,
            shutting_down: false,
        })
    }

    fn log(&self, msg: std::fmt::Arguments<'_>) {
        if self.verbose {
            eprintln!("ivshmem-server: {msg}");
        }
    }

    /// Serves until a termination signal arrives; then says goodbye to the
    /// clients (disconnect notifications, as QEMU's server does on exit).
    pub fn run(&mut self, stop: &OwnedFd) -> io::Result<()> {
        loop {
            let mut fds = vec![
                pollfd(stop.as_raw_fd()),
                pollfd(self.listener.socket.as_raw_fd()),
            ];
            let ids: Vec<u16> = self.peers.keys().copied().collect();
            fds.extend(self.peers.values().map(|p| pollfd(p.stream.as_raw_fd())));
            // SAFETY: `fds` is a live array of fds.len() pollfd structures.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                let sig = signals::read(stop)?;
                self.log(format_args!("signal {sig}, shutting down"));
                break;
            }
            // Departures first, so that their places count as free for newcomers
            // (--max-peers).
            for (id, fd) in ids.iter().zip(&fds[2..]) {
                if fd.revents != 0 {
                    self.remove(*id);
                }
            }
            if fds[1].revents != 0 {
                self.accept()?;
            }
        }
        // The guests may outlive the server: their nodes stay up.
        self.shutting_down = true;
        let ids: Vec<u16> = self.peers.keys().copied().collect();
        for id in ids {
            self.remove(id);
        }
        Ok(())
    }

    fn accept(&mut self) -> io::Result<()> {
        loop {
            let stream = match self.listener.socket.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ECONNABORTED | libc::EINTR)) => {
                    continue
                }
                // Out of descriptors or memory: refuse this one, keep serving.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
                    ) =>
                {
                    eprintln!("ivshmem-server: cannot accept a client: {e}");
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if self.peers.len() >= self.max_peers as usize {
                eprintln!(
                    "ivshmem-server: refusing a client: {} peers already (--max-peers)",
                    self.peers.len()
                );
                continue;
            }
            let Some(id) = next_free_id(&self.peers, self.next_id) else {
                eprintln!("ivshmem-server: refusing a client: no free peer id");
                continue;
            };
            self.next_id = id.wrapping_add(1);
            if let Err(e) = self.add(id, stream) {
                eprintln!("ivshmem-server: peer {id}: {e}");
            }
        }
    }

    /// The connect sequence of docs/specs/ivshmem-spec.rst:
    /// 1-3: version, the new peer's id, -1 with the shared memory;
    /// then every existing peer learns the new id with its eventfds (one
    /// message per vector), the new peer learns every existing peer's id
    /// with theirs, and last the new peer gets its own id with its own
    /// eventfds ("interrupt setup").
    fn add(&mut self, id: u16, stream: UnixStream) -> io::Result<()> {
        let peer = Peer::new(id, stream, self.vectors)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create eventfds: {e}")))?;
        protocol::send(&peer.stream, VERSION, None)?;
        protocol::send(&peer.stream, id.into(), None)?;
        protocol::send(&peer.stream, SHM, Some(self.shm.fd()))?;

        let mut broken = Vec::new();
        for other in self.peers.values() {
            for fd in &peer.vectors {
                if protocol::send(&other.stream, id.into(), Some(fd.as_fd())).is_err() {
                    broken.push(other.id);
                    break;
                }
            }
        }
        let mut result = Ok(());
        'others: for other in self.peers.values() {
            for fd in &other.vectors {
                result = protocol::send(&peer.stream, other.id.into(), Some(fd.as_fd()));
                if result.is_err() {
                    break 'others;
                }
            }
        }
        if result.is_ok() {
            for fd in &peer.vectors {
                result = protocol::send(&peer.stream, id.into(), Some(fd.as_fd()));
                if result.is_err() {
                    break;
                }
            }
        }
        // In the table before any removal, so that a failed newcomer's
        // departure is announced to those who were told of its arrival.
        self.peers.insert(id, peer);
        self.log(format_args!(
            "peer {id} connected ({} peers)",
            self.peers.len()
        ));
        for other in broken {
            self.log(format_args!("peer {other} does not take messages"));
            self.remove(other);
        }
        if result.is_err() {
            self.remove(id);
        }
        result
    }

    /// A guest's QEMU went away (its socket closed): if that guest was an af_sci node
    /// in the region, mark it down now, so that the other guests reset their
    /// connections to it at their next tick rather than after the heartbeat timeout
    /// (Documentation/af_sci.rst, "the fabric manager").
    fn fence(&self, id: u16) {
        let result = fence_departed(self.region.words(), id, |f| {
            eprintln!(
                "ivshmem-server: peer {id} departed: af_sci node {} (generation {}) marked down",
                f.node, f.generation
            );
        });
        match result {
            Ok(()) | Err(NotFenced::Blank) => {}
            Err(NotFenced::Unusable) => self.log(format_args!(
                "peer {id} departed; the region is not in a format this server knows, left as is"
            )),
        }
    }

    /// Drops a peer and tells the others (its id without a descriptor).
    /// A peer that cannot be told is dropped in turn. Each departure is fenced first,
    /// unless the server is shutting down.
    fn remove(&mut self, id: u16) {
        let mut gone = vec![id];
        while let Some(id) = gone.pop() {
            let Some(peer) = self.peers.remove(&id) else {
                continue;
            };
            if !self.shutting_down {
                self.fence(id);
            }
            drop(peer);
            self.log(format_args!(
                "peer {id} disconnected ({} peers)",
                self.peers.len()
            ));
            for other in self.peers.values() {
                if protocol::send(&other.stream, id.into(), None).is_err() {
                    gone.push(other.id);
                }
            }
        }
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::next_free_id;
    use std::collections::BTreeMap;

    #[test]
    fn ids_count_up_skip_those_in_use_and_wrap() {
        let mut m = BTreeMap::new();
        assert_eq!(next_free_id(&m, 0), Some(0));
        m.extend([(0, ()), (1, ()), (3, ())]);
        assert_eq!(next_free_id(&m, 2), Some(2));
        assert_eq!(next_free_id(&m, 3), Some(4));
        m.remove(&1);
        assert_eq!(
            next_free_id(&m, 4),
            Some(4),
            "a departed peer's id is not reused first"
        );
        m.insert(u16::MAX, ());
        assert_eq!(next_free_id(&m, u16::MAX), Some(1), "wraps past 65535");
        let full: BTreeMap<u16, ()> = (0..=u16::MAX).map(|i| (i, ())).collect();
        assert_eq!(next_free_id(&full, 7), None);
    }
}
