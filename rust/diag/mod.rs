// SPDX-License-Identifier: GPL-2.0

//! Diagnostics and management: the `af_sci` generic netlink family (`scictl`), which
//! sets the configuration and reads the sockets and the counters. Above the socket layer:
//! it reads what every other layer keeps, and nothing below calls it.

pub(crate) mod netlink;
