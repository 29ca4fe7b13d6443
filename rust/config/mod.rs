// SPDX-License-Identifier: GPL-2.0

//! Configuration: which connections try the SCI path. The node map (IP address → node)
//! and the port rules that `scictl load` sets through the netlink family, the decision a
//! connect takes from them, and this host's addresses as that decision sees them.
//! Beside the data path's layers: the socket layer asks it, the netlink family sets it.

pub(crate) mod host;
pub(crate) mod node_map;
// Shared with the host crate `tools/sci-config`; scictl uses parts the module does not.
#[allow(dead_code)]
pub(crate) mod rules;
