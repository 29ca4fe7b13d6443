// SPDX-License-Identifier: GPL-2.0

//! af_sci: the `AF_SCI` socket family.
//!
//! `AF_SCI` stream sockets behave like TCP sockets and take `sockaddr_in`/`sockaddr_in6`
//! addresses; unmodified programs get them through a preload library that rewrites
//! `socket(AF_INET, SOCK_STREAM, 0)`. Each owns a native TCP socket that holds its port
//! and, when no SCI data path can serve the connection, carries its bytes.
//!
//! Files: `socket_adapter.rs` (family registration and `proto_ops`), `sci_sock.rs` (the
//! socket), `native.rs` (the native TCP socket), `bindings.rs` + `shim.c` (C glue).

mod bindings;
#[allow(dead_code)]
mod fabric;
mod native;
// The I/O-free protocol core, shared with the host crate `tools/sci-proto`. Parts of it
// are used only as the data path grows.
#[allow(dead_code)]
#[path = "proto/mod.rs"]
mod proto;
mod sci_sock;
mod socket_adapter;

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
    family: Pin<KBox<Family>>,
}

impl kernel::Module for AfSci {
    fn init(module: &'static ThisModule) -> Result<Self> {
        if socket_adapter::fabric_selftest_requested() {
            fabric::selftest::run()?;
        }
        let number = Family::requested_number();
        let family = Family::register(number, module)?;
        pr_info!("registered address family {} (TCP pass-through)\n", number);
        Ok(AfSci { family })
    }
}

impl Drop for AfSci {
    fn drop(&mut self) {
        pr_info!("unregistering address family {}\n", self.family.number());
    }
}
