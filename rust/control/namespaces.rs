// SPDX-License-Identifier: GPL-2.0

//! The network namespaces that publish their addresses in the fabric beside the initial
//! one, and which namespace serves a request from another node.
//!
//! A request from another node cannot name a namespace of this node (cookies are this
//! kernel's), so the destination address decides, as it does for an IP packet: a
//! request for an address of the initial namespace's interfaces, or of no publishing
//! namespace's, is served in the initial namespace (as before namespaces published); one
//! for an address that a publishing namespace holds is served in that namespace. Nothing
//! else reaches a namespace from another node: one that does not publish is as closed to
//! SCI requests as it was.
//!
//! A namespace opts in from inside itself (`scictl publish on`, `SCI_CMD_PUBLISH_SET`),
//! with `CAP_NET_ADMIN` in the initial user namespace: what a node publishes, its peers
//! trust (with no node map loaded), so the node's administrator decides, not a
//! container's root. The set holds cookies, not references: a namespace that goes away
//! is not kept alive by it, and drops out at the next look (cookies are never reused).

use crate::config::rules::Ip;
use crate::sys::net::{net_addrs, net_holds_addr};
use kernel::prelude::*;
use kernel::sync::SpinLock;

/// How many namespaces can publish their addresses at once, besides the initial one
/// (`SCI_PUBLISH_NETNS_MAX`).
pub(crate) const MAX_PUBLISHING: usize = 16;

/// The cookie that names the initial namespace (in requests and here).
const INITIAL: u64 = 0;

/// The namespaces that publish their addresses (see the module doc).
#[pin_data]
pub(crate) struct Publishing {
    /// Their cookies; 0 is a free entry.
    #[pin]
    cookies: SpinLock<[u64; MAX_PUBLISHING]>,
}

/// Why a namespace could not start publishing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PublishError {
    /// It is the initial namespace, which always publishes.
    Initial,
    /// [`MAX_PUBLISHING`] namespaces already do.
    Full,
}

impl Publishing {
    /// None publishes yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            cookies <- kernel::new_spinlock!([0; MAX_PUBLISHING], "control::Publishing"),
        })
    }

    /// Makes the namespace `cookie` (`init`: the initial one) publish its addresses, or
    /// (`on` false) stop.
    pub(crate) fn set(&self, cookie: u64, init: bool, on: bool) -> Result<(), PublishError> {
        if init {
            return if on {
                Ok(())
            } else {
                Err(PublishError::Initial)
            };
        }
        if !on {
            self.forget(cookie);
            return Ok(());
        }
        let cookies = self.snapshot();
        if !cookies.contains(&0) && !cookies.contains(&cookie) {
            // Full: make room of namespaces that went away since the last look.
            for c in cookies {
                if net_addrs(c, &mut []).is_none() {
                    self.forget(c);
                }
            }
        }
        let mut g = self.cookies.lock();
        if g.contains(&cookie) {
            return Ok(());
        }
        let free = g.iter_mut().find(|c| **c == 0).ok_or(PublishError::Full)?;
        *free = cookie;
        Ok(())
    }

    /// Whether the namespace `cookie` (`init`: the initial one) publishes its addresses.
    pub(crate) fn publishes(&self, cookie: u64, init: bool) -> bool {
        init || self.cookies.lock().contains(&cookie)
    }

    /// The publishing namespaces' cookies, taken out of the lock (the lookups below
    /// walk the kernel's namespaces).
    fn snapshot(&self) -> [u64; MAX_PUBLISHING] {
        *self.cookies.lock()
    }

    /// Forgets a namespace (it is gone, or stops publishing).
    fn forget(&self, cookie: u64) {
        let mut g = self.cookies.lock();
        if let Some(c) = g.iter_mut().find(|c| **c == cookie) {
            *c = 0;
        }
    }

    /// This node's addresses to publish into `out`: the initial namespace's, then each
    /// publishing namespace's; how many.
    pub(crate) fn addresses(&self, out: &mut [[u8; 16]]) -> usize {
        let mut n = net_addrs(INITIAL, out).unwrap_or(0);
        for cookie in self.snapshot().into_iter().filter(|&c| c != 0) {
            let Some(rest) = out.get_mut(n..) else { break };
            match net_addrs(cookie, rest) {
                Some(k) => n = n.saturating_add(k),
                None => self.forget(cookie),
            }
        }
        n
    }

    /// The namespace a request from another node for `dest` is served in: the publishing
    /// namespace that holds `dest`, unless the initial one does (its cookie; the initial
    /// namespace is [`INITIAL`]).
    pub(crate) fn serving(&self, dest: Ip) -> u64 {
        let cookies = self.snapshot();
        if cookies.iter().all(|&c| c == 0) {
            return INITIAL;
        }
        let a = dest.v6_bytes();
        if net_holds_addr(INITIAL, a) == Some(true) {
            return INITIAL;
        }
        cookies
            .into_iter()
            .filter(|&c| c != 0)
            .find(|&c| net_holds_addr(c, a) == Some(true))
            .unwrap_or(INITIAL)
    }
}
