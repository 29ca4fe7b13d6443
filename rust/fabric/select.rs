// SPDX-License-Identifier: GPL-2.0

//! Which fabric this node runs on, chosen once at load time by the `fabric` module
//! parameter:
//!
//! - `auto` (default): the ivshmem backend if an ivshmem device is present and this
//!   node can join its region, else loopback. A device that is present but unusable
//!   (an `ivshmem-plain` device without `node_id=`, a region formatted by an
//!   incompatible version, a node id already in use) is reported in `dmesg` and the
//!   node runs on loopback: `AF_SCI` sockets keep working (locally over SCI, remotely
//!   over TCP) rather than the module refusing to load.
//! - `ivshmem`: the ivshmem backend or nothing: `insmod` fails (`ENODEV` without a
//!   device, or why the device cannot be used).
//! - `loopback`: the in-kernel loopback fabric (node 0), even if a device is present.
//!
//! Either way, connections to this node's own addresses keep working: the ivshmem
//! backend serves its own node too (see [`super::ivshmem`]).

use super::ivshmem::Ivshmem;
use super::loopback::Loopback;
use super::{Fabric, FabricEvents};
use crate::sys::params::FabricParams;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The loopback fabric (node 0) with `channels` channels.
fn loopback(events: Arc<dyn FabricEvents>, channels: usize) -> Result<Arc<dyn Fabric>> {
    let fabric: Arc<dyn Fabric> = Arc::pin_init(Loopback::new(0, channels, events)?, GFP_KERNEL)?;
    Ok(fabric)
}

/// Opens the fabric the `fabric` parameter asks for, with `channels` channels (the
/// control plane's connection slots), delivering to `events`.
pub(crate) fn open(
    events: Arc<dyn FabricEvents>,
    params: &FabricParams,
    channels: usize,
) -> Result<Arc<dyn Fabric>> {
    match params.fabric.as_bytes() {
        b"loopback" => loopback(events, channels),
        b"ivshmem" => {
            let fabric: Arc<dyn Fabric> = Ivshmem::open(events.clone(), params, channels)?;
            Ok(fabric)
        }
        b"auto" | b"" => match Ivshmem::open(events.clone(), params, channels) {
            Ok(fabric) => Ok(fabric),
            Err(e) if e == ENODEV => loopback(events, channels),
            Err(e) => {
                pr_warn!(
                    "ivshmem fabric unusable ({:?}); using the loopback fabric\n",
                    e
                );
                loopback(events, channels)
            }
        },
        _ => {
            pr_err!(
                "fabric={}: expected auto, loopback or ivshmem\n",
                params.fabric
            );
            Err(EINVAL)
        }
    }
}
