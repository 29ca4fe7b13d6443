// SPDX-License-Identifier: GPL-2.0

//! af_sci: the `AF_SCI` socket family.
//!
//! `AF_SCI` stream sockets behave like TCP sockets and take `sockaddr_in`/`sockaddr_in6`
//! addresses; unmodified programs get them through a preload library that rewrites
//! `socket(AF_INET, SOCK_STREAM, 0)`. Each owns a native TCP socket that holds its port
//! and, when no SCI data path can serve the connection, carries its bytes.
//!
//! Files: `socket_adapter.rs` (family registration and `proto_ops`), `sci_sock.rs` (the
//! socket), `native.rs` (the native TCP socket), `handover.rs` (a fallen-back socket's file
//! goes straight to its native socket), `node_map.rs` + `config/rules.rs` (the
//! connect-time decision), `sockets.rs` (module-wide state, socket registry, counters),
//! `netlink.rs` + `netlink_adapter.rs` (the `af_sci` generic netlink family),
//! `control.rs` + `connector.rs` + `sci_conn.rs` + `conn_addr.rs` + `fabric/` + `proto/`
//! (the SCI data path),
//! `bindings.rs` + `shim.c` + `genl.c` (C glue).

// `pin_init!` of `SciSock` (many fields) expands deeper than the default limit of 128.
#![recursion_limit = "256"]

mod bindings;
mod conn_addr;
mod connector;
mod control;
mod fabric;
mod global;
mod handover;
mod kthread;
mod native;
mod netlink;
mod netlink_adapter;
mod node_map;
mod own_sk;
mod pci;
// The I/O-free protocol core, shared with the host crate `tools/sci-proto`. Parts of it
// are used only as the data path grows.
#[allow(dead_code)]
#[path = "proto/mod.rs"]
mod proto;
mod sci_conn;
mod sci_sock;
mod socket_adapter;
mod sockets;

use kernel::prelude::*;
use socket_adapter::Family;

module! {
    type: AfSci,
    name: "af_sci",
    author: "af_sci developers",
    description: "AF_SCI: TCP-compatible sockets over remote-memory message queues",
    license: "GPL",
}

struct AfSci {
    /// Dropped first: its handlers use the module-wide state `family` owns.
    _netlink: netlink_adapter::Family,
    /// Dropped next: stops the listener and connector kthreads.
    _threads: (kthread::KThread, kthread::KThread),
    family: Pin<KBox<Family>>,
    _plane: InstalledPlane,
}

impl kernel::Module for AfSci {
    fn init(module: &'static ThisModule) -> Result<Self> {
        if own_sk::fabric_selftest_requested() {
            fabric::selftest::run()?;
        }
        let plane = KBox::pin_init(control::ControlPlane::new()?, GFP_KERNEL)?;
        global::install(&plane);
        let plane = InstalledPlane(plane);
        let threads = control::ControlPlane::start_threads()?;
        let number = Family::requested_number();
        let family = match Family::register(number, module) {
            Ok(family) => family,
            Err(e) => {
                drop(threads);
                return Err(e);
            }
        };
        let netlink = match netlink_adapter::Family::register() {
            Ok(netlink) => netlink,
            Err(e) => {
                pr_err!(
                    "cannot register the generic netlink family af_sci: {:?}\n",
                    e
                );
                drop(threads);
                drop(family);
                return Err(e);
            }
        };
        pr_info!(
            "registered address family {} (fabric: {})\n",
            number,
            plane.0.fabric().name()
        );
        Ok(AfSci {
            _netlink: netlink,
            _threads: threads,
            family,
            _plane: plane,
        })
    }
}

impl Drop for AfSci {
    fn drop(&mut self) {
        pr_info!("unregistering address family {}\n", self.family.number());
    }
}

/// The control plane, reachable through `global` while this lives.
struct InstalledPlane(Pin<KBox<control::ControlPlane>>);

impl Drop for InstalledPlane {
    fn drop(&mut self) {
        // Fields of `AfSci` drop in order: the thread has stopped and the family is gone,
        // so no socket, thread or fabric callback reaches the plane any more.
        global::uninstall();
    }
}
