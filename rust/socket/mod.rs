// SPDX-License-Identifier: GPL-2.0

//! The socket layer, the top of the data path: the `AF_SCI` family and its `proto_ops`
//! ([`adapter`]), the stream socket itself ([`sock`]: bind, listen, connect, accept, send,
//! recv, poll, options), the datagram socket ([`dgram`]), the native TCP (UDP) socket
//! every `AF_SCI` socket owns ([`native`], its UDP side [`native_udp`], its wake-ups
//! forwarded to the `AF_SCI` socket by [`native_hooks`]) and the options replayed when that
//! native socket is re-created for IPv6 ([`early_options`]), the socket addresses the
//! socket layer passes ([`sockaddr`]), the hand-over of a fallen-back socket's file to the
//! native socket ([`handover`]), the wrapper of the socket's own `struct sock` ([`sk`]), the
//! state below it that every socket reaches ([`stack`]), and the registry and counters
//! that the netlink family reads ([`registry`], [`stats`]).

pub(crate) mod adapter;
pub(crate) mod dgram;
pub(crate) mod early_options;
pub(crate) mod handover;
pub(crate) mod join;
pub(crate) mod native;
pub(crate) mod native_hooks;
pub(crate) mod native_slot;
pub(crate) mod native_udp;
pub(crate) mod proto_ops;
pub(crate) mod registry;
pub(crate) mod sk;
pub(crate) mod sock;
pub(crate) mod sockaddr;
pub(crate) mod stack;
pub(crate) mod stats;
