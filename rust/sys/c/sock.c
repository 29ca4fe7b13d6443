// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, sock: see sock.h. No logic lives here. */
#include <linux/fs.h>
#include <linux/vmalloc.h>
#include <linux/wait_bit.h>
#include <net/inet_connection_sock.h>
#include <net/tcp.h>
#include <net/udp.h>
#include <linux/ipv6.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/ipv6.h>
#include <net/ip6_route.h>
#include "sock.h"

u64 sci_net_cookie(const struct net *net)
{
	return net->net_cookie;
}

bool sci_net_is_init(const struct net *net)
{
	return net_eq(net, &init_net);
}

bool sci_sk_ipv6only(const struct sock *sk)
{
	return sk->sk_family == AF_INET6 && sk->sk_ipv6only;
}

bool sci_linger_zero(const struct sock *sk)
{
	return sock_flag(sk, SOCK_LINGER) && !READ_ONCE(sk->sk_lingertime);
}

static_assert(SCI_NAGLE_OFF == TCP_NAGLE_OFF && SCI_NAGLE_CORK == TCP_NAGLE_CORK);

unsigned int sci_tcp_nagle(const struct sock *sk)
{
	if (sk->sk_protocol != IPPROTO_TCP || sk->sk_type != SOCK_STREAM)
		return 0;
	/* A lockless read, as tcp_sendmsg reads it under the lock: a racing setsockopt
	 * is seen by this write or the next one (both flush, see options.rs). */
	return tcp_sk(sk)->nonagle & (TCP_NAGLE_OFF | TCP_NAGLE_CORK);
}

void sci_sock_queues(const struct sock *sk, u32 *recv_q, u32 *send_q)
{
	const struct tcp_sock *tp;

	*recv_q = 0;
	*send_q = 0;
	if (sk->sk_protocol == IPPROTO_UDP && sk->sk_type == SOCK_DGRAM) {
		*recv_q = sk_rmem_alloc_get(sk);
		*send_q = sk_wmem_alloc_get(sk);
		return;
	}
	if (sk->sk_protocol != IPPROTO_TCP || sk->sk_type != SOCK_STREAM)
		return;
	if (inet_sk_state_load(sk) == TCP_LISTEN) {
		*recv_q = READ_ONCE(sk->sk_ack_backlog);
		*send_q = READ_ONCE(sk->sk_max_ack_backlog);
		return;
	}
	tp = tcp_sk(sk);
	*recv_q = max_t(int, READ_ONCE(tp->rcv_nxt) - READ_ONCE(tp->copied_seq), 0);
	*send_q = READ_ONCE(tp->write_seq) - tp->snd_una;
}

static void sci_tcp_inherit_nodelay(struct sock *to, const struct sock *from)
{
	if (sci_tcp_nagle(from) & TCP_NAGLE_OFF && to->sk_protocol == IPPROTO_TCP)
		tcp_sock_set_nodelay(to);
}

/*
 * The receive-timestamp options of from, set on to as setsockopt() sets them (which also
 * counts to among the socks that have the stack stamp packets, as sk_clone_lock() does).
 */
static void sci_sock_inherit_timestamps(struct sock *to, const struct sock *from)
{
	bool new_ts = sock_flag(from, SOCK_TSTAMP_NEW);
	struct so_timestamping ts = {
		.flags = READ_ONCE(from->sk_tsflags),
		.bind_phc = READ_ONCE(from->sk_bind_phc),
	};
	int on = 1, opt;

	if (!to->sk_socket)
		return;
	if (sock_flag(from, SOCK_RCVTSTAMP)) {
		if (sock_flag(from, SOCK_RCVTSTAMPNS))
			opt = new_ts ? SO_TIMESTAMPNS_NEW : SO_TIMESTAMPNS_OLD;
		else
			opt = new_ts ? SO_TIMESTAMP_NEW : SO_TIMESTAMP_OLD;
		sock_setsockopt(to->sk_socket, SOL_SOCKET, opt, KERNEL_SOCKPTR(&on), sizeof(on));
	}
	if (ts.flags)
		sock_setsockopt(to->sk_socket, SOL_SOCKET,
				new_ts ? SO_TIMESTAMPING_NEW : SO_TIMESTAMPING_OLD,
				KERNEL_SOCKPTR(&ts), sizeof(ts));
}

/*
 * The socket level's options of from, given to to; SO_PRIORITY only with priority (a TCP
 * sock accepted on a listener starts at 0, one a connection moves onto keeps it).
 */
static void sci_sock_copy_options(struct sock *to, const struct sock *from, bool priority)
{
	u32 locks = READ_ONCE(from->sk_userlocks);
	bool keepalive = sock_flag(from, SOCK_KEEPOPEN);

	lock_sock(to);
	WRITE_ONCE(to->sk_rcvtimeo, READ_ONCE(from->sk_rcvtimeo));
	WRITE_ONCE(to->sk_sndtimeo, READ_ONCE(from->sk_sndtimeo));
	WRITE_ONCE(to->sk_rcvlowat, READ_ONCE(from->sk_rcvlowat));
	if (priority)
		WRITE_ONCE(to->sk_priority, READ_ONCE(from->sk_priority));
	WRITE_ONCE(to->sk_mark, READ_ONCE(from->sk_mark));
	WRITE_ONCE(to->sk_lingertime, READ_ONCE(from->sk_lingertime));
	sock_valbool_flag(to, SOCK_LINGER, sock_flag(from, SOCK_LINGER));
	sock_valbool_flag(to, SOCK_URGINLINE, sock_flag(from, SOCK_URGINLINE));
	sock_valbool_flag(to, SOCK_ZEROCOPY, sock_flag(from, SOCK_ZEROCOPY));
	sock_valbool_flag(to, SOCK_BROADCAST, sock_flag(from, SOCK_BROADCAST));
	sock_valbool_flag(to, SOCK_LOCALROUTE, sock_flag(from, SOCK_LOCALROUTE));
	to->sk_reuse = from->sk_reuse;
	to->sk_reuseport = from->sk_reuseport;
	if (locks & SOCK_SNDBUF_LOCK) {
		WRITE_ONCE(to->sk_sndbuf, READ_ONCE(from->sk_sndbuf));
		to->sk_userlocks |= SOCK_SNDBUF_LOCK;
	}
	if (locks & SOCK_RCVBUF_LOCK) {
		WRITE_ONCE(to->sk_rcvbuf, READ_ONCE(from->sk_rcvbuf));
		to->sk_userlocks |= SOCK_RCVBUF_LOCK;
	}
	if (keepalive != sock_flag(to, SOCK_KEEPOPEN)) {
		/* As sk_setsockopt(SO_KEEPALIVE): arms or stops the timer. */
		if (to->sk_prot->keepalive)
			to->sk_prot->keepalive(to, keepalive);
		sock_valbool_flag(to, SOCK_KEEPOPEN, keepalive);
	}
	release_sock(to);
	sci_sock_inherit_timestamps(to, from);
}

void sci_sock_inherit_options(struct sock *to, const struct sock *from)
{
	sci_sock_copy_options(to, from, false);
}

static void sci_tcp_copy_options(struct sock *to, const struct sock *from, bool priority)
{
	const struct tcp_sock *ft = tcp_sk(from);

	if (to->sk_protocol != IPPROTO_TCP || from->sk_protocol != IPPROTO_TCP)
		return;
	sci_tcp_inherit_nodelay(to, from);
	/* TCP's own first: a keepalive timer that the socket level arms runs on them. */
	lock_sock(to);
	WRITE_ONCE(tcp_sk(to)->keepalive_time, READ_ONCE(ft->keepalive_time));
	WRITE_ONCE(tcp_sk(to)->keepalive_intvl, READ_ONCE(ft->keepalive_intvl));
	WRITE_ONCE(tcp_sk(to)->keepalive_probes, READ_ONCE(ft->keepalive_probes));
	WRITE_ONCE(inet_csk(to)->icsk_user_timeout, READ_ONCE(inet_csk(from)->icsk_user_timeout));
	WRITE_ONCE(tcp_sk(to)->notsent_lowat, READ_ONCE(ft->notsent_lowat));
	/* IP_TOS, IP_TTL and their IPv6 twins, as TCP's accepted socket has them (without the
	 * priority that ip_sock_set_tos() would derive: that one starts at 0). */
	WRITE_ONCE(inet_sk(to)->uc_ttl, READ_ONCE(inet_sk(from)->uc_ttl));
	if (READ_ONCE(inet_sk(to)->tos) != READ_ONCE(inet_sk(from)->tos)) {
		WRITE_ONCE(inet_sk(to)->tos, READ_ONCE(inet_sk(from)->tos));
		sk_dst_reset(to);
	}
#if IS_ENABLED(CONFIG_IPV6)
	if (to->sk_family == AF_INET6 && from->sk_family == AF_INET6) {
		WRITE_ONCE(inet6_sk(to)->tclass, READ_ONCE(inet6_sk(from)->tclass));
		WRITE_ONCE(inet6_sk(to)->hop_limit, READ_ONCE(inet6_sk(from)->hop_limit));
	}
#endif
	release_sock(to);
	sci_sock_copy_options(to, from, priority);
}

void sci_tcp_inherit_options(struct sock *to, const struct sock *from)
{
	sci_tcp_copy_options(to, from, true);
}

void sci_tcp_accept_options(struct sock *to, const struct sock *listener)
{
	sci_tcp_copy_options(to, listener, false);
}

static struct proto sci_proto = {
	.name		= "AF_SCI",
	.owner		= THIS_MODULE,
};

/*
 * The socks come from a cache of their own ("AF_SCI" in /proc/slabinfo), as net/smc's do:
 * its object count is the number of live AF_SCI socks, which the churn tests compare
 * with a baseline, and proto_unregister() at rmmod warns if any were never freed.
 */
int sci_proto_register(unsigned int obj_size)
{
	sci_proto.obj_size = obj_size;
	return proto_register(&sci_proto, 1);
}

void sci_proto_unregister(void)
{
	proto_unregister(&sci_proto);
}

struct sock *sci_sk_alloc(struct net *net, int family, int kern)
{
	return sk_alloc(net, family, GFP_KERNEL, &sci_proto, kern);
}

/* Datagram sockets are other objects (rust/socket/dgram/), from a cache of their own. */
static struct proto sci_dgram_proto = {
	.name		= "AF_SCI-DGRAM",
	.owner		= THIS_MODULE,
};

int sci_dgram_proto_register(unsigned int obj_size)
{
	sci_dgram_proto.obj_size = obj_size;
	return proto_register(&sci_dgram_proto, 1);
}

void sci_dgram_proto_unregister(void)
{
	proto_unregister(&sci_dgram_proto);
}

struct sock *sci_dgram_sk_alloc(struct net *net, int family, int kern)
{
	return sk_alloc(net, family, GFP_KERNEL, &sci_dgram_proto, kern);
}

void sci_lock_sock(struct sock *sk) { lock_sock(sk); }
void sci_module_get(struct module *module) { __module_get(module); }
void sci_sock_hold(struct sock *sk) { sock_hold(sk); }
void sci_sock_put(struct sock *sk) { sock_put(sk); }
void sci_sock_orphan(struct sock *sk) { sock_orphan(sk); }
void sci_sock_graft(struct sock *sk, struct socket *parent) { sock_graft(sk, parent); }
int sci_sock_error(struct sock *sk) { return sock_error(sk); }

void sci_sock_poll_wait(struct file *file, struct socket *sock, poll_table *wait)
{
	sock_poll_wait(file, sock, wait);
}

/*
 * SOCK_SUPPORT_ZC: io_uring's IORING_OP_SEND_ZC hands a send a ubuf_info (msg_ubuf) and
 * posts its notification when the last reference to it goes. A send over SCI copies the
 * bytes before it returns and takes no reference, so the notification follows the send;
 * one that goes to the native socket (a fallback, a datagram UDP carries) passes the
 * ubuf_info on, and TCP or UDP takes it as usual.
 */
void sci_sock_set_flags(struct socket *sock)
{
	set_bit(SOCK_CUSTOM_SOCKOPT, &sock->flags);
	set_bit(SOCK_SUPPORT_ZC, &sock->flags);
}

/* A kernel user (NBD) sets these on the AF_SCI socket; the native socket must obey them. */
void sci_copy_alloc_flags(struct sock *to, const struct sock *from)
{
	gfp_t gfp = READ_ONCE(from->sk_allocation);

	if (READ_ONCE(to->sk_allocation) != gfp)
		WRITE_ONCE(to->sk_allocation, gfp);
	if (to->sk_use_task_frag != from->sk_use_task_frag)
		to->sk_use_task_frag = from->sk_use_task_frag;
	if (sock_flag(from, SOCK_MEMALLOC) && !sock_flag(to, SOCK_MEMALLOC))
		sk_set_memalloc(to);
}

bool sci_tcp_recvmsg_inq(const struct sock *sk)
{
	return sk->sk_protocol == IPPROTO_TCP && sk->sk_type == SOCK_STREAM &&
	       tcp_sk(sk)->recvmsg_inq;
}

void sci_tcp_put_inq(struct msghdr *msg, int inq)
{
	put_cmsg(msg, SOL_TCP, TCP_CM_INQ, sizeof(inq), &inq);
}

void sci_tcp_put_rx_timestamp(const struct sock *sk, struct msghdr *msg)
{
	u32 tsflags = READ_ONCE(sk->sk_tsflags);
	bool new_tstamp = sock_flag(sk, SOCK_TSTAMP_NEW);
	struct scm_timestamping_internal tss = {};
	struct timespec64 now;

	/* As tcp_recv_timestamp() filters a segment's software stamp. */
	bool stamping = tsflags & SOF_TIMESTAMPING_SOFTWARE &&
			(tsflags & SOF_TIMESTAMPING_RX_SOFTWARE ||
			 !(tsflags & SOF_TIMESTAMPING_OPT_RX_FILTER));

	if (!sock_flag(sk, SOCK_RCVTSTAMP) && !stamping)
		return;
	ktime_get_real_ts64(&now);
	if (sock_flag(sk, SOCK_RCVTSTAMP)) {
		if (sock_flag(sk, SOCK_RCVTSTAMPNS)) {
			if (new_tstamp) {
				struct __kernel_timespec kts = { now.tv_sec, now.tv_nsec };

				put_cmsg(msg, SOL_SOCKET, SO_TIMESTAMPNS_NEW, sizeof(kts), &kts);
			} else {
				struct __kernel_old_timespec ts = { now.tv_sec, now.tv_nsec };

				put_cmsg(msg, SOL_SOCKET, SO_TIMESTAMPNS_OLD, sizeof(ts), &ts);
			}
		} else {
			if (new_tstamp) {
				struct __kernel_sock_timeval stv = { now.tv_sec,
								     now.tv_nsec / 1000 };

				put_cmsg(msg, SOL_SOCKET, SO_TIMESTAMP_NEW, sizeof(stv), &stv);
			} else {
				struct __kernel_old_timeval tv = { now.tv_sec,
								   now.tv_nsec / 1000 };

				put_cmsg(msg, SOL_SOCKET, SO_TIMESTAMP_OLD, sizeof(tv), &tv);
			}
		}
	}
	if (!stamping)
		return;
	tss.ts[0] = now;
	if (new_tstamp)
		put_cmsg_scm_timestamping64(msg, &tss);
	else
		put_cmsg_scm_timestamping(msg, &tss);
}

bool sci_sock_zerocopy(const struct sock *sk)
{
	return sock_flag(sk, SOCK_ZEROCOPY);
}

void sci_sock_set_zerocopy(struct sock *sk, bool on)
{
	sock_valbool_flag(sk, SOCK_ZEROCOPY, on);
}

bool sci_sock_error_queued(const struct sock *sk)
{
	return !skb_queue_empty_lockless(&sk->sk_error_queue);
}

/*
 * As tcp_sendmsg_locked() takes and gives back a MSG_ZEROCOPY send's notification, for a
 * send whose bytes are copied (its code SO_EE_CODE_ZEROCOPY_COPIED, as TCP's on loopback):
 * the bytes are in the ring when the send returns, so the notification goes at once.
 */
int sci_zerocopy_begin(struct sock *native, const struct msghdr *msg, size_t len,
		       struct ubuf_info **uarg)
{
	*uarg = NULL;
	if (!(msg->msg_flags & MSG_ZEROCOPY) || !len || msg->msg_ubuf ||
	    !sock_flag(native, SOCK_ZEROCOPY))
		return 0;
	*uarg = msg_zerocopy_realloc(native, len, NULL);
	return *uarg ? 0 : -ENOBUFS;
}

void sci_zerocopy_end(struct ubuf_info *uarg, bool sent)
{
	if (!sent) {
		net_zcopy_put_abort(uarg, true);
		return;
	}
	uarg_to_msgzc(uarg)->zerocopy = 0;
	net_zcopy_put(uarg);
}

struct net *sci_sock_net(const struct sock *sk)
{
	return sock_net(sk);
}

int sci_copy_from_sockptr(void *dst, sockptr_t src, size_t size)
{
	return copy_from_sockptr(dst, src, size) ? -EFAULT : 0;
}

sockptr_t sci_kernel_sockptr(void *p)
{
	return KERNEL_SOCKPTR(p);
}

void sci_callback_write_lock(struct sock *sk) { write_lock_bh(&sk->sk_callback_lock); }
void sci_callback_write_unlock(struct sock *sk) { write_unlock_bh(&sk->sk_callback_lock); }
void sci_callback_read_lock(struct sock *sk) { read_lock_bh(&sk->sk_callback_lock); }
void sci_callback_read_unlock(struct sock *sk) { read_unlock_bh(&sk->sk_callback_lock); }

void sci_set_user_data(struct sock *sk, void *data)
{
	__rcu_assign_sk_user_data_with_flags(sk, data, SK_USER_DATA_NOCOPY);
}

/* Read under sk_callback_lock (not RCU), as smc_clcsock_user_data() does. */
void *sci_user_data(struct sock *sk)
{
	return (void *)((uintptr_t)sk->sk_user_data & SK_USER_DATA_PTRMASK);
}

/*
 * TCP's proto_ops for @family, read from a probe socket: inet6_stream_ops is not
 * exported, and the table of a live socket is what a fallen-back socket must copy.
 * NULL when the family cannot be created (no IPv6).
 */
const struct proto_ops *sci_tcp_ops(int family)
{
	const struct proto_ops *ops;
	struct socket *sock;

	if (sock_create_kern(&init_net, family, SOCK_STREAM, IPPROTO_TCP, &sock))
		return NULL;
	ops = sock->ops;
	sock_release(sock);
	return ops;
}

/* The socket a socket file was created for (its inode's), whatever private_data says. */
struct socket *sci_file_socket(struct file *file)
{
	return SOCKET_I(file_inode(file));
}

void sci_sock_set_fasync(struct sock *sk, bool on)
{
	if (on)
		sock_set_flag(sk, SOCK_FASYNC);
	else
		sock_reset_flag(sk, SOCK_FASYNC);
}

int sci_kernel_send_nowait(struct socket *sock, const void *buf, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL };
	struct kvec vec = { .iov_base = (void *)buf, .iov_len = len };

	return kernel_sendmsg(sock, &msg, &vec, 1, len);
}

int sci_kernel_recv_nowait(struct socket *sock, void *buf, size_t len, bool peek)
{
	int flags = MSG_DONTWAIT | (peek ? MSG_PEEK : 0);
	struct msghdr msg = { .msg_flags = flags };
	struct kvec vec = { .iov_base = buf, .iov_len = len };

	return kernel_recvmsg(sock, &msg, &vec, 1, len, flags);
}

int sci_read_buf_alloc(struct sock *sk, size_t len, struct sci_read_buf *buf)
{
	/* Never sleeping: the actor may hold an atomic kmap between calls (iscsi_tcp). */
	gfp_t gfp = sk_gfp_mask(sk, GFP_ATOMIC | __GFP_NOWARN);
	struct skb_shared_info *shinfo;
	int err, i;

	buf->skb = alloc_skb_with_frags(0, len, 0, &err, gfp);
	if (!buf->skb)
		return -ENOMEM;
	skb_len_add(buf->skb, len);
	shinfo = skb_shinfo(buf->skb);
	for (i = 0; i < shinfo->nr_frags; i++)
		bvec_set_page(&buf->bvec[i], skb_frag_page(&shinfo->frags[i]),
			      skb_frag_size(&shinfo->frags[i]), skb_frag_off(&shinfo->frags[i]));
	iov_iter_bvec(&buf->iter, ITER_DEST, buf->bvec, shinfo->nr_frags, len);
	return 0;
}

/*
 * The actor fed the first len bytes of skb (none when len is 0), then our reference put:
 * what the actor used, or its error. With bottom halves off, as in TCP's receive softirq,
 * where such actors run: iscsi_tcp's completion path takes its session lock without _bh.
 */
static int sci_feed_actor(read_descriptor_t *desc, sk_read_actor_t actor, struct sk_buff *skb,
			  size_t len)
{
	int used = 0;

	if (len) {
		local_bh_disable();
		used = actor(desc, skb, 0, len);
		local_bh_enable();
	}
	consume_skb(skb);
	return used;
}

int sci_read_buf_feed(read_descriptor_t *desc, sk_read_actor_t actor, struct sci_read_buf *buf,
		      size_t len)
{
	struct sk_buff *skb = buf->skb;

	buf->skb = NULL;
	if (len < skb->len && pskb_trim(skb, len))
		len = 0;
	return sci_feed_actor(desc, actor, skb, len);
}

/* A lent skb's zerocopy state: how the ring learns that its pages were let go. */
struct sci_lend {
	struct ubuf_info ubuf;
	void (*released)(void *ctx);
	void *ctx;
};

/* Lent skbs not yet let go: the module is not unloaded while one is (its completion is here). */
static atomic_t sci_lends_out = ATOMIC_INIT(0);

static void sci_lend_complete(struct sk_buff *skb, struct ubuf_info *uarg, bool zerocopy_success)
{
	struct sci_lend *lend = container_of(uarg, struct sci_lend, ubuf);

	/* A copy of the skb (pskb_copy) took a reference of its own: the last one ends it. */
	if (!refcount_dec_and_test(&uarg->refcnt))
		return;
	/* Under RCU, so that sci_read_lends_drain() also waits for this function's end. */
	rcu_read_lock();
	lend->released(lend->ctx);
	kfree(lend);
	if (atomic_dec_and_test(&sci_lends_out))
		wake_up_var(&sci_lends_out);
	rcu_read_unlock();
}

static const struct ubuf_info_ops sci_lend_ops = {
	.complete = sci_lend_complete,
};

int sci_read_lend(read_descriptor_t *desc, sk_read_actor_t actor, struct sock *sk,
		  const void *addr, size_t len, void (*released)(void *ctx), void *ctx, bool *fed)
{
	gfp_t gfp = sk_gfp_mask(sk, GFP_ATOMIC | __GFP_NOWARN);
	unsigned long start = (unsigned long)addr;
	struct page *pages[MAX_SKB_FRAGS];
	struct sci_lend *lend;
	struct sk_buff *skb;
	int i, n_pages;
	size_t done;

	*fed = false;
	if (!len || !is_vmalloc_addr(addr) || !is_vmalloc_addr(addr + len - 1))
		return -EINVAL;
	n_pages = DIV_ROUND_UP(offset_in_page(start) + len, PAGE_SIZE);
	if (n_pages > MAX_SKB_FRAGS)
		return -E2BIG;
	/* vmalloc'd pages, or a memremap of device memory that has struct pages (ZONE_DEVICE) */
	for (i = 0; i < n_pages; i++) {
		pages[i] = vmalloc_to_page((void *)((start & PAGE_MASK) + i * PAGE_SIZE));
		if (!pages[i] || !pfn_valid(page_to_pfn(pages[i])))
			return -EINVAL;
	}
	skb = alloc_skb(0, gfp);
	if (!skb)
		return -ENOMEM;
	lend = kmalloc(sizeof(*lend), gfp);
	if (!lend) {
		kfree_skb(skb);
		return -ENOMEM;
	}
	lend->ubuf.ops = &sci_lend_ops;
	lend->ubuf.flags = SKBFL_ZEROCOPY_FRAG;
	refcount_set(&lend->ubuf.refcnt, 1);
	lend->released = released;
	lend->ctx = ctx;
	for (i = 0, done = 0; i < n_pages; i++) {
		size_t off = offset_in_page(start + done);
		size_t n = min_t(size_t, len - done, PAGE_SIZE - off);

		/*
		 * The frag's own reference: a vmalloc'd page outlives its segment, freed
		 * meanwhile. Device pages stay while the device does, whose removal drains.
		 */
		get_page(pages[i]);
		skb_fill_page_desc(skb, i, pages[i], off, n);
		done += n;
	}
	skb->len = len;
	skb->data_len = len;
	skb->truesize += len;
	atomic_inc(&sci_lends_out);
	skb_zcopy_init(skb, &lend->ubuf);
	*fed = true;
	/* Ours is the last reference, unless the actor kept one: then released() comes later. */
	return sci_feed_actor(desc, actor, skb, len);
}

void sci_read_lends_drain(void)
{
	wait_var_event(&sci_lends_out, !atomic_read(&sci_lends_out));
	synchronize_rcu();
}

int sci_native_read_sock_held(struct socket *sock, read_descriptor_t *desc,
			      sk_read_actor_t actor)
{
	int ret;

	if (!sock->ops->read_sock)
		return -EOPNOTSUPP;
	local_bh_disable();
	ret = sock->ops->read_sock(sock->sk, desc, actor);
	local_bh_enable();
	return ret;
}

int sci_native_read_sock_try(struct socket *sock, read_descriptor_t *desc,
			     sk_read_actor_t actor)
{
	struct sock *sk = sock->sk;
	int ret;

	if (!sock->ops->read_sock)
		return -EOPNOTSUPP;
	local_bh_disable();
	bh_lock_sock(sk);
	ret = sock_owned_by_user(sk) ? -EAGAIN : sock->ops->read_sock(sk, desc, actor);
	bh_unlock_sock(sk);
	local_bh_enable();
	return ret;
}

unsigned long sci_context_id(void)
{
	return (unsigned long)current | (in_serving_softirq() ? 1 : 0) | (in_hardirq() ? 2 : 0);
}

static void sci_sk_work_run(struct work_struct *work)
{
	struct sci_sk_work *w = container_of(work, struct sci_sk_work, work);

	w->fn(READ_ONCE(w->sk));
}

void sci_sk_work_init(struct sci_sk_work *w, void (*fn)(struct sock *sk))
{
	INIT_WORK(&w->work, sci_sk_work_run);
	w->sk = NULL;
	w->fn = fn;
}

void sci_sk_work_queue(struct sci_sk_work *w, struct sock *sk)
{
	WRITE_ONCE(w->sk, sk);
	queue_work(system_highpri_wq, &w->work);
}

void sci_sk_work_cancel(struct sci_sk_work *w)
{
	cancel_work_sync(&w->work);
}

int sci_accept_queue_peers(struct sock *sk, struct sci_queued_peer *out, int max)
{
	struct request_sock_queue *queue = &inet_csk(sk)->icsk_accept_queue;
	struct request_sock *req;
	int n = 0;

	if (READ_ONCE(sk->sk_state) != TCP_LISTEN)
		return 0;
	spin_lock_bh(&queue->rskq_lock);
	for (req = queue->rskq_accept_head; req; req = req->dl_next) {
		struct sock *child = req->sk;

		if (n == max) {
			n++;
			break;
		}
		memset(&out[n], 0, sizeof(out[n]));
		if (child) {
			out[n].port = ntohs(inet_sk(child)->inet_dport);
#if IS_ENABLED(CONFIG_IPV6)
			if (child->sk_family == AF_INET6) {
				memcpy(out[n].addr, &child->sk_v6_daddr, 16);
				out[n].v6 = 1;
			} else
#endif
				memcpy(out[n].addr, &inet_sk(child)->inet_daddr, 4);
		}
		n++;
	}
	spin_unlock_bh(&queue->rskq_lock);
	return n;
}

bool sci_udp_wants_cmsg(struct sock *sk)
{
	if (inet_cmsg_flags(inet_sk(sk)) & ~(IP_CMSG_PKTINFO | IP_CMSG_TOS))
		return true;
#if IS_ENABLED(CONFIG_IPV6)
	if (sk->sk_family == AF_INET6) {
		struct ipv6_pinfo *np = inet6_sk(sk);
		typeof(np->rxopt) others = { .all = READ_ONCE(np->rxopt.all) };

		others.bits.rxinfo = 0;
		others.bits.rxtclass = 0;
		if (others.all)
			return true;
	}
#endif
	if (sock_flag(sk, SOCK_RCVTSTAMP) || sock_flag(sk, SOCK_RCVTSTAMPNS) ||
	    sock_flag(sk, SOCK_RCVMARK) ||
	    READ_ONCE(sk->sk_tsflags))
		return true;
	/*
	 * UDP_GRO is not among them: a datagram over SCI is read alone, with no UDP_GRO
	 * message, as UDP gives one it did not coalesce.
	 */
	return sk->sk_socket && test_bit(SOCK_PASSSEC, &sk->sk_socket->flags);
}

bool sci_udp_sends_plain(struct sock *sk)
{
	return !udp_test_bit(CORK, sk) && !READ_ONCE(udp_sk(sk)->pending);
}

int sci_udp_send_params(struct sock *sk, bool v4, int asked, u8 *tos)
{
	int size = asked >= 0 ? asked : READ_ONCE(udp_sk(sk)->gso_size);

#if IS_ENABLED(CONFIG_IPV6)
	if (!v4)
		*tos = READ_ONCE(inet6_sk(sk)->tclass);
	else
#endif
		*tos = READ_ONCE(inet_sk(sk)->tos);
	/* udp_send_skb() refuses to segment without the checksum (EINVAL). */
	if (size && sk->sk_no_check_tx)
		return -1;
	return size;
}

bool sci_udp_keeps_df(struct sock *sk, bool v4)
{
#if IS_ENABLED(CONFIG_IPV6)
	if (!v4)
		return !ip6_sk_ignore_df(sk) || inet6_test_bit(DONTFRAG, sk);
#endif
	return !ip_sk_ignore_df(sk);
}

static bool sci_udp_wants_tclass(struct sock *sk)
{
#if IS_ENABLED(CONFIG_IPV6)
	return sk->sk_family == AF_INET6 && inet6_sk(sk)->rxopt.bits.rxtclass;
#else
	return false;
#endif
}

static void sci_udp_put_tos(struct sock *sk, struct msghdr *msg, u8 tos, bool v4)
{
	if (v4) {
		/* ip_cmsg_recv_tos(): the IPv4 header's byte, on an IPv6 socket too. */
		if (inet_cmsg_flags(inet_sk(sk)) & IP_CMSG_TOS)
			put_cmsg(msg, SOL_IP, IP_TOS, 1, &tos);
		return;
	}
	if (sci_udp_wants_tclass(sk)) {
		int tclass = tos;

		put_cmsg(msg, SOL_IPV6, IPV6_TCLASS, sizeof(tclass), &tclass);
	}
}

bool sci_udp_readable(struct sock *sk)
{
	return !skb_queue_empty_lockless(&udp_sk(sk)->reader_queue) ||
	       !skb_queue_empty_lockless(&sk->sk_receive_queue) || READ_ONCE(sk->sk_err);
}

bool sci_sk_read_shut(const struct sock *sk)
{
	return READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN;
}

static bool sci_udp_wants_pktinfo(struct sock *sk)
{
#if IS_ENABLED(CONFIG_IPV6)
	if (sk->sk_family == AF_INET6 && inet6_sk(sk)->rxopt.bits.rxinfo)
		return true;
#endif
	return inet_cmsg_flags(inet_sk(sk)) & IP_CMSG_PKTINFO;
}

static void sci_udp_put_pktinfo(struct sock *sk, struct msghdr *msg, const __u8 *addr,
				bool v4, int ifindex)
{
#if IS_ENABLED(CONFIG_IPV6)
	if (sk->sk_family == AF_INET6 && inet6_sk(sk)->rxopt.bits.rxinfo) {
		struct in6_pktinfo info = { .ipi6_ifindex = ifindex };

		if (v4)
			ipv6_addr_set_v4mapped(*(const __be32 *)addr, &info.ipi6_addr);
		else
			memcpy(&info.ipi6_addr, addr, sizeof(info.ipi6_addr));
		put_cmsg(msg, SOL_IPV6, IPV6_PKTINFO, sizeof(info), &info);
	}
#endif
	if (v4 && (inet_cmsg_flags(inet_sk(sk)) & IP_CMSG_PKTINFO)) {
		struct in_pktinfo info = { .ipi_ifindex = ifindex };

		memcpy(&info.ipi_addr, addr, sizeof(info.ipi_addr));
		info.ipi_spec_dst = info.ipi_addr;
		put_cmsg(msg, SOL_IP, IP_PKTINFO, sizeof(info), &info);
	}
}

int sci_local_ifindex(struct net *net, const __u8 *addr, bool v4, bool loopback)
{
	struct net_device *dev = NULL;
	int ifindex = 0;

	if (loopback)
		return LOOPBACK_IFINDEX;
	rcu_read_lock();
	if (v4)
		dev = __ip_dev_find(net, *(const __be32 *)addr, false);
#if IS_ENABLED(CONFIG_IPV6)
	else
		dev = ipv6_dev_find(net, (const struct in6_addr *)addr, NULL);
#endif
	if (dev)
		ifindex = dev->ifindex;
	rcu_read_unlock();
	return ifindex;
}

void sci_udp_put_ip_cmsgs(struct sock *sk, struct msghdr *msg, const void *to, int tolen,
			  bool loopback, u8 tos)
{
	struct sockaddr_in6 sa = {};	/* to's bytes, aligned */
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&sa;
	const __u8 *addr;
	bool v4;

	/* Nothing asked for (the common case): the address is not even looked at. */
	if (!sci_udp_wants_pktinfo(sk) && !(inet_cmsg_flags(inet_sk(sk)) & IP_CMSG_TOS) &&
	    !sci_udp_wants_tclass(sk))
		return;
	if (tolen < (int)sizeof(*sin))
		return;
	memcpy(&sa, to, min_t(int, tolen, sizeof(sa)));
	if (sin->sin_family == AF_INET) {
		addr = (const __u8 *)&sin->sin_addr;
		v4 = true;
	} else if (tolen >= (int)sizeof(sa) && sa.sin6_family == AF_INET6) {
		v4 = ipv6_addr_v4mapped(&sa.sin6_addr);
		addr = v4 ? (const __u8 *)&sa.sin6_addr.s6_addr32[3] : sa.sin6_addr.s6_addr;
	} else {
		return;
	}
	/* In udp_recvmsg()'s and udpv6_recvmsg()'s order. */
	if (sci_udp_wants_pktinfo(sk))
		sci_udp_put_pktinfo(sk, msg, addr, v4,
				    sci_local_ifindex(sock_net(sk), addr, v4, loopback));
	sci_udp_put_tos(sk, msg, tos, v4);
}

int sci_msg_send_control(struct msghdr *msg, struct sci_send_control *ask)
{
	struct cmsghdr *cmsg;
	int found = 0;

	if (!msg->msg_controllen)
		return 0;
	/* The socket layer copied a user's control messages in (____sys_sendmsg). */
	if (msg->msg_control_is_user)
		return -1;
	memset(ask, 0, sizeof(*ask));
	ask->tos = -1;
	for_each_cmsghdr(cmsg, msg) {
		if (!CMSG_OK(msg, cmsg))
			return -1;
		if (cmsg->cmsg_level == SOL_IP && cmsg->cmsg_type == IP_PKTINFO &&
		    cmsg->cmsg_len == CMSG_LEN(sizeof(struct in_pktinfo)) && !ask->has_source) {
			struct in_pktinfo *info = (struct in_pktinfo *)CMSG_DATA(cmsg);

			memcpy(ask->addr, &info->ipi_spec_dst, 4);
			ask->v4 = 1;
			ask->ifindex = info->ipi_ifindex;
			ask->has_source = 1;
		} else if (cmsg->cmsg_level == SOL_IPV6 && cmsg->cmsg_type == IPV6_PKTINFO &&
			   cmsg->cmsg_len == CMSG_LEN(sizeof(struct in6_pktinfo)) &&
			   !ask->has_source) {
			struct in6_pktinfo *info = (struct in6_pktinfo *)CMSG_DATA(cmsg);

			if (ipv6_addr_v4mapped(&info->ipi6_addr)) {
				memcpy(ask->addr, &info->ipi6_addr.s6_addr32[3], 4);
				ask->v4 = 1;
			} else {
				memcpy(ask->addr, &info->ipi6_addr, 16);
			}
			ask->ifindex = info->ipi6_ifindex;
			ask->has_source = 1;
		} else if (cmsg->cmsg_level == SOL_IP && cmsg->cmsg_type == IP_TOS &&
			   ask->tos < 0) {
			/* As ip_cmsg_send() takes it: an int or a byte, 0 to 255. */
			int val;

			if (cmsg->cmsg_len == CMSG_LEN(sizeof(int)))
				val = *(int *)CMSG_DATA(cmsg);
			else if (cmsg->cmsg_len == CMSG_LEN(sizeof(u8)))
				val = *(u8 *)CMSG_DATA(cmsg);
			else
				return -1;
			if (val < 0 || val > 255)
				return -1;
			ask->tos = val;
			ask->tos_v4 = 1;
		} else if (cmsg->cmsg_level == SOL_IPV6 && cmsg->cmsg_type == IPV6_TCLASS &&
			   cmsg->cmsg_len == CMSG_LEN(sizeof(int)) && ask->tos < 0) {
			/* As ip6_datagram_send_ctl() takes it: -1 is the socket's own. */
			int val = *(int *)CMSG_DATA(cmsg);

			if (val < 0 || val > 255)	/* -1 (the socket's own) too: UDP's */
				return -1;
			ask->tos = val;
		} else if (cmsg->cmsg_level == SOL_UDP && cmsg->cmsg_type == UDP_SEGMENT &&
			   cmsg->cmsg_len == CMSG_LEN(sizeof(__u16)) && !ask->has_gso) {
			ask->gso_size = *(__u16 *)CMSG_DATA(cmsg);
			ask->has_gso = 1;
		} else {
			return -1;
		}
		found = 1;
	}
	return found;
}

void sci_msg_set_name(struct msghdr *msg, const void *addr, int len)
{
	if (msg->msg_name && len > 0 && len <= (int)sizeof(struct sockaddr_storage)) {
		memcpy(msg->msg_name, addr, len);
		msg->msg_namelen = len;
	}
}

void sci_msg_set_flags(struct msghdr *msg, int flags)
{
	msg->msg_flags |= flags;
}

void sci_udp_add_drops(struct sock *sk, unsigned int n)
{
	atomic_add(min_t(unsigned int, n, INT_MAX), &sk->sk_drops);
}

void sci_udp_put_drops(struct sock *sk, struct msghdr *msg)
{
	u32 drops = atomic_read(&sk->sk_drops);

	/* As sock_recv_drops() does with the count stamped at queueing. */
	if (sock_flag(sk, SOCK_RXQ_OVFL) && drops)
		put_cmsg(msg, SOL_SOCKET, SO_RXQ_OVFL, sizeof(drops), &drops);
}
