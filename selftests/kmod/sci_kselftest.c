// SPDX-License-Identifier: GPL-2.0
/*
 * sci_kselftest: drives AF_SCI sockets from the kernel, as kernel socket users such as
 * the NBD driver do: sockets created with sock_create_kern(), kernel_bind/listen/
 * connect/accept, data through kernel_sendmsg/kernel_recvmsg with kvec iterators and
 * sock_sendmsg/sock_recvmsg with bvec iterators (the iterators NBD and splice use), and
 * kernel_sock_shutdown().
 *
 * And read_sock, as iscsi_tcp reads (kernel/patches/0002-*): an actor that keeps every
 * socket buffer it is fed (skb_get; a clone would not do: skb_clone copies a lent
 * buffer's pages first, as for any zerocopy skb). On the loopback fabric read_sock lends
 * the ring's own pages; a kept buffer must hold the writer off them until it is let go,
 * and the writer must go on once it is.
 *
 * And a reader driven by sk_data_ready, as iscsi_tcp's is: it calls read_sock when told
 * and waits for the next sk_data_ready when the ring is empty, in a ping-pong with a
 * kernel writer. A byte that arrives while read_sock posts its wait request rings no
 * doorbell; read_sock must still read it or have the reader told to come back. With
 * af_sci's test_wait_race_us set, most messages arrive in that window.
 *
 * And a reader that calls read_sock in its sk_data_ready, with bottom halves off, as
 * iscsi_tcp reads TCP: read_sock never sleeps, and one that finds the connection held by
 * a process leaves the read to the socket's work item, which wakes the reader again.
 *
 * And sk_write_space, as iscsi_tcp's transmit relies on it (kernel/patches/0004-*): it is
 * called, as TCP calls it, only for a writer that ran out of room (SOCK_NOSPACE), so once
 * after a stall and not for every answer of a ping-pong whose writer never waited for
 * room; a writer that found the ring full with MSG_DONTWAIT is called back once its peer
 * read, and can send again.
 *
 * The test runs when the module is loaded: "insmod sci_kselftest.ko family=27" succeeds
 * only if every check passed; failures are logged and make insmod fail with EIO. With
 * keep=1 one clone stays kept until the module is removed, after its sockets are closed:
 * "rmmod af_sci" must then wait for it (the buffer's completion is af_sci's code).
 */
#include <linux/bvec.h>
#include <linux/delay.h>
#include <linux/skbuff.h>
#include <net/tcp.h>
#include <linux/highmem.h>
#include <linux/in.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <net/net_namespace.h>
#include <net/sock.h>

static int family = 27;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "AF_SCI family number (/sys/module/af_sci/parameters/family)");
static bool keep;
module_param(keep, bool, 0444);
MODULE_PARM_DESC(keep, "keep one lent socket buffer until this module is removed");

#define KVEC_BYTES	(4 << 20)
#define CHUNK		(48 * 1024 + 7)	/* odd size: chunks straddle pages */
#define BVEC_PAGES	16

static int checks, failures;

#define CHECK(cond, fmt, ...) do {						\
	checks++;								\
	if (!(cond)) {								\
		failures++;							\
		pr_err("sci_kselftest: FAIL %s:%d: " fmt "\n", __func__, __LINE__, ##__VA_ARGS__); \
	}									\
} while (0)

static u8 pattern(size_t off)
{
	return (u8)(off * 131 + (off >> 9) * 7 + 3);
}

/* kvec: 4 MiB in odd-sized chunks, each sent with kernel_sendmsg, read back with MSG_WAITALL. */
static void test_kvec(struct socket *tx, struct socket *rx)
{
	u8 *out = kmalloc(CHUNK, GFP_KERNEL), *in = kmalloc(CHUNK, GFP_KERNEL);
	size_t off = 0, i;

	if (!out || !in) {
		CHECK(0, "out of memory");
		goto out;
	}
	while (off < KVEC_BYTES) {
		size_t len = min_t(size_t, CHUNK, KVEC_BYTES - off);
		struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
		struct kvec vec = { .iov_base = out, .iov_len = len };
		int ret;

		for (i = 0; i < len; i++)
			out[i] = pattern(off + i);
		ret = kernel_sendmsg(tx, &msg, &vec, 1, len);
		if (ret != len) {
			CHECK(0, "kernel_sendmsg at %zu returned %d, want %zu", off, ret, len);
			goto out;
		}
		memset(in, 0, len);
		vec.iov_base = in;
		ret = kernel_recvmsg(rx, &msg, &vec, 1, len, MSG_WAITALL);
		if (ret != len) {
			CHECK(0, "kernel_recvmsg at %zu returned %d, want %zu", off, ret, len);
			goto out;
		}
		if (memcmp(in, out, len)) {
			CHECK(0, "kvec data differs in the chunk at %zu", off);
			goto out;
		}
		off += len;
	}
	CHECK(off == KVEC_BYTES, "kvec transfer stopped at %zu", off);
out:
	kfree(out);
	kfree(in);
}

/* bvec: pages sent with sock_sendmsg, received into other pages with sock_recvmsg. */
static void test_bvec(struct socket *tx, struct socket *rx)
{
	struct page *out[BVEC_PAGES] = {}, *in[BVEC_PAGES] = {};
	struct bio_vec bv[BVEC_PAGES];
	size_t len = BVEC_PAGES * PAGE_SIZE - 100, i;
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	int ret, p;

	for (p = 0; p < BVEC_PAGES; p++) {
		out[p] = alloc_page(GFP_KERNEL);
		in[p] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!out[p] || !in[p]) {
			CHECK(0, "out of memory");
			goto out;
		}
		for (i = 0; i < PAGE_SIZE; i++)
			((u8 *)page_address(out[p]))[i] = pattern(p * PAGE_SIZE + i);
		bvec_set_page(&bv[p], out[p], PAGE_SIZE, 0);
	}
	bv[BVEC_PAGES - 1].bv_len -= 100;
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, BVEC_PAGES, len);
	ret = sock_sendmsg(tx, &msg);
	CHECK(ret == len, "sock_sendmsg(bvec) returned %d, want %zu", ret, len);

	for (p = 0; p < BVEC_PAGES; p++)
		bvec_set_page(&bv[p], in[p], PAGE_SIZE, 0);
	bv[BVEC_PAGES - 1].bv_len -= 100;
	msg = (struct msghdr){};
	iov_iter_bvec(&msg.msg_iter, ITER_DEST, bv, BVEC_PAGES, len);
	ret = sock_recvmsg(rx, &msg, MSG_WAITALL);
	CHECK(ret == len, "sock_recvmsg(bvec) returned %d, want %zu", ret, len);
	for (p = 0; p < BVEC_PAGES && ret == len; p++) {
		size_t n = p == BVEC_PAGES - 1 ? PAGE_SIZE - 100 : PAGE_SIZE;

		if (memcmp(page_address(in[p]), page_address(out[p]), n)) {
			CHECK(0, "bvec data differs in page %d", p);
			break;
		}
	}
out:
	for (p = 0; p < BVEC_PAGES; p++) {
		if (out[p])
			__free_page(out[p]);
		if (in[p])
			__free_page(in[p]);
	}
}

/* read_sock with an actor that keeps every buffer it is fed. */
#define KEEP_MAX	16
#define KEEP_BYTES	(96 * 1024 + 5)
#define RING_BYTES	(256 * 1024)	/* AF_SCI's ring (rust/conn/mod.rs RING_LOG2) */

struct keeper {
	struct sk_buff *skb[KEEP_MAX];
	unsigned int off[KEEP_MAX], len[KEEP_MAX];
	int n;
	size_t total;
	u8 *seen;	/* what the actor read, in order */
};

static struct sk_buff *kept_until_exit;

static int keep_actor(read_descriptor_t *desc, struct sk_buff *skb, unsigned int off, size_t len)
{
	struct keeper *k = desc->arg.data;

	if (k->n == KEEP_MAX || k->total + len > KEEP_BYTES)
		return 0;
	if (skb_copy_bits(skb, off, k->seen + k->total, len))
		return -EFAULT;
	k->skb[k->n] = skb_get(skb);
	k->off[k->n] = off;
	k->len[k->n++] = len;
	k->total += len;
	return len;
}

/* The kept clones still hold the bytes the actor read. */
static bool kept_intact(struct keeper *k, u8 *buf)
{
	size_t at = 0;
	int i;

	for (i = 0; i < k->n; i++) {
		if (skb_copy_bits(k->skb[i], k->off[i], buf + at, k->len[i]))
			return false;
		at += k->len[i];
	}
	return !memcmp(buf, k->seen, k->total);
}

static int send_some(struct socket *sock, const u8 *buf, size_t len, int flags)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL | flags };
	struct kvec vec = { .iov_base = (void *)buf, .iov_len = len };

	return kernel_sendmsg(sock, &msg, &vec, 1, len);
}

static int recv_all(struct socket *sock, u8 *buf, size_t len)
{
	struct msghdr msg = {};
	struct kvec vec = { .iov_base = buf, .iov_len = len };

	return kernel_recvmsg(sock, &msg, &vec, 1, len, MSG_WAITALL);
}

/* read_sock until the actor took want bytes (they arrive as the writer sends them). */
static void read_kept(struct socket *rx, struct keeper *k, size_t want)
{
	unsigned long end = jiffies + 10 * HZ;
	read_descriptor_t desc = { .arg.data = k };

	while (k->total < want && time_before(jiffies, end)) {
		desc.count = 1;
		lock_sock(rx->sk);
		rx->ops->read_sock(rx->sk, &desc, keep_actor);
		release_sock(rx->sk);
		if (k->total < want)
			usleep_range(500, 1000);
	}
}

static void test_read_sock_keep(struct socket *tx, struct socket *rx)
{
	u8 *out = kvmalloc(RING_BYTES, GFP_KERNEL), *buf = kvmalloc(RING_BYTES, GFP_KERNEL);
	struct keeper k = { .seen = kvmalloc(KEEP_BYTES, GFP_KERNEL) };
	size_t i, filled = 0;
	int one = 1, ret, n;

	if (!out || !buf || !k.seen) {
		CHECK(0, "out of memory");
		goto out;
	}
	CHECK(rx->ops->read_sock, "AF_SCI has no read_sock");
	if (!rx->ops->read_sock)
		goto out;
	ret = tx->ops->setsockopt(tx, SOL_TCP, TCP_NODELAY, KERNEL_SOCKPTR(&one), sizeof(one));
	CHECK(ret == 0, "TCP_NODELAY returned %d", ret);
	for (i = 0; i < KEEP_BYTES; i++)
		out[i] = pattern(i + 17);
	ret = send_some(tx, out, KEEP_BYTES, 0);
	CHECK(ret == KEEP_BYTES, "sending %d bytes returned %d", KEEP_BYTES, ret);
	read_kept(rx, &k, KEEP_BYTES);
	CHECK(k.total == KEEP_BYTES, "read_sock's actor took %zu of %d bytes", k.total, KEEP_BYTES);
	CHECK(!memcmp(k.seen, out, k.total), "read_sock's actor read other bytes than were sent");

	/* The writer fills all it may: never the kept bytes. */
	memset(out, 0xee, RING_BYTES);
	for (;;) {
		ret = send_some(tx, out, 16 * 1024, MSG_DONTWAIT);
		if (ret <= 0)
			break;
		filled += ret;
		if (filled > 2 * RING_BYTES)
			break;
	}
	CHECK(ret == -EAGAIN, "filling the ring ended with %d, want -EAGAIN", ret);
	CHECK(filled < RING_BYTES, "the writer wrote %zu bytes past kept ones (ring %d)", filled,
	      RING_BYTES);
	CHECK(kept_intact(&k, buf), "a kept buffer's bytes changed under it");

	/* Let go: what was written is read, and the writer gets the whole ring again. */
	for (n = 0; n < k.n; n++)
		kfree_skb(k.skb[n]);
	k.n = 0;
	ret = recv_all(rx, buf, filled);
	CHECK(ret == filled, "reading the %zu filled bytes returned %d", filled, ret);
	CHECK(ret == filled && !memchr_inv(buf, 0xee, filled), "the filled bytes differ");
	tx->sk->sk_sndtimeo = 20 * HZ;
	ret = send_some(tx, out, RING_BYTES - 4096, 0);
	CHECK(ret == RING_BYTES - 4096,
	      "after the kept buffers went, sending %d bytes returned %d (space never came back)",
	      RING_BYTES - 4096, ret);
	if (ret > 0) {
		n = recv_all(rx, buf, ret);
		CHECK(n == ret && !memchr_inv(buf, 0xee, ret), "reading them back returned %d", n);
	}

	if (keep) {
		/* One clone outlives the sockets and af_sci's removal request. */
		struct keeper last = { .seen = k.seen };

		ret = send_some(tx, out, 4096, 0);
		read_kept(rx, &last, 4096);
		CHECK(last.n >= 1, "no buffer to keep (%d)", last.n);
		if (last.n >= 1)
			kept_until_exit = last.skb[0];
		for (n = 1; n < last.n; n++)
			kfree_skb(last.skb[n]);
	}
out:
	for (n = 0; n < k.n; n++)
		kfree_skb(k.skb[n]);
	kvfree(k.seen);
	kvfree(buf);
	kvfree(out);
}

/* A reader told by sk_data_ready, and a writer that waits for each message's echo. */
#define PING_BYTES	14
#define PING_ROUNDS	200

struct ping_reader {
	wait_queue_head_t wq;
	atomic_t readies;	/* sk_data_ready calls */
	u8 buf[PING_BYTES];
	size_t got;
};

static struct ping_reader ping;

/* sk_write_space calls on the two ends (the ping's writer and reader, the stall's writer). */
static atomic_t spaces[2];
static struct sock *space_sk[2];
static DECLARE_WAIT_QUEUE_HEAD(space_wq);

static void count_space(struct sock *sk)
{
	atomic_inc(&spaces[sk == READ_ONCE(space_sk[1])]);
	wake_up(&space_wq);
}

/* Installs count_space on sock as end (0 or 1) and returns what was there. */
static void (*count_spaces_of(struct socket *sock, int end))(struct sock *)
{
	void (*saved)(struct sock *sk);

	atomic_set(&spaces[end], 0);
	WRITE_ONCE(space_sk[end], sock->sk);
	write_lock_bh(&sock->sk->sk_callback_lock);
	saved = sock->sk->sk_write_space;
	sock->sk->sk_write_space = count_space;
	write_unlock_bh(&sock->sk->sk_callback_lock);
	return saved;
}

static void restore_space(struct socket *sock, void (*saved)(struct sock *))
{
	write_lock_bh(&sock->sk->sk_callback_lock);
	sock->sk->sk_write_space = saved;
	write_unlock_bh(&sock->sk->sk_callback_lock);
}

/* Installs ready as sock's sk_data_ready, as iscsi_tcp installs its own, and returns what was there. */
static void (*swap_data_ready(struct socket *sock, void (*ready)(struct sock *)))(struct sock *)
{
	void (*saved)(struct sock *sk);

	write_lock_bh(&sock->sk->sk_callback_lock);
	saved = sock->sk->sk_data_ready;
	sock->sk->sk_data_ready = ready;
	write_unlock_bh(&sock->sk->sk_callback_lock);
	return saved;
}

static void ping_data_ready(struct sock *sk)
{
	atomic_inc(&ping.readies);
	wake_up(&ping.wq);
}

static int ping_actor(read_descriptor_t *desc, struct sk_buff *skb, unsigned int off, size_t len)
{
	size_t n = min(len, PING_BYTES - ping.got);

	if (skb_copy_bits(skb, off, ping.buf + ping.got, n))
		return -EFAULT;
	ping.got += n;
	if (ping.got == PING_BYTES)
		desc->count = 0;
	return n;
}

static void ping_message(u8 *msg, int round)
{
	int i;

	for (i = 0; i < PING_BYTES; i++)
		msg[i] = pattern(round * PING_BYTES + i);
}

struct ping_writer {
	struct socket *sock;
	struct completion done;
	int rounds, err;
};

static int ping_writer_fn(void *arg)
{
	struct ping_writer *w = arg;
	u8 msg[PING_BYTES], echo[PING_BYTES];
	int ret;

	for (; w->rounds < PING_ROUNDS; w->rounds++) {
		ping_message(msg, w->rounds);
		ret = send_some(w->sock, msg, PING_BYTES, 0);
		if (ret != PING_BYTES) {
			w->err = ret < 0 ? ret : -EIO;
			break;
		}
		ret = recv_all(w->sock, echo, PING_BYTES);
		if (ret != PING_BYTES || memcmp(echo, msg, PING_BYTES)) {
			w->err = ret < 0 ? ret : -EIO;
			break;
		}
	}
	complete(&w->done);
	return 0;
}

static void test_read_sock_wakeup(struct socket *tx, struct socket *rx)
{
	struct ping_writer w = { .sock = tx };
	void (*saved_space[2])(struct sock *sk);
	void (*saved_ready)(struct sock *sk);
	struct task_struct *t;
	read_descriptor_t desc;
	int round, ret;

	init_waitqueue_head(&ping.wq);
	atomic_set(&ping.readies, 0);
	init_completion(&w.done);
	saved_ready = swap_data_ready(rx, ping_data_ready);
	saved_space[0] = count_spaces_of(tx, 0);
	saved_space[1] = count_spaces_of(rx, 1);
	tx->sk->sk_rcvtimeo = 10 * HZ;

	t = kthread_run(ping_writer_fn, &w, "sci_kselftest_ping");
	CHECK(!IS_ERR(t), "kthread_run returned %ld", PTR_ERR(t));
	if (IS_ERR(t))
		goto out;
	for (round = 0; round < PING_ROUNDS; round++) {
		ping.got = 0;
		while (ping.got < PING_BYTES) {
			int seen = atomic_read(&ping.readies);

			desc = (read_descriptor_t){ .count = 1 };
			lock_sock(rx->sk);
			ret = rx->ops->read_sock(rx->sk, &desc, ping_actor);
			release_sock(rx->sk);
			if (ret < 0 && ret != -EAGAIN) {
				CHECK(0, "round %d: read_sock returned %d", round, ret);
				goto wait;
			}
			if (ping.got < PING_BYTES &&
			    !wait_event_timeout(ping.wq, atomic_read(&ping.readies) != seen, 10 * HZ)) {
				CHECK(0, "round %d: %zu of %d bytes read, and no sk_data_ready in 10 s",
				      round, ping.got, PING_BYTES);
				goto wait;
			}
		}
		ret = send_some(rx, ping.buf, PING_BYTES, 0);
		if (ret != PING_BYTES) {
			CHECK(0, "round %d: echo returned %d", round, ret);
			goto wait;
		}
	}
wait:
	wait_for_completion(&w.done);
	CHECK(w.rounds == PING_ROUNDS && !w.err,
	      "read_sock ping-pong: %d of %d rounds (writer's error %d)", w.rounds, PING_ROUNDS, w.err);
	/*
	 * Each answer's doorbell also shows the peer consumed the question, but neither end
	 * ever waited for room: sk_write_space is for a writer that did (TCP's
	 * tcp_check_space). A few calls may come from doorbells that showed no change (they
	 * wake every writer, so that none is left asleep); one per round would be the bug.
	 */
	CHECK(atomic_read(&spaces[0]) + atomic_read(&spaces[1]) <= PING_ROUNDS / 10,
	      "sk_write_space ran %d and %d times in %d rounds with no writer out of room",
	      atomic_read(&spaces[0]), atomic_read(&spaces[1]), PING_ROUNDS);
	pr_info("sci_kselftest: read_sock ping-pong: %d rounds, sk_write_space %d and %d times\n",
		w.rounds, atomic_read(&spaces[0]), atomic_read(&spaces[1]));
out:
	restore_space(tx, saved_space[0]);
	restore_space(rx, saved_space[1]);
	tx->sk->sk_rcvtimeo = MAX_SCHEDULE_TIMEOUT;
	swap_data_ready(rx, saved_ready);
}

/*
 * A reader that reads in its sk_data_ready, under sk_callback_lock with bottom halves off,
 * as iscsi_tcp reads a TCP socket (and reads ours with recv_from_iscsi_q=0): read_sock
 * must never sleep there. A kernel writer streams DIRECT_BYTES in chunks of changing
 * sizes while a contender polls the reading socket in a loop, which holds its connection
 * now and then: a read_sock that finds it held leaves the read to the socket's work item,
 * which wakes the reader again. Every byte must arrive, in order, within 10 s of the last.
 */
#define DIRECT_BYTES	(4 * RING_BYTES)

struct direct_reader {
	wait_queue_head_t wq;
	size_t got;
	atomic_t readies, in_softirq, wrong, not_atomic;
	bool stop;
};

static struct direct_reader direct;

static int direct_actor(read_descriptor_t *desc, struct sk_buff *skb, unsigned int off, size_t len)
{
	u8 chunk[256];
	size_t done = 0;

	if (!in_softirq())
		atomic_inc(&direct.not_atomic);
	while (done < len) {
		size_t n = min(len - done, sizeof(chunk)), i;

		if (skb_copy_bits(skb, off + done, chunk, n))
			return done ? done : -EFAULT;
		for (i = 0; i < n; i++)
			if (chunk[i] != pattern(direct.got + done + i))
				atomic_inc(&direct.wrong);
		done += n;
	}
	direct.got += len;
	return len;
}

static void direct_data_ready(struct sock *sk)
{
	read_descriptor_t desc = { .count = 1 };

	atomic_inc(&direct.readies);
	if (in_serving_softirq())
		atomic_inc(&direct.in_softirq);
	read_lock_bh(&sk->sk_callback_lock);
	sk->sk_socket->ops->read_sock(sk, &desc, direct_actor);
	read_unlock_bh(&sk->sk_callback_lock);
	wake_up(&direct.wq);
}

static int direct_writer_fn(void *arg)
{
	struct ping_writer *w = arg;
	u8 *buf = kvmalloc(65536, GFP_KERNEL);
	size_t sent = 0, i;
	int ret = 0;

	while (buf && sent < DIRECT_BYTES) {
		size_t n = min_t(size_t, DIRECT_BYTES - sent, 1 + (sent * 7919) % 65536);

		for (i = 0; i < n; i++)
			buf[i] = pattern(sent + i);
		ret = send_some(w->sock, buf, n, 0);
		if (ret <= 0)
			break;
		sent += ret;
	}
	w->err = !buf ? -ENOMEM : (sent == DIRECT_BYTES ? 0 : (ret < 0 ? ret : -EIO));
	kvfree(buf);
	complete(&w->done);
	return 0;
}

static int direct_contender_fn(void *arg)
{
	struct socket *rx = arg;
	unsigned long polls = 0;

	while (!READ_ONCE(direct.stop)) {
		rx->ops->poll(NULL, rx, NULL);
		if (++polls % 64 == 0)
			cond_resched();
	}
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

static void test_read_sock_in_data_ready(struct socket *tx, struct socket *rx)
{
	struct ping_writer w = { .sock = tx };
	void (*saved_ready)(struct sock *sk);
	struct task_struct *t, *c;
	size_t last = 0;

	init_waitqueue_head(&direct.wq);
	direct.got = 0;
	direct.stop = false;
	atomic_set(&direct.readies, 0);
	atomic_set(&direct.in_softirq, 0);
	atomic_set(&direct.wrong, 0);
	atomic_set(&direct.not_atomic, 0);
	init_completion(&w.done);
	saved_ready = swap_data_ready(rx, direct_data_ready);

	c = kthread_run(direct_contender_fn, rx, "sci_kselftest_poll");
	CHECK(!IS_ERR(c), "kthread_run returned %ld", PTR_ERR(c));
	t = kthread_run(direct_writer_fn, &w, "sci_kselftest_stream");
	CHECK(!IS_ERR(t), "kthread_run returned %ld", PTR_ERR(t));
	if (IS_ERR(t)) {
		WRITE_ONCE(direct.stop, true);
		goto out;
	}
	while (READ_ONCE(direct.got) < DIRECT_BYTES) {
		wait_event_timeout(direct.wq, READ_ONCE(direct.got) != last, 10 * HZ);
		if (READ_ONCE(direct.got) == last)
			break;
		last = READ_ONCE(direct.got);
	}
	WRITE_ONCE(direct.stop, true);
	wait_for_completion(&w.done);
	CHECK(!w.err, "the writer's error %d", w.err);
	CHECK(direct.got == DIRECT_BYTES,
	      "read_sock in sk_data_ready: %zu of %d bytes read, none for 10 s", direct.got,
	      DIRECT_BYTES);
	CHECK(!atomic_read(&direct.wrong), "%d bytes read in sk_data_ready differ from those sent",
	      atomic_read(&direct.wrong));
	CHECK(!atomic_read(&direct.not_atomic), "the actor ran %d times with bottom halves on",
	      atomic_read(&direct.not_atomic));
	pr_info("sci_kselftest: read_sock in sk_data_ready: %zu bytes, %d wake-ups (%d in softirq)\n",
		direct.got, atomic_read(&direct.readies), atomic_read(&direct.in_softirq));
out:
	if (!IS_ERR(c))
		kthread_stop(c);
	swap_data_ready(rx, saved_ready);
}

/*
 * A writer that fills the ring with MSG_DONTWAIT gets EAGAIN, as iscsi_tcp's transmit
 * does; once the peer read, its sk_write_space runs (that is all that restarts
 * iscsi_tcp's transmit), once, and it can send again. Everything arrives intact.
 */
static void test_write_space_after_stall(struct socket *tx, struct socket *rx)
{
	u8 *out = kvmalloc(RING_BYTES * 2, GFP_KERNEL), *in = kvmalloc(RING_BYTES * 2, GFP_KERNEL);
	void (*saved)(struct sock *sk);
	size_t sent = 0, more, i;
	int ret, calls;

	if (!out || !in) {
		CHECK(0, "no memory for the stall test");
		goto free;
	}
	for (i = 0; i < RING_BYTES * 2; i++)
		out[i] = pattern(i);
	saved = count_spaces_of(tx, 0);
	for (;;) {
		ret = send_some(tx, out + sent, min_t(size_t, CHUNK, RING_BYTES * 2 - sent), MSG_DONTWAIT);
		if (ret <= 0)
			break;
		sent += ret;
		if (sent == RING_BYTES * 2)
			break;
	}
	CHECK(ret == -EAGAIN, "filling the ring with MSG_DONTWAIT ended with %d after %zu bytes, want -EAGAIN",
	      ret, sent);
	CHECK(sent >= RING_BYTES / 2 && sent < RING_BYTES * 2, "%zu bytes went before EAGAIN", sent);
	CHECK(test_bit(SOCK_NOSPACE, &tx->flags), "SOCK_NOSPACE is not set after EAGAIN");
	calls = atomic_read(&spaces[0]);
	CHECK(calls == 0, "sk_write_space ran %d times before the peer read", calls);
	if (ret != -EAGAIN)
		goto restore;

	ret = recv_all(rx, in, sent);
	CHECK(ret == sent && !memcmp(in, out, sent), "read back %d of %zu bytes%s", ret, sent,
	      ret == sent ? ", not what was sent" : "");
	CHECK(wait_event_timeout(space_wq, atomic_read(&spaces[0]) > 0, 10 * HZ),
	      "the peer read %zu bytes, and sk_write_space did not run in 10 s", sent);
	CHECK(!test_bit(SOCK_NOSPACE, &tx->flags), "SOCK_NOSPACE still set after sk_write_space");
	more = min_t(size_t, CHUNK, RING_BYTES * 2 - sent);
	ret = send_some(tx, out + sent, more, MSG_DONTWAIT);
	CHECK(ret == more, "sending after sk_write_space returned %d, want %zu", ret, more);
	if (ret > 0) {
		int got = recv_all(rx, in, ret);

		CHECK(got == ret && !memcmp(in, out + sent, ret), "read back %d of %d bytes after the stall",
		      got, ret);
	}
	calls = atomic_read(&spaces[0]);
	CHECK(calls <= 2, "sk_write_space ran %d times for one stall", calls);
	pr_info("sci_kselftest: stall: %zu bytes before EAGAIN, sk_write_space %d times\n", sent, calls);
restore:
	restore_space(tx, saved);
free:
	kvfree(out);
	kvfree(in);
}

static void test_shutdown(struct socket *tx, struct socket *rx)
{
	struct msghdr msg = {};
	struct kvec vec;
	u8 byte;
	int ret;

	ret = kernel_sock_shutdown(tx, SHUT_WR);
	CHECK(ret == 0, "kernel_sock_shutdown returned %d", ret);
	vec = (struct kvec){ .iov_base = &byte, .iov_len = 1 };
	ret = kernel_recvmsg(rx, &msg, &vec, 1, 1, 0);
	CHECK(ret == 0, "recv after the peer's SHUT_WR returned %d, want 0 (EOF)", ret);
}

static int __init sci_kselftest_init(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct socket *lsock = NULL, *tx = NULL, *rx = NULL;
	int ret;

	ret = sock_create_kern(&init_net, family, SOCK_STREAM, IPPROTO_TCP, &lsock);
	CHECK(ret == 0, "sock_create_kern(family %d) returned %d", family, ret);
	if (ret)
		goto out;
	CHECK(lsock->sk->sk_family == family, "listener sk_family %d", lsock->sk->sk_family);
	ret = kernel_bind(lsock, (struct sockaddr *)&addr, sizeof(addr));
	CHECK(ret == 0, "kernel_bind returned %d", ret);
	ret = kernel_listen(lsock, 8);
	CHECK(ret == 0, "kernel_listen returned %d", ret);
	ret = kernel_getsockname(lsock, (struct sockaddr *)&addr);
	CHECK(ret == sizeof(addr) && addr.sin_port, "kernel_getsockname returned %d, port %u",
	      ret, ntohs(addr.sin_port));
	if (failures)
		goto out;

	ret = sock_create_kern(&init_net, family, SOCK_STREAM, 0, &tx);
	CHECK(ret == 0, "sock_create_kern(client) returned %d", ret);
	if (ret)
		goto out;
	ret = kernel_connect(tx, (struct sockaddr *)&addr, sizeof(addr), 0);
	CHECK(ret == 0, "kernel_connect returned %d", ret);
	ret = kernel_accept(lsock, &rx, 0);
	CHECK(ret == 0, "kernel_accept returned %d", ret);
	if (failures)
		goto out;
	CHECK(rx->sk->sk_family == family && rx->ops->family == family,
	      "the accepted socket is not AF_SCI (sk_family %d)", rx->sk->sk_family);

	test_kvec(tx, rx);
	test_kvec(rx, tx);
	test_bvec(tx, rx);
	test_bvec(rx, tx);
	test_read_sock_wakeup(tx, rx);
	test_read_sock_in_data_ready(tx, rx);
	/* Before the keeping test: with keep=1 its last buffer holds the ring to the end. */
	test_write_space_after_stall(tx, rx);
	test_read_sock_keep(tx, rx);
	test_shutdown(tx, rx);
out:
	if (rx)
		sock_release(rx);
	if (tx)
		sock_release(tx);
	if (lsock)
		sock_release(lsock);
	if (failures) {
		pr_err("sci_kselftest: %d of %d checks failed\n", failures, checks);
		/* No module exit will let go of it: af_sci's rmmod would wait for good. */
		kfree_skb(kept_until_exit);
		kept_until_exit = NULL;
		return -EIO;
	}
	pr_info("sci_kselftest: all %d checks passed\n", checks);
	return 0;
}

static void __exit sci_kselftest_exit(void)
{
	kfree_skb(kept_until_exit);
}

module_init(sci_kselftest_init);
module_exit(sci_kselftest_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Kernel-user test of AF_SCI sockets (kvec/bvec, kernel_* calls)");
