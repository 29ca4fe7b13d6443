/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, generic netlink (genl.c): the C-only statics of the
 * generic netlink family "af_sci" (genl_family, its ops and attribute policies) and of the
 * per-network-namespace counters (pernet_operations), plus wrappers of the static inline
 * netlink helpers.  The commands are handled in Rust (rust/diag/netlink/adapter.rs), whose
 * handler table reaches C through struct sci_genl_handlers, so rustc checks the handlers'
 * signatures against these declarations.  Included by ../shim.h, so bindgen sees it.
 */
#ifndef AF_SCI_GENL_H
#define AF_SCI_GENL_H

#include <linux/in6.h>
#include <linux/netlink.h>
#include <net/genetlink.h>
#include <net/netlink.h>
#include <net/sock.h>
#include "../../../uapi/linux/af_sci.h"

/* The Rust handlers of the family's commands. */
struct sci_genl_handlers {
	int (*node_dump)(struct sk_buff *skb, struct netlink_callback *cb);
	int (*node_set)(struct sk_buff *skb, struct genl_info *info);
	int (*port_dump)(struct sk_buff *skb, struct netlink_callback *cb);
	int (*port_set)(struct sk_buff *skb, struct genl_info *info);
	int (*sock_dump)(struct sk_buff *skb, struct netlink_callback *cb);
	int (*stats_get)(struct sk_buff *skb, struct genl_info *info);
	int (*link_drop)(struct sk_buff *skb, struct genl_info *info);
	int (*publish_set)(struct sk_buff *skb, struct genl_info *info);
};

/* Registers the family with these handlers (which must outlive the registration). */
int sci_genl_register(const struct sci_genl_handlers *handlers);
void sci_genl_unregister(void);

/* Building replies (genlmsg_* and nla_* static inlines; nla_put is exported). */
struct sk_buff *sci_genl_new(void);
void sci_genl_free(struct sk_buff *skb);
void *sci_genl_put_reply(struct sk_buff *skb, struct genl_info *info, u8 cmd);
void *sci_genl_put_dump(struct sk_buff *skb, struct netlink_callback *cb, u8 cmd);
void sci_genl_end(struct sk_buff *skb, void *hdr);
void sci_genl_cancel(struct sk_buff *skb, void *hdr);
int sci_genl_reply(struct sk_buff *skb, struct genl_info *info);
struct nlattr *sci_nla_nest_start(struct sk_buff *skb, int type);
void sci_nla_nest_end(struct sk_buff *skb, struct nlattr *nest);
void sci_nla_nest_cancel(struct sk_buff *skb, struct nlattr *nest);
int sci_nla_put_u8(struct sk_buff *skb, int type, u8 value);
int sci_nla_put_u16(struct sk_buff *skb, int type, u16 value);
int sci_nla_put_u32(struct sk_buff *skb, int type, u32 value);
int sci_nla_put_u64(struct sk_buff *skb, int type, u64 value, int padtype);

/*
 * Reading requests, already validated against the family's policy by the genetlink
 * core: the first attribute of the payload or of a nest (NULL if none), the next one
 * (NULL at the end; nla_ok/nla_next), and an attribute's type, length and data.
 */
const struct nlattr *sci_genl_first_attr(const struct genl_info *info, int *rem);
const struct nlattr *sci_nla_first_nested(const struct nlattr *nla, int *rem);
const struct nlattr *sci_nla_next(const struct nlattr *nla, int *rem);
int sci_nla_type(const struct nlattr *nla);
int sci_nla_len(const struct nlattr *nla);
const void *sci_nla_data(const struct nlattr *nla);
/* An extended ack message for the request (msg must be a static string). */
void sci_genl_set_err_msg(struct genl_info *info, const struct nlattr *nla, const char *msg);

/* The network namespace of a request and of a dump; a dump's resume state. */
struct net *sci_genl_info_net(const struct genl_info *info);
struct net *sci_genl_cb_net(const struct netlink_callback *cb);
long *sci_genl_cb_args(struct netlink_callback *cb);

/*
 * The counters bumped once a datagram or once a read: per CPU, as the SNMP MIBs are, so
 * that CPUs sending and receiving at once never share a counter's cache line.
 */
enum sci_net_hot_counter {
	SCI_HOT_DGRAM_SENT,
	SCI_HOT_DGRAM_RECEIVED,
	SCI_HOT_DGRAM_DROPPED,
	SCI_HOT_READ_SOCK_LENT,
	SCI_HOT_READ_SOCK_COPIED,
	SCI_HOT_DIRECT_RECEIVED,
	__SCI_HOT_MAX,
};
struct sci_net_hot {
	u64	v[__SCI_HOT_MAX];
};

/*
 * Per-network-namespace counters, zeroed when a namespace is created.  Rust uses them as
 * its NetStats (atomics of the same layout, checked at build time); the per-CPU ones
 * only through sci_sk_hot_add() and sci_net_hot_sum().
 */
struct sci_net_stats {
	u64	sockets;
	u64	sci_connections;
	u64	fallbacks[__SCI_FALLBACK_MAX];
	u64	refusals_remembered;
	u64	implicit_connections;
	u64	read_sock_kept;
	u64	read_sock_deferred;
	struct sci_net_hot __percpu *hot;
};
/* Adds n to this CPU's count of counter in the namespace of sk (any context). */
void sci_sk_hot_add(const struct sock *sk, unsigned int counter, u64 n);
/* The sum of every CPU's count of counter. */
u64 sci_net_hot_sum(struct sci_net_hot __percpu *hot, unsigned int counter);
int sci_pernet_register(void);
void sci_pernet_unregister(void);
void *sci_net_generic(const struct net *net);
/* The same for the namespace of sk. */
void *sci_sk_net_generic(const struct sock *sk);

/* Whether an address belongs to an interface of this host (node map default). */
bool sci_addr4_is_local(struct net *net, __be32 addr);
bool sci_addr6_is_local(struct net *net, const struct in6_addr *addr);

/*
 * Up to max addresses of the interfaces of the network namespace whose cookie is cookie
 * (0: the initial namespace) that another node could reach (not loopback, link-local or
 * multicast; IPv6 ones not tentative), IPv4 first as IPv4-mapped IPv6, 16 bytes each
 * into out; returns how many, or -ENOENT if that namespace is gone.
 */
int sci_net_addrs(u64 cookie, u8 *out, int max);
/*
 * Whether addr (IPv4 as IPv4-mapped) is an address of an interface of the namespace
 * whose cookie is cookie (0: the initial one): 1 or 0, -ENOENT if it is gone.
 */
int sci_net_holds_addr(u64 cookie, const struct in6_addr *addr);

/*
 * The source address a TCP connect to daddr would use (the route's preferred source, as
 * ip_route_connect()/ip6_dst_lookup() choose it); 0 or -errno (no route).
 */
int sci_route4_source(struct net *net, __be32 daddr, __be32 *saddr);
int sci_route6_source(struct net *net, const struct in6_addr *daddr, struct in6_addr *saddr);

/* What the socket dump reports of a native socket (ports in host order). */
struct sci_sock_addrs {
	u16	family;
	u16	local_port;
	u16	peer_port;
	u8	local[16];	/* 4 bytes used for AF_INET */
	u8	peer[16];
};
void sci_sock_addrs(const struct sock *sk, struct sci_sock_addrs *out);
u64 sci_sock_ino(struct sock *sk);
u64 sci_sock_cookie(struct sock *sk);

#endif /* AF_SCI_GENL_H */
