// SPDX-License-Identifier: GPL-2.0

//! af_sci: the `AF_SCI` socket family.
//!
//! `AF_SCI` stream sockets behave like TCP sockets and take `sockaddr_in`/`sockaddr_in6`
//! addresses; unmodified programs get them through a preload library that rewrites
//! `socket(AF_INET, SOCK_STREAM, 0)`. Each owns a native TCP socket that holds its port
//! and, when no SCI data path can serve the connection, carries its bytes.
//!
//! The layers are folders, each depending only on those below it (Documentation/af_sci.rst,
//! "The layers"; `selftests/hygiene/layers` checks it):
//!
//! - [`diag`]: the `af_sci` generic netlink family (`scictl`);
//! - [`socket`]: the family, its `proto_ops`, the `AF_SCI` socket and its native TCP
//!   socket, and the stack every socket reaches below it;
//! - [`control`]: the connection table, the handshake, the listener and connector
//!   kthreads;
//! - [`conn`]: one SCI connection: two queues, gathering, waiting;
//! - [`fabric`]: the remote-memory interconnect (loopback, ivshmem);
//! - [`config`]: the node map and port rules (beside the data path);
//! - [`proto`]: the I/O-free core (queues, frames, region, doorbells, connection state),
//!   the same code the host tests run;
//! - [`sys`]: bindings and kernel services, under all.
//!
//! This file owns the module's state: the stack, held by the two families it registers.

// `pin_init!` of `SciSock` (many fields) expands deeper than the default limit of 128.
#![recursion_limit = "256"]

mod config;
mod conn;
mod control;
mod diag;
mod fabric;
// The I/O-free protocol core, shared with the host crate `tools/sci-proto`. Parts of it
// are used only as the data path grows.
#[allow(dead_code)]
#[path = "proto/mod.rs"]
mod proto;
mod socket;
mod sys;

use kernel::prelude::*;
use kernel::sync::Arc;
use socket::adapter::Family;

module! {
    type: AfSci,
    name: "af_sci",
    author: "af_sci developers",
    description: "AF_SCI: TCP-compatible sockets over remote-memory message queues",
    license: "GPL",
}

/// The module: the socket family and the netlink family, registered over one stack
/// (the control plane with its fabric and kthreads, the node map, the socket registry),
/// which each holds a reference to, as does every socket.
struct AfSci {
    /// Dropped first: no netlink handler runs once it is unregistered.
    _netlink: diag::netlink::adapter::Family,
    /// Dropped next: unregisters the family (no socket is left: each holds a module
    /// reference); the stack goes with the last reference, stopping the kthreads and
    /// leaving the fabric.
    family: Pin<KBox<Family>>,
}

impl kernel::Module for AfSci {
    fn init(module: &'static ThisModule) -> Result<Self> {
        // Load-time parameters, read once (the ones a running module reads where it
        // uses them are documented in `sys::params`).
        let params = sys::params::fabric_params();
        if sys::params::fabric_selftest_requested() {
            fabric::queue_selftest::run()?;
            fabric::ivshmem::region_selftest::run(&params)?;
        }
        let stack = Arc::pin_init(socket::stack::Stack::new(&params)?, GFP_KERNEL)?;
        let number = Family::requested_number();
        let family = Family::register(number, module, stack.clone())?;
        let netlink = match diag::netlink::adapter::Family::register(stack.clone()) {
            Ok(netlink) => netlink,
            Err(e) => {
                pr_err!(
                    "cannot register the generic netlink family af_sci: {:?}\n",
                    e
                );
                return Err(e);
            }
        };
        pr_info!(
            "registered address family {} (fabric: {})\n",
            number,
            stack.plane.fabric().name()
        );
        Ok(AfSci {
            _netlink: netlink,
            family,
        })
    }
}

impl Drop for AfSci {
    fn drop(&mut self) {
        pr_info!("unregistering address family {}\n", self.family.number());
        // No socket is left (each holds a module reference), so no buffer is lent any
        // more; one a kernel reader still keeps has its completion in this module.
        sys::read_actor::drain_lends();
    }
}
