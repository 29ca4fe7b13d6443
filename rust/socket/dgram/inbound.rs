// SPDX-License-Identifier: GPL-2.0

//! The implicit connections a datagram socket takes datagrams from, packed at the front of
//! a fixed array: a read (one per datagram) looks at the connections there are, in turn,
//! instead of walking every slot the socket could have.

use crate::conn::Conn;
use kernel::sync::Arc;

/// Peers a socket takes datagrams from over SCI at once (others' requests are refused).
pub(super) const MAX_IN: usize = 64;

/// The inbound connections of one socket (under its endpoint's lock).
pub(super) struct Inbound {
    /// The first `len` slots hold one connection each; the rest are empty.
    conns: [Option<Arc<Conn>>; MAX_IN],
    len: usize,
    /// Where the next read starts looking (round robin over the peers): an index below
    /// `len`, or 0.
    next: usize,
}

impl Inbound {
    /// No connection.
    pub(super) const fn new() -> Self {
        Self {
            conns: [const { None }; MAX_IN],
            len: 0,
            next: 0,
        }
    }

    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether there is none.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each connection, from slot 0.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<Conn>> {
        self.conns[..self.len].iter().flatten()
    }

    /// Adds `conn`, or gives it back when the socket has [`MAX_IN`] already.
    pub(super) fn push(&mut self, conn: Arc<Conn>) -> Result<(), Arc<Conn>> {
        match self.conns.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(conn);
                self.len += 1;
                Ok(())
            }
            None => Err(conn),
        }
    }

    /// The connection `k` places after where the next read starts, if there are more
    /// than `k` (a reference, to be looked at outside the lock).
    pub(super) fn nth_in_turn(&self, k: usize) -> Option<Arc<Conn>> {
        if k >= self.len {
            return None;
        }
        self.conns[(self.next + k) % self.len].clone()
    }

    /// A read took a datagram from `conn` (`peek`: peeked at it): the next read starts
    /// after it, or at it after a peek, so that it returns the datagram peeked at.
    pub(super) fn read_from(&mut self, conn: &Arc<Conn>, peek: bool) {
        if let Some(i) = self.position(conn) {
            self.next = if peek { i } else { (i + 1) % self.len };
        }
    }

    /// Where the next read starts: there is the datagram a read peeked at last.
    pub(super) fn next(&self) -> usize {
        self.next
    }

    /// Takes `conn` out, if it is here.
    pub(super) fn take(&mut self, conn: &Arc<Conn>) -> Option<Arc<Conn>> {
        let i = self.position(conn)?;
        self.remove(i)
    }

    /// Takes out every connection `pick` picks, handing each to `taken`.
    pub(super) fn take_where(
        &mut self,
        mut pick: impl FnMut(&Conn) -> bool,
        mut taken: impl FnMut(Arc<Conn>),
    ) {
        let mut i = 0;
        while i < self.len {
            if self.conns[i].as_deref().is_some_and(&mut pick) {
                if let Some(c) = self.remove(i) {
                    taken(c);
                }
                // The last connection moved into slot `i`: look at it next.
            } else {
                i += 1;
            }
        }
    }

    /// Puts a reference to each connection into `out`, from slot 0 (to be looked at
    /// outside the lock), as many as fit (all of them in [`MAX_IN`] slots); returns how
    /// many.
    pub(super) fn clone_into(&self, out: &mut [Option<Arc<Conn>>]) -> usize {
        let mut n = 0;
        for (o, c) in out.iter_mut().zip(self.iter()) {
            *o = Some(c.clone());
            n += 1;
        }
        n
    }

    /// The slot that holds `conn`.
    fn position(&self, conn: &Arc<Conn>) -> Option<usize> {
        self.conns[..self.len]
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)))
    }

    /// Takes out the connection in slot `i`; the last one moves into its slot, and where
    /// the next read starts follows it.
    fn remove(&mut self, i: usize) -> Option<Arc<Conn>> {
        if i >= self.len {
            return None;
        }
        let last = self.len - 1;
        self.conns.swap(i, last);
        let c = self.conns[last].take();
        self.len = last;
        if self.next == last {
            self.next = i;
        }
        if self.next >= self.len {
            self.next = 0;
        }
        c
    }
}
