// SPDX-License-Identifier: GPL-2.0

//! The socket layer, the top of the data path: the `AF_SCI` family and its `proto_ops`
//! ([`adapter`]), the socket itself ([`sock`]: bind, listen, connect, accept, send,
//! recv, poll, options), the native TCP socket every `AF_SCI` socket owns ([`native`]),
//! the hand-over of a fallen-back socket's file to it ([`handover`]), the wrapper of the
//! socket's own `struct sock` ([`sk`]), the state below it that every socket reaches
//! ([`stack`]), and the registry and counters that the netlink family reads
//! ([`registry`], [`stats`]).

pub(crate) mod adapter;
pub(crate) mod handover;
pub(crate) mod join;
pub(crate) mod native;
pub(crate) mod registry;
pub(crate) mod sk;
pub(crate) mod sock;
pub(crate) mod stack;
pub(crate) mod stats;
