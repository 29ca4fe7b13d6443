/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * af_sci: user-space API of the AF_SCI socket family.
 *
 * AF_SCI stream sockets take and return struct sockaddr_in / sockaddr_in6 and behave
 * like TCP sockets.  The family number is chosen when the module is loaded (module
 * parameter "family"); programs read it from /sys/module/af_sci/parameters/family and
 * use AF_SCI_DEFAULT only when that file is missing.
 */
#ifndef _UAPI_LINUX_AF_SCI_H
#define _UAPI_LINUX_AF_SCI_H

#include <linux/types.h>

/* Default family number (the number SCI SOCKET used; unused by Linux 6.12). */
#define AF_SCI_DEFAULT		27
#define PF_SCI_DEFAULT		AF_SCI_DEFAULT

/* Where the family number of the loaded module can be read. */
#define AF_SCI_FAMILY_PATH	"/sys/module/af_sci/parameters/family"

/* Socket option level of AF_SCI's own options (get/setsockopt). */
#define SOL_SCI			300	/* above every SOL_* of Linux 6.12 (SOL_VSOCK = 287) */

/* getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len): struct sci_info. Read-only. */
#define SCI_INFO		1

/*
 * SCI_NATIVE_FAMILY (int): AF_INET or AF_INET6, the family of the socket's native TCP
 * socket and so of the addresses it takes and returns.  A new AF_SCI socket is AF_INET
 * until its first IPv6 address (bind/connect); setting this option before the first
 * bind, connect or listen settles it explicitly (the preload sets it for programs that
 * asked for AF_INET6).  The family changes at most once (a second change fails with
 * EINVAL), and not after the first bind, connect or listen (EISCONN).
 */
#define SCI_NATIVE_FAMILY	2

/*
 * SCI_SPIN_US (int): how long a blocking send or receive on the SCI data path polls its
 * queue before it sleeps, in microseconds (0: sleep at once; at most 10000).  A new
 * socket takes the module parameter spin_us; -1 goes back to following it.  Reads -1
 * while the socket spins adaptively (spin_us -1, the default: as its recent waits say).
 */
#define SCI_SPIN_US		3

/*
 * SCI_FABRIC (int): 1 (the default) lets the socket use the fabric where the node map and
 * the port rules allow it; 0 keeps it on its native TCP socket for good: its connects
 * fall back with SCI_FALLBACK_OPTED_OUT and its listen() takes TCP connections only.
 * Set before connect() or listen() (later: EISCONN).  The preload sets it for a
 * connection or listener that a rule of /etc/af_sci/preload.conf keeps on TCP.
 * On a datagram socket it may be set at any time: 0 keeps its datagrams on its native
 * UDP socket (its implicit SCI connections end), 1 lets them use the fabric again.
 */
#define SCI_FABRIC		4

/* How a socket carries its bytes (sci_info.mode). */
enum sci_mode {
	SCI_MODE_NATIVE	= 0,	/* over its own native TCP socket (fallback) */
	SCI_MODE_SCI	= 1,	/* over shared-memory message queues */
};

/*
 * Why a socket is SCI_MODE_NATIVE (sci_info.fallback_reason, the "sci-fallback:" line of
 * /proc/PID/fdinfo, SCI_SOCK_A_FALLBACK).  Decided when the socket connects (or is
 * accepted); a socket that has not connected yet reports SCI_FALLBACK_NO_FABRIC.
 * Names as tools print them: none, no-fabric, not-mapped, port-excluded, peer-rejected,
 * no-memory, timeout, peer-tcp, failover, opted-out.
 */
enum sci_fallback_reason {
	SCI_FALLBACK_NONE		= 0,	/* not fallen back (SCI_MODE_SCI) */
	SCI_FALLBACK_NO_FABRIC		= 1,	/* no SCI data path available yet for this destination */
	SCI_FALLBACK_NOT_MAPPED		= 2,	/* destination address not in the node map */
	SCI_FALLBACK_PORT_EXCLUDED	= 3,	/* destination port excluded by the port rules */
	SCI_FALLBACK_PEER_REJECTED	= 4,	/* the peer node's listener refused the connection */
	SCI_FALLBACK_NO_MEMORY		= 5,	/* the fabric is out of memory (segments, queues) */
	SCI_FALLBACK_TIMEOUT		= 6,	/* the peer node did not answer in time */
	SCI_FALLBACK_PEER_TCP		= 7,	/* accepted connection came from a plain TCP peer */
	SCI_FALLBACK_FAILOVER		= 8,	/* an SCI connection moved onto TCP mid-stream */
	SCI_FALLBACK_OPTED_OUT		= 9,	/* the socket asked for TCP (SCI_FABRIC 0) */
	__SCI_FALLBACK_MAX,
};
#define SCI_FALLBACK_MAX	(__SCI_FALLBACK_MAX - 1)

/* States reported in sci_info.state: the TCP states of linux/tcp.h (TCP_ESTABLISHED = 1, ...). */

struct sci_info {
	__u32	mode;		/* enum sci_mode */
	__u32	fallback_reason;	/* enum sci_fallback_reason */
	__u32	native_family;	/* AF_INET or AF_INET6: family of the native socket */
	__u32	state;		/* TCP state of the connection (native socket's sk_state) */
};

/*
 * Generic netlink family "af_sci" (configuration and diagnostics), version 1.
 * Documentation/netlink/af_sci.yaml is the specification; scictl(8) the client.
 *
 * Configuration is module-wide and needs CAP_NET_ADMIN (in the initial user namespace):
 * SCI_CMD_NODE_SET and SCI_CMD_PORT_SET replace the whole node map / port rule list with
 * the SCI_A_NODE / SCI_A_PORT_RULE nests of the request (none: clear it).  The GET
 * commands are dumps, one object per message, open to everyone; sockets and statistics
 * are those of the requester's network namespace.
 */
#define SCI_GENL_NAME		"af_sci"
#define SCI_GENL_VERSION	1

/* At most this many node map entries and port rules. */
#define SCI_NODES_MAX		1024
#define SCI_PORT_RULES_MAX	64
/* At most this many network namespaces publish their addresses (SCI_CMD_PUBLISH_SET). */
#define SCI_PUBLISH_NETNS_MAX	16

enum sci_cmd {
	SCI_CMD_UNSPEC,
	SCI_CMD_NODE_GET,	/* dump: one SCI_A_NODE per message (node map, then published) */
	SCI_CMD_NODE_SET,	/* do, admin: replace the node map with the SCI_A_NODE nests */
	SCI_CMD_PORT_GET,	/* dump: one SCI_A_PORT_RULE per message */
	SCI_CMD_PORT_SET,	/* do, admin: replace the port rules with the SCI_A_PORT_RULE nests */
	SCI_CMD_SOCK_GET,	/* dump: one SCI_A_SOCK per message */
	SCI_CMD_STATS_GET,	/* do: SCI_A_STATS of the requester's network namespace */
	SCI_CMD_LINK_DROP,	/* do, admin: drop the fabric link to the node whose id the one
				 * SCI_A_NODE nest names (SCI_NODE_A_ID), as a link that failed:
				 * its connections move onto TCP (or reset), and the link is
				 * made again when both nodes are still alive */
	SCI_CMD_PUBLISH_SET,	/* do, admin: SCI_A_PUBLISH 1 makes the requester's network
				 * namespace (not the initial one, which always does) publish
				 * its addresses in the fabric and serve SCI requests for them;
				 * 0 stops it */

	__SCI_CMD_MAX,
};
#define SCI_CMD_MAX		(__SCI_CMD_MAX - 1)

/* Top-level attributes: each carries one nested object. */
enum sci_attr {
	SCI_A_UNSPEC,
	SCI_A_NODE,		/* nest: enum sci_node_attr (multi-attr in NODE_SET) */
	SCI_A_PORT_RULE,	/* nest: enum sci_port_attr (multi-attr in PORT_SET) */
	SCI_A_SOCK,		/* nest: enum sci_sock_attr (replies only) */
	SCI_A_STATS,		/* nest: enum sci_stats_attr (replies only) */
	SCI_A_PUBLISH,		/* u8: whether a network namespace publishes its addresses
				 * (PUBLISH_SET requests, STATS_GET replies) */

	__SCI_A_MAX,
};
#define SCI_A_MAX		(__SCI_A_MAX - 1)

/*
 * Where a node map entry comes from (SCI_NODE_A_SOURCE): the administrator's node map
 * (SCI_CMD_NODE_SET), or the addresses a node the fabric reaches published, which are
 * used only while no node map is loaded (a loaded map is authoritative).
 */
enum sci_node_source {
	SCI_NODE_SOURCE_FILE	= 0,
	SCI_NODE_SOURCE_FABRIC	= 1,
};

/* A node map entry: one IPv4 or IPv6 address of a node and the node's id. */
enum sci_node_attr {
	SCI_NODE_A_UNSPEC,
	SCI_NODE_A_ADDR4,	/* __be32: IPv4 address (exactly one of ADDR4, ADDR6) */
	SCI_NODE_A_ADDR6,	/* 16 bytes: IPv6 address */
	SCI_NODE_A_ID,		/* u32: node id */
	SCI_NODE_A_SOURCE,	/* u8: enum sci_node_source (NODE_GET replies; absent: file) */

	__SCI_NODE_A_MAX,
};
#define SCI_NODE_A_MAX		(__SCI_NODE_A_MAX - 1)

/* Port rule actions (SCI_PORT_A_ACTION). */
enum sci_port_action {
	SCI_PORT_INCLUDE	= 1,	/* once any include rule exists, only included ports use SCI */
	SCI_PORT_EXCLUDE	= 2,	/* never use SCI for these ports (wins over include) */
};

/* A port rule: destination ports LOW..HIGH (inclusive, 1..65535). */
enum sci_port_attr {
	SCI_PORT_A_UNSPEC,
	SCI_PORT_A_ACTION,	/* u8: enum sci_port_action */
	SCI_PORT_A_LOW,		/* u16 */
	SCI_PORT_A_HIGH,	/* u16, >= LOW */

	__SCI_PORT_A_MAX,
};
#define SCI_PORT_A_MAX		(__SCI_PORT_A_MAX - 1)

/* One AF_SCI socket (SCI_CMD_SOCK_GET). Addresses are absent while unset (0). */
enum sci_sock_attr {
	SCI_SOCK_A_UNSPEC,
	SCI_SOCK_A_PAD,
	SCI_SOCK_A_FAMILY,	/* u16: AF_INET or AF_INET6 (the native socket's family) */
	SCI_SOCK_A_LOCAL_ADDR4,	/* __be32 */
	SCI_SOCK_A_LOCAL_ADDR6,	/* 16 bytes */
	SCI_SOCK_A_LOCAL_PORT,	/* u16 */
	SCI_SOCK_A_PEER_ADDR4,	/* __be32 */
	SCI_SOCK_A_PEER_ADDR6,	/* 16 bytes */
	SCI_SOCK_A_PEER_PORT,	/* u16 */
	SCI_SOCK_A_MODE,	/* u32: enum sci_mode */
	SCI_SOCK_A_FALLBACK,	/* u32: enum sci_fallback_reason */
	SCI_SOCK_A_STATE,	/* u8: TCP state (linux/tcp.h), as sci_info.state */
	SCI_SOCK_A_QUEUE_FILL,	/* u32: bytes waiting in its SCI receive queue (0 while native) */
	SCI_SOCK_A_INODE,	/* u64: inode number, as in /proc/PID/fd ("socket:[N]") */
	SCI_SOCK_A_COOKIE,	/* u64: socket cookie (unique while the socket lives) */
	SCI_SOCK_A_NODE,	/* u32: peer node id (SCI_MODE_SCI only) */
	SCI_SOCK_A_RECV_Q,	/* u32: Recv-Q as ss(8) shows it (a listener: connections waiting) */
	SCI_SOCK_A_SEND_Q,	/* u32: Send-Q as ss(8) shows it (a listener: its backlog) */
	SCI_SOCK_A_TYPE,	/* u16: SOCK_STREAM or SOCK_DGRAM (absent: SOCK_STREAM) */
	/* A datagram socket's implicit SCI connections and datagrams (SOCK_DGRAM only): */
	SCI_SOCK_A_IMPLICIT_OUT,	/* u32: connections up to destinations */
	SCI_SOCK_A_IMPLICIT_IN,		/* u32: connections from peers */
	SCI_SOCK_A_DGRAM_SENT,		/* u64: datagrams sent over SCI */
	SCI_SOCK_A_DGRAM_RECEIVED,	/* u64: datagrams received over SCI */
	SCI_SOCK_A_DGRAM_DROPPED,	/* u64: datagrams dropped at a full SCI ring */

	__SCI_SOCK_A_MAX,
};
#define SCI_SOCK_A_MAX		(__SCI_SOCK_A_MAX - 1)

/* Counters of one network namespace since the module was loaded (SCI_CMD_STATS_GET). */
enum sci_stats_attr {
	SCI_STATS_A_UNSPEC,
	SCI_STATS_A_PAD,
	SCI_STATS_A_SOCKETS,		/* u64: AF_SCI sockets created (socket() and accept()) */
	SCI_STATS_A_SCI_CONNECTIONS,	/* u64: connections that went over SCI */
	SCI_STATS_A_FALLBACK,		/* nest: enum sci_fallback_attr, one per reason */
	SCI_STATS_A_REFUSALS_REMEMBERED, /* u64: of the peer-rejected fallbacks, those that
					  * asked no peer: the destination had refused less
					  * than refusal_ms before */
	SCI_STATS_A_IMPLICIT_CONNECTIONS, /* u64: implicit connections of datagram sockets
					   * that came up (not in SCI_CONNECTIONS) */
	SCI_STATS_A_DGRAM_SENT,		/* u64: datagrams sent over SCI */
	SCI_STATS_A_DGRAM_RECEIVED,	/* u64: datagrams received over SCI */
	SCI_STATS_A_DGRAM_DROPPED,	/* u64: datagrams dropped at a full SCI ring (the
					 * sender's count: the datagram never left) */
	/* Kernel users reading with read_sock (e.g. iscsi_tcp; see "Kernel users"): */
	SCI_STATS_A_READ_SOCK_LENT,	/* u64: bytes a reader's actor used in place (the
					 * ring's own pages as skb frags, no copy) */
	SCI_STATS_A_READ_SOCK_COPIED,	/* u64: bytes a reader's actor used that were copied
					 * into fresh socket buffers first (device memory,
					 * or while an earlier lent buffer is kept) */
	SCI_STATS_A_READ_SOCK_KEPT,	/* u64: times a reader kept a lent buffer after its
					 * actor returned (the ring holds the writer off
					 * those bytes until it lets go) */
	SCI_STATS_A_DIRECT_RECEIVED,	/* u64: bytes a writer copied straight into a
					 * reader's posted buffer on the loopback fabric
					 * (one copy; module parameter direct_min) */
	SCI_STATS_A_READ_SOCK_DEFERRED,	/* u64: times a kernel reader's read_sock could
					 * not read at once (its socket held by a process,
					 * or a move onto TCP to finish) and left the read
					 * to the socket's work item */

	__SCI_STATS_A_MAX,
};
#define SCI_STATS_A_MAX		(__SCI_STATS_A_MAX - 1)

enum sci_fallback_attr {
	SCI_FALLBACK_A_UNSPEC,
	SCI_FALLBACK_A_PAD,
	SCI_FALLBACK_A_REASON,	/* u32: enum sci_fallback_reason */
	SCI_FALLBACK_A_COUNT,	/* u64: connections that fell back for this reason */

	__SCI_FALLBACK_A_MAX,
};
#define SCI_FALLBACK_A_MAX	(__SCI_FALLBACK_A_MAX - 1)

#endif /* _UAPI_LINUX_AF_SCI_H */
