/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, sockets: AF_SCI's struct proto, and the static inlines and macros of
 * net/sock.h and linux/tcp.h that the socket layer needs (rust/socket/, rust/sys/net.rs).
 */
#ifndef AF_SCI_SYS_SOCK_H
#define AF_SCI_SYS_SOCK_H

#include <linux/net.h>
#include <linux/poll.h>
#include <linux/socket.h>
#include <linux/sockptr.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp_states.h>

/* Our struct proto: obj_size is the Rust socket's size, known only at load time. */
int sci_proto_register(unsigned int obj_size);
void sci_proto_unregister(void);
struct sock *sci_sk_alloc(struct net *net, int family, int kern);
int sci_dgram_proto_register(unsigned int obj_size);
void sci_dgram_proto_unregister(void);
struct sock *sci_dgram_sk_alloc(struct net *net, int family, int kern);

/* A network namespace's cookie, and whether it is the initial namespace. */
u64 sci_net_cookie(const struct net *net);
bool sci_net_is_init(const struct net *net);
/* IPV6_V6ONLY of an AF_INET6 sock (false for AF_INET). */
bool sci_sk_ipv6only(const struct sock *sk);
/* SO_LINGER with a zero timeout: close aborts. */
bool sci_linger_zero(const struct sock *sk);
/*
 * TCP_NODELAY and TCP_CORK as a TCP sock holds them (the TCP_NAGLE_OFF and TCP_NAGLE_CORK
 * bits of tcp_sk(sk)->nonagle, a bitfield), 0 for a sock that is not TCP; and TCP_NODELAY
 * passed on from a listener to an accepted sock, as TCP's accept does.
 */
#define SCI_NAGLE_OFF	1
#define SCI_NAGLE_CORK	2
unsigned int sci_tcp_nagle(const struct sock *sk);
/*
 * Recv-Q and Send-Q as ss(8) shows them. A TCP sock: a listener's accept queue and its
 * backlog, else bytes received and not read, and bytes sent and not acknowledged. A UDP
 * sock: the memory of its receive and send queues (as udp_diag reports them). Lockless
 * reads, as the diag dump makes them.
 */
void sci_sock_queues(const struct sock *sk, u32 *recv_q, u32 *send_q);
/*
 * What setsockopt(SOL_SOCKET) set on the sock @from that governs the calls on a
 * connection or that it reports (SO_RCVTIMEO, SO_SNDTIMEO, SO_RCVLOWAT, SO_LINGER,
 * SO_KEEPALIVE, SO_OOBINLINE, SO_ZEROCOPY, SO_MARK, SO_SNDBUF/SO_RCVBUF set by hand,
 * SO_TIMESTAMP* and SO_TIMESTAMPING, SO_BROADCAST, SO_DONTROUTE, SO_REUSEADDR,
 * SO_REUSEPORT), given to the sock @to as a TCP sock accepted on the listener @from
 * gets them (sk_clone_lock copies the sock; SO_PRIORITY starts at 0): an AF_SCI sock
 * accepted over SCI takes its listener's.
 */
void sci_sock_inherit_options(struct sock *to, const struct sock *from);
/*
 * The same between two TCP socks, with SO_PRIORITY, IP_TOS, IP_TTL, IPV6_TCLASS,
 * IPV6_UNICAST_HOPS and TCP's own (TCP_NODELAY, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT,
 * TCP_USER_TIMEOUT, TCP_NOTSENT_LOWAT): a connection that moves onto another TCP sock
 * keeps its options.
 */
void sci_tcp_inherit_options(struct sock *to, const struct sock *from);
/*
 * TCP's and the socket level's options of the TCP listener @listener, as a TCP sock
 * accepted there has them: the native sock of a socket accepted over SCI.
 */
void sci_tcp_accept_options(struct sock *to, const struct sock *listener);

/* Static inlines and macros of net/sock.h. */
void sci_lock_sock(struct sock *sk);
void sci_module_get(struct module *module);
void sci_sock_hold(struct sock *sk);
void sci_sock_put(struct sock *sk);
void sci_sock_orphan(struct sock *sk);
void sci_sock_graft(struct sock *sk, struct socket *parent);
int sci_sock_error(struct sock *sk);
void sci_sock_poll_wait(struct file *file, struct socket *sock, poll_table *wait);
/*
 * The socket flags of every AF_SCI socket: SOCK_CUSTOM_SOCKOPT (SOL_SOCKET options come to
 * the family's setsockopt too) and SOCK_SUPPORT_ZC (io_uring's zero-copy send is offered,
 * as TCP and UDP offer it).
 */
void sci_sock_set_flags(struct socket *sock);
void sci_copy_alloc_flags(struct sock *to, const struct sock *from);
/* TCP_INQ as set on a TCP sk: a read wants the bytes left with it (TCP_CM_INQ). */
bool sci_tcp_recvmsg_inq(const struct sock *sk);
/* Puts TCP_INQ's control message (TCP_CM_INQ, an int) into a read's message. */
void sci_tcp_put_inq(struct msghdr *msg, int inq);
/*
 * Puts the receive timestamp a TCP read of sk would carry (SO_TIMESTAMP, SO_TIMESTAMPNS,
 * their _NEW forms, SO_TIMESTAMPING's software stamp) into a read's message, stamped now,
 * or nothing when sk asked for none. tcp_recv_timestamp's rules, which it does not export.
 */
void sci_tcp_put_rx_timestamp(const struct sock *sk, struct msghdr *msg);
/* SO_ZEROCOPY: whether sk has it (SOCK_ZEROCOPY), and setting it on ours to mirror it. */
bool sci_sock_zerocopy(const struct sock *sk);
void sci_sock_set_zerocopy(struct sock *sk, bool on);
/* Whether sk's error queue holds something (a zero-copy notification, an ICMP error). */
bool sci_sock_error_queued(const struct sock *sk);
/*
 * MSG_ZEROCOPY on a send over SCI: *uarg gets the notification TCP would post for the
 * send on `native` (the socket SO_ZEROCOPY was set on and MSG_ERRQUEUE reads), or NULL
 * when the send asks for none (no MSG_ZEROCOPY, no SO_ZEROCOPY, or io_uring's own
 * msg_ubuf). -ENOBUFS when it cannot be had, TCP's error then.
 */
int sci_zerocopy_begin(struct sock *native, const struct msghdr *msg, size_t len,
		       struct ubuf_info **uarg);
/* The send of sci_zerocopy_begin() is over: posted as copied if `sent`, else dropped. */
void sci_zerocopy_end(struct ubuf_info *uarg, bool sent);
struct net *sci_sock_net(const struct sock *sk);
int sci_copy_from_sockptr(void *dst, sockptr_t src, size_t size);
sockptr_t sci_kernel_sockptr(void *p);
void sci_sock_set_fasync(struct sock *sk, bool on);

/* The native socket's callbacks are forwarded under its sk_callback_lock. */
void sci_callback_write_lock(struct sock *sk);
void sci_callback_write_unlock(struct sock *sk);
void sci_callback_read_lock(struct sock *sk);
void sci_callback_read_unlock(struct sock *sk);
/*
 * sk_user_data with SK_USER_DATA_NOCOPY, so accepted children never inherit it; read and
 * written under sk_callback_lock.
 */
void sci_set_user_data(struct sock *sk, void *data);
void *sci_user_data(struct sock *sk);

/* TCP's proto_ops for family (NULL without it), and the socket a socket file was made for. */
const struct proto_ops *sci_tcp_ops(int family);
struct socket *sci_file_socket(struct file *file);

/*
 * Bytes of the failover resume header (proto/resume.rs) over a native TCP socket, never
 * sleeping: bytes sent or received, or -errno (-EAGAIN when it would wait).
 */
int sci_kernel_send_nowait(struct socket *sock, const void *buf, size_t len);
int sci_kernel_recv_nowait(struct socket *sock, void *buf, size_t len, bool peek);

/*
 * proto_ops.read_sock for a kernel user's actor (iscsi_tcp's receive), fed as TCP feeds
 * it: socket buffers that the actor may keep a reference to (rust/sys/read_actor.rs).
 * sci_read_buf_alloc: a fresh skb of len bytes in page frags, allocated without sleeping
 * (with the reserves when sk has SOCK_MEMALLOC), and an iterator over its pages to copy
 * the bytes in (-ENOMEM when memory is short). sci_read_buf_feed: the first len bytes of
 * it given to the actor with bottom halves off (as in TCP's receive softirq), and the skb
 * put: what the actor used, or its error.
 */
struct sci_read_buf {
	struct sk_buff *skb;
	struct iov_iter iter;
	struct bio_vec bvec[MAX_SKB_FRAGS];
};
int sci_read_buf_alloc(struct sock *sk, size_t len, struct sci_read_buf *buf);
int sci_read_buf_feed(read_descriptor_t *desc, sk_read_actor_t actor, struct sci_read_buf *buf,
		      size_t len);

/*
 * read_sock of a native TCP socket without sleeping, for an AF_SCI read_sock that may be
 * called from sk_data_ready (rust/socket/sock/read_sock.rs). sci_native_read_sock_held:
 * this context holds the socket locked (TCP called its sk_data_ready, which forwarded to
 * ours). sci_native_read_sock_try: under the sock's spinlock, as TCP's softirq receive
 * reads, unless a process owns the socket (-EAGAIN then: the caller reads later).
 * sci_context_id: who runs now, as the holder of such a socket is recorded: the task,
 * and whether it serves a softirq or an interrupt on its stack.
 */
int sci_native_read_sock_held(struct socket *sock, read_descriptor_t *desc,
			      sk_read_actor_t actor);
int sci_native_read_sock_try(struct socket *sock, read_descriptor_t *desc,
			     sk_read_actor_t actor);
unsigned long sci_context_id(void);

/*
 * A work item of an AF_SCI sock (rust/sys/sk_work.rs): fn(sk) in process context, on
 * system_highpri_wq. Queued only while the sock is live; its owner cancels it (waiting for
 * a run under way) in release, before the sock can go.
 */
struct sci_sk_work {
	struct work_struct work;
	struct sock *sk;
	void (*fn)(struct sock *sk);
};
void sci_sk_work_init(struct sci_sk_work *w, void (*fn)(struct sock *sk));
void sci_sk_work_queue(struct sci_sk_work *w, struct sock *sk);
void sci_sk_work_cancel(struct sci_sk_work *w);

/*
 * read_sock without the copy: the actor is fed one skb whose page frags are the ring's own
 * pages, len bytes from the kernel virtual address addr: vmalloc'd memory, or a memremap
 * of device memory that has struct pages. Otherwise (-EINVAL), past MAX_SKB_FRAGS pages
 * (-E2BIG) or when memory is short (-ENOMEM), *fed is false, released() is never called,
 * and the caller copies instead. The skb carries a ubuf_info (as MSG_ZEROCOPY's do): when
 * the last reference to its data goes, wherever and whenever that is (at once when the
 * actor kept nothing, later when it kept it), released(ctx) is called once, in any
 * context. Returns what the actor used, or its error. sci_read_lends_drain: waits until
 * every lent skb was let go and no completion runs any more (module unload, device removal).
 */
int sci_read_lend(read_descriptor_t *desc, sk_read_actor_t actor, struct sock *sk,
		  const void *addr, size_t len, void (*released)(void *ctx), void *ctx, bool *fed);
void sci_read_lends_drain(void);

/* The peer of a connection waiting in a TCP listener's accept queue. */
struct sci_queued_peer {
	__u8 addr[16];		/* IPv4 in the first 4 bytes */
	__u16 port;		/* host order */
	__u8 v6;
};

/*
 * The peers of the connections waiting in listening TCP socket sk's accept queue, oldest
 * first, at most max of them: how many there are (max + 1 when there are more); 0 when sk
 * is not listening.
 */
int sci_accept_queue_peers(struct sock *sk, struct sci_queued_peer *out, int max);

/*
 * Datagram sockets (socket/dgram/). sci_udp_wants_cmsg: whether UDP sock sk's reader asked
 * for control messages with its datagrams other than the packet information
 * (IP_PKTINFO, IPV6_RECVPKTINFO), the traffic class (IP_RECVTOS, IPV6_RECVTCLASS) and the
 * drop count (SO_RXQ_OVFL): the other IP_RECV* options, their IPv6 twins, timestamps,
 * SO_RCVMARK, SO_PASSSEC, which a datagram from an implicit SCI connection cannot carry
 * (not UDP_GRO: see sci_udp_wants_cmsg()). sci_udp_sends_plain: whether it sends each datagram as given (not corked by
 * UDP_CORK or a pending MSG_MORE). sci_udp_send_params: what UDP would put on a datagram
 * it sends to an IPv4 (v4; an IPv4-mapped one too) or IPv6 destination when its message
 * names none: the traffic class in *tos (its IP_TOS, else its IPV6_TCLASS), and, returned,
 * the segment size: asked (a UDP_SEGMENT control message's) or, when asked is -1, its
 * UDP_SEGMENT option; 0 when none; -1 when UDP refuses to segment on it (no checksum:
 * SO_NO_CHECK, UDP_NO_CHECK6_TX).
 * sci_msg_set_name: a received datagram's source address (when the caller asked for it).
 * sci_msg_set_flags: adds to a received message's flags.
 */
bool sci_udp_wants_cmsg(struct sock *sk);
bool sci_udp_sends_plain(struct sock *sk);
int sci_udp_send_params(struct sock *sk, bool v4, int asked, u8 *tos);
/*
 * Whether UDP sock sk holds a datagram to an IPv4 (v4; an IPv4-mapped one too) or IPv6
 * destination to the route's MTU, refusing a longer one (EMSGSIZE) rather than fragment it:
 * IP_MTU_DISCOVER DO, PROBE or INTERFACE (__ip_append_data()), their IPV6_MTU_DISCOVER
 * twins or IPV6_DONTFRAG (__ip6_append_data()).
 */
bool sci_udp_keeps_df(struct sock *sk, bool v4);
/* Whether a read of UDP sock sk finds something now: a datagram, or an error to report. */
bool sci_udp_readable(struct sock *sk);
/* Whether sk was shut for reading (a blocking read returns 0 at once). */
bool sci_sk_read_shut(const struct sock *sk);
void sci_msg_set_name(struct msghdr *msg, const void *addr, int len);
void sci_msg_set_flags(struct msghdr *msg, int flags);

/*
 * Packet information and traffic class for datagrams over SCI, as UDP gives and takes
 * them. sci_udp_put_ip_cmsgs: the control messages UDP sock sk's reader asked for with a
 * datagram addressed to to (a sockaddr_in, or a sockaddr_in6 whose IPv4-mapped address
 * counts as IPv4; tolen bytes, looked at only when a message is asked for) with traffic
 * class tos, sent from
 * this machine (loopback) or another: the packet information (IP_PKTINFO,
 * IPV6_RECVPKTINFO: IPV6_PKTINFO, then IP_PKTINFO, in udpv6_recvmsg's order), whose
 * address is also the one a reply is sent from (ipi_spec_dst), as for any unicast
 * datagram, and whose interface is sci_local_ifindex's; then the traffic class
 * (IP_RECVTOS: IP_TOS, one byte, with an IPv4 datagram; IPV6_RECVTCLASS: IPV6_TCLASS, an
 * int, with an IPv6 one).
 * sci_local_ifindex: the interface UDP names for a datagram to local address addr of net:
 * loopback when the sender is on this machine (its datagrams come in through lo), else
 * the device that has the address (0 if none has it now).
 * sci_msg_send_control: what a message to send asks of its path: 0 when it carries no
 * control message; 1 when it carries at most one of each of: IP_PKTINFO (ipi_spec_dst) or
 * IPV6_PKTINFO (ipi6_addr; an IPv4-mapped one as IPv4), the source; IP_TOS or
 * IPV6_TCLASS (0 to 255), the traffic class; UDP_SEGMENT, the segment size; and *ask is
 * filled in; -1 for anything else (UDP takes it, and reports what it finds wrong).
 */
struct sci_send_control {
	__u8 addr[16];		/* IPv4 in the first 4 bytes; all zero: any */
	__u8 v4;
	__u8 has_source;
	int ifindex;		/* 0: any */
	int tos;		/* -1: none given */
	__u8 tos_v4;		/* given as IP_TOS (else IPV6_TCLASS) */
	__u8 has_gso;
	__u16 gso_size;
};

void sci_udp_put_ip_cmsgs(struct sock *sk, struct msghdr *msg, const void *to, int tolen,
			  bool loopback, u8 tos);
int sci_local_ifindex(struct net *net, const __u8 *addr, bool v4, bool loopback);
int sci_msg_send_control(struct msghdr *msg, struct sci_send_control *ask);

/*
 * Drops of datagrams over SCI, counted as UDP counts its own. sci_udp_add_drops: adds n
 * (a peer's count for its ring, at most INT_MAX) to UDP sock sk's drops, which
 * /proc/net/udp and SO_RXQ_OVFL show. sci_udp_put_drops: the SO_RXQ_OVFL control message
 * of a datagram over SCI when sk's reader asked for it: the drops counted when it is read
 * (UDP stamps the count when a datagram is queued; none when it is 0).
 */
void sci_udp_add_drops(struct sock *sk, unsigned int n);
void sci_udp_put_drops(struct sock *sk, struct msghdr *msg);

#endif /* AF_SCI_SYS_SOCK_H */
