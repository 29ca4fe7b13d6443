// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: io_uring (liburing) on the sockets under test. io_uring calls a
 * family's operations from its own context: a non-blocking attempt first, and when that
 * would block, a poll entry on the socket's wait queue and the same call again once a
 * wake-up names the event (a non-blocking connect() is called twice, the second time
 * to learn its result). So a family that misses a wake-up, wakes with the wrong poll
 * key, or answers the second connect() wrongly hangs or lies here, where the plain
 * system calls of the other cases work. Every assertion states what io_uring gives over
 * TCP and UDP.
 */
#include "harness.h"
#include "tests.h"
#include "dgram.h"
#include <liburing.h>

/* A ring of `entries`; the case is skipped where io_uring is turned off. */
static void ring_init(struct io_uring *ring, unsigned entries)
{
	int r = io_uring_queue_init(entries, ring, 0);

	if (r == -ENOSYS || r == -EPERM)
		SKIP("io_uring: %s (kernel.io_uring_disabled?)", ename(-r));
	if (r < 0)
		FAIL("io_uring_queue_init: %s", ename(-r));
}

/* Submits what is queued (liburing returns -errno, and sets no errno). */
static void submit(struct io_uring *ring)
{
	int r = io_uring_submit(ring);

	if (r < 0)
		FAIL("io_uring_submit: %s", ename(-r));
}

/* A free submission entry (submitting what is queued when there is none). */
static struct io_uring_sqe *sqe_of(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		submit(ring);
		sqe = io_uring_get_sqe(ring);
	}
	CHECK(sqe, "io_uring: no free submission entry");
	return sqe;
}

/* A completion, copied out of the ring. */
struct completion {
	uint64_t user_data;
	int res;
	unsigned flags;
};

/* Submits what is queued and waits (up to 10 s) for one completion. */
static struct completion next_cqe(struct io_uring *ring, const char *waiting_for)
{
	struct __kernel_timespec ts = { .tv_sec = 10 };
	struct io_uring_cqe *cqe;
	struct completion done;
	int r = io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, NULL);

	if (r == -ETIME)
		FAIL("io_uring: no completion in 10 s (waiting for %s)", waiting_for);
	if (r < 0)
		FAIL("io_uring_submit_and_wait_timeout: %s", ename(-r));
	done = (struct completion){ cqe->user_data, cqe->res, cqe->flags };
	io_uring_cqe_seen(ring, cqe);
	return done;
}

/* user_data: what a request was (high byte) and for which connection. */
enum { OP_CONNECT = 1, OP_ACCEPT, OP_CLIENT_SEND, OP_CLIENT_RECV, OP_SERVER_RECV,
       OP_SERVER_SEND };
#define UD(op, i) (((uint64_t)(op) << 56) | (uint64_t)(i))
#define UD_OP(ud) ((int)((ud) >> 56))
#define UD_IDX(ud) ((int)((ud) & 0xffffff))

enum { CONNS = 8, STREAM_LEN = 192 * 1024, BUFS = 32, BUF_LEN = 4096, BGID = 7 };

struct uring_conn {
	int fd;
	char *want;		/* what the client sends (and must get back) */
	char *got;		/* client: what came back so far */
	size_t got_len;
	bool done;
};

struct uring_server_conn {
	int fd;
	char *echo;		/* what came in so far, echoed from here */
	size_t in, out;		/* bytes received, bytes echoed */
	bool sending, eof;
};

/* The server's echo: sends what it received and has not sent yet, one send at a time. */
static void server_echo(struct io_uring *ring, struct uring_server_conn *s, int i)
{
	struct io_uring_sqe *sqe;

	if (s->sending || s->out == s->in)
		return;
	sqe = sqe_of(ring);
	io_uring_prep_send(sqe, s->fd, s->echo + s->out, s->in - s->out, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, UD(OP_SERVER_SEND, i));
	s->sending = true;
}

static void server_recv(struct io_uring *ring, int fd, int i)
{
	struct io_uring_sqe *sqe = sqe_of(ring);

	io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, UD(OP_SERVER_RECV, i));
}

static void client_recv(struct io_uring *ring, struct uring_conn *c, int i)
{
	struct io_uring_sqe *sqe = sqe_of(ring);

	io_uring_prep_recv(sqe, c->fd, c->got + c->got_len, STREAM_LEN - c->got_len, 0);
	io_uring_sqe_set_data64(sqe, UD(OP_CLIENT_RECV, i));
}

/*
 * CONNS connections at once in one event loop on one ring, as an io_uring server and
 * its clients run: each client connects with IORING_OP_CONNECT, sends a seeded stream
 * (one send, MSG_WAITALL) and reads its echo back (IORING_OP_RECV); the listener takes
 * them with one multishot accept, and the server reads each with a multishot receive
 * into a provided buffer ring and echoes what it got. Every echo must come back whole,
 * every socket be the family under test (in the mode expected), and every server end
 * see the client's close.
 */
void t_uring_stream(void)
{
	struct uring_conn c[CONNS] = { 0 };
	struct uring_server_conn s[CONNS] = { 0 };
	struct io_uring_buf_reg reg = { 0 };
	struct io_uring_buf_ring *br;
	struct sockaddr_storage ss;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 64), accepted = 0, connected = 0, done = 0, eofs = 0;
	int echoed = 0, i;
	socklen_t len = mkaddr(AF_INET, port, &ss);
	char *bufs;

	ring_init(&ring, 256);
	br = mmap(NULL, BUFS * sizeof(struct io_uring_buf), PROT_READ | PROT_WRITE,
		  MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	bufs = malloc(BUFS * BUF_LEN);
	CHECK(br != MAP_FAILED && bufs, "buffer ring: %s", ename(errno));
	io_uring_buf_ring_init(br);
	reg.ring_addr = (unsigned long)br;
	reg.ring_entries = BUFS;
	reg.bgid = BGID;
	i = io_uring_register_buf_ring(&ring, &reg, 0);
	if (i == -EINVAL)
		SKIP("io_uring: no provided buffer rings (kernel before 5.19)");
	CHECK(i == 0, "io_uring_register_buf_ring: %s", ename(-i));
	for (i = 0; i < BUFS; i++)
		io_uring_buf_ring_add(br, bufs + i * BUF_LEN, BUF_LEN, i,
				      io_uring_buf_ring_mask(BUFS), i);
	io_uring_buf_ring_advance(br, BUFS);

	sqe = sqe_of(&ring);
	io_uring_prep_multishot_accept(sqe, l, NULL, NULL, 0);
	io_uring_sqe_set_data64(sqe, UD(OP_ACCEPT, 0));
	for (i = 0; i < CONNS; i++) {

		c[i].fd = ut_socket(AF_INET);
		c[i].want = malloc(STREAM_LEN);
		c[i].got = malloc(STREAM_LEN);
		s[i].echo = malloc(STREAM_LEN);
		CHECK(c[i].want && c[i].got && s[i].echo, "malloc");
		fill_pattern(c[i].want, STREAM_LEN, 100 + i);
		sqe = sqe_of(&ring);
		io_uring_prep_connect(sqe, c[i].fd, (struct sockaddr *)&ss, len);
		io_uring_sqe_set_data64(sqe, UD(OP_CONNECT, i));
	}

	while (done < CONNS || eofs < CONNS || echoed < CONNS) {
		struct completion cqe = next_cqe(&ring, "the echo of every connection");
		int op = UD_OP(cqe.user_data), k = UD_IDX(cqe.user_data);

		switch (op) {
		case OP_CONNECT:
			CHECK(cqe.res == 0, "IORING_OP_CONNECT %d: %s", k, ename(-cqe.res));
			check_sock(c[k].fd, AF_INET, TCP_ESTABLISHED, AF_INET);
			connected++;
			sqe = sqe_of(&ring);
			io_uring_prep_send(sqe, c[k].fd, c[k].want, STREAM_LEN, MSG_WAITALL | MSG_NOSIGNAL);
			io_uring_sqe_set_data64(sqe, UD(OP_CLIENT_SEND, k));
			client_recv(&ring, &c[k], k);
			break;
		case OP_ACCEPT:
			CHECK(cqe.res >= 0, "multishot accept: %s", ename(-cqe.res));
			CHECK(cqe.flags & IORING_CQE_F_MORE, "multishot accept ended after %d", accepted);
			CHECK(accepted < CONNS, "more connections accepted than made");
			check_sock(cqe.res, AF_INET, -1, AF_INET);
			s[accepted].fd = cqe.res;
			server_recv(&ring, cqe.res, accepted);
			accepted++;
			break;
		case OP_CLIENT_SEND:
			CHECK(cqe.res == STREAM_LEN, "client %d send: %s (%d of %d)", k,
			      cqe.res < 0 ? ename(-cqe.res) : "short", cqe.res, STREAM_LEN);
			break;
		case OP_CLIENT_RECV:
			CHECK(cqe.res > 0, "client %d recv after %zu bytes: %s", k, c[k].got_len,
			      cqe.res < 0 ? ename(-cqe.res) : "EOF");
			c[k].got_len += cqe.res;
			if (c[k].got_len < STREAM_LEN) {
				client_recv(&ring, &c[k], k);
				break;
			}
			CHECK(!memcmp(c[k].got, c[k].want, STREAM_LEN), "client %d: echo differs", k);
			check_sock(c[k].fd, AF_INET, TCP_ESTABLISHED, AF_INET);
			close(c[k].fd);
			c[k].done = true;
			done++;
			break;
		case OP_SERVER_RECV:
			if (cqe.res == -ENOBUFS) {
				/* Every buffer in use: take the receive up again. */
				server_recv(&ring, s[k].fd, k);
				break;
			}
			CHECK(cqe.res >= 0, "server %d recv: %s", k, ename(-cqe.res));
			if (cqe.res == 0) {
				CHECK(!s[k].eof, "server %d: a second EOF", k);
				CHECK(s[k].in == STREAM_LEN, "server %d: EOF after %zu bytes", k, s[k].in);
				s[k].eof = true;
				eofs++;
				break;
			}
			{
				int bid = cqe.flags >> IORING_CQE_BUFFER_SHIFT;

				CHECK(cqe.flags & IORING_CQE_F_BUFFER, "server %d: no buffer", k);
				CHECK(s[k].in + cqe.res <= STREAM_LEN, "server %d: more than was sent", k);
				memcpy(s[k].echo + s[k].in, bufs + bid * BUF_LEN, cqe.res);
				s[k].in += cqe.res;
				io_uring_buf_ring_add(br, bufs + bid * BUF_LEN, BUF_LEN, bid,
						      io_uring_buf_ring_mask(BUFS), 0);
				io_uring_buf_ring_advance(br, 1);
			}
			if (!(cqe.flags & IORING_CQE_F_MORE))
				server_recv(&ring, s[k].fd, k);
			server_echo(&ring, &s[k], k);
			break;
		case OP_SERVER_SEND:
			CHECK(cqe.res > 0, "server %d send: %s", k, cqe.res < 0 ? ename(-cqe.res) : "0");
			s[k].out += cqe.res;
			s[k].sending = false;
			echoed += s[k].out == STREAM_LEN;
			server_echo(&ring, &s[k], k);
			break;
		default:
			FAIL("a completion nobody asked for (user_data %#llx)",
			     (unsigned long long)cqe.user_data);
		}
	}
	EXPECT_EQ(connected, CONNS);
	EXPECT_EQ(accepted, CONNS);
	for (i = 0; i < CONNS; i++) {
		EXPECT_EQ(s[i].out, STREAM_LEN);
		close(s[i].fd);
		free(c[i].want);
		free(c[i].got);
		free(s[i].echo);
	}
	io_uring_queue_exit(&ring);
	free(bufs);
	munmap(br, BUFS * sizeof(struct io_uring_buf));
	close(l);
}

/*
 * IORING_OP_CONNECT to a port nobody listens on completes with ECONNREFUSED: io_uring
 * learns it from the second connect() after the poll, or from the socket's error.
 */
void t_uring_connect_refused(void)
{
	struct sockaddr_storage ss;
	struct completion cqe;
	struct io_uring ring;
	uint16_t port;
	int r = reserve_port(AF_INET, &port);
	int c = ut_socket(AF_INET);
	socklen_t len = mkaddr(AF_INET, port, &ss);

	ring_init(&ring, 8);
	io_uring_prep_connect(sqe_of(&ring), c, (struct sockaddr *)&ss, len);
	cqe = next_cqe(&ring, "the refused connect");
	CHECK(cqe.res == -ECONNREFUSED, "IORING_OP_CONNECT: %s, expected ECONNREFUSED",
	      cqe.res < 0 ? ename(-cqe.res) : "success");
	io_uring_queue_exit(&ring);
	close(c);
	close(r);
}

/*
 * IORING_OP_POLL_ADD on a connected socket: POLLIN completes once the peer's bytes
 * arrive (not before: nothing came yet), and POLLRDHUP once the peer closes.
 */
void t_uring_poll(void)
{
	struct io_uring_cqe *none;
	struct completion cqe;
	struct io_uring ring;
	char buf[8];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	ring_init(&ring, 8);
	io_uring_prep_poll_add(sqe_of(&ring), s, POLLIN);
	submit(&ring);
	CHECK(io_uring_peek_cqe(&ring, &none) == -EAGAIN, "POLLIN completed with nothing sent");
	write_all(c, "x", 1);
	cqe = next_cqe(&ring, "POLLIN");
	CHECK(cqe.res > 0 && (cqe.res & POLLIN), "poll: revents %s, expected POLLIN",
	      cqe.res < 0 ? ename(-cqe.res) : pollnames(cqe.res));
	read_exact(s, buf, 1);
	io_uring_prep_poll_add(sqe_of(&ring), s, POLLRDHUP);
	submit(&ring);
	CHECK(io_uring_peek_cqe(&ring, &none) == -EAGAIN, "POLLRDHUP completed before the close");
	close(c);
	cqe = next_cqe(&ring, "POLLRDHUP");
	CHECK(cqe.res > 0 && (cqe.res & POLLRDHUP), "poll: revents %s, expected POLLRDHUP",
	      cqe.res < 0 ? ename(-cqe.res) : pollnames(cqe.res));
	io_uring_queue_exit(&ring);
	close(s);
}

/*
 * IORING_OP_RECV says whether bytes are left after it (IORING_CQE_F_SOCK_NONEMPTY, from
 * the count TCP reports to io_uring): set after a read that left some, clear after one
 * that took them all. Servers that read again at once only when it is set depend on it,
 * and a multishot receive, told nothing, tries again before it waits.
 */
void t_uring_recv_nonempty(void)
{
	struct completion cqe;
	struct io_uring ring;
	char buf[200];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	ring_init(&ring, 8);
	memset(buf, 'n', sizeof(buf));
	write_all(c, buf, 100);
	wait_inq(s, 100);
	io_uring_prep_recv(sqe_of(&ring), s, buf, 30, 0);
	cqe = next_cqe(&ring, "a read of 30 of 100 bytes");
	CHECK(cqe.res == 30, "IORING_OP_RECV: %d, expected 30", cqe.res);
	CHECK(cqe.flags & IORING_CQE_F_SOCK_NONEMPTY,
	      "no IORING_CQE_F_SOCK_NONEMPTY with 70 bytes left (flags %#x)", cqe.flags);
	io_uring_prep_recv(sqe_of(&ring), s, buf, sizeof(buf), 0);
	cqe = next_cqe(&ring, "a read of the other 70");
	CHECK(cqe.res == 70, "IORING_OP_RECV: %d, expected 70", cqe.res);
	CHECK(!(cqe.flags & IORING_CQE_F_SOCK_NONEMPTY),
	      "IORING_CQE_F_SOCK_NONEMPTY with no bytes left (flags %#x)", cqe.flags);
	io_uring_queue_exit(&ring);
	close(c);
	close(s);
}

/*
 * Datagrams through io_uring: a receive posted before its datagram (IORING_OP_RECVMSG,
 * which waits on the socket's poll) completes with it, whole, from the sender's address,
 * one datagram a receive, each sent with IORING_OP_SENDMSG; over SCI when the SCI path
 * is expected.
 */
void t_uring_dgram(void)
{
	enum { N = 48 };
	struct sockaddr_storage aa, ba, from;
	char out[1024], in[1024];
	struct sci_counts before;
	struct io_uring ring;
	unsigned i;
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	before = sci_counts_of(b, a);
	ring_init(&ring, 8);
	for (i = 0; i < N; i++) {
		struct iovec riov = { in, sizeof(in) }, siov = { out, nth_len(i) };
		struct msghdr rmh = { .msg_name = &from, .msg_namelen = sizeof(from),
				      .msg_iov = &riov, .msg_iovlen = 1 };
		struct msghdr smh = { .msg_name = &aa, .msg_namelen = sizeof(struct sockaddr_in),
				      .msg_iov = &siov, .msg_iovlen = 1 };
		struct completion cqe;
		struct io_uring_sqe *sqe;
		int k, seen = 0;

		memset(&from, 0, sizeof(from));
		fill_pattern(out, nth_len(i), i);
		sqe = sqe_of(&ring);
		io_uring_prep_recvmsg(sqe, a, &rmh, 0);
		io_uring_sqe_set_data64(sqe, 1);
		submit(&ring);
		sqe = sqe_of(&ring);
		io_uring_prep_sendmsg(sqe, b, &smh, 0);
		io_uring_sqe_set_data64(sqe, 2);
		for (k = 0; k < 2; k++) {
			cqe = next_cqe(&ring, "a datagram sent and received");
			if (cqe.user_data == 2) {
				CHECK(cqe.res == (int)nth_len(i), "sendmsg %u: %s", i,
				      cqe.res < 0 ? ename(-cqe.res) : "short");
			} else {
				CHECK(cqe.res == (int)nth_len(i), "recvmsg %u: %d (%s), expected %zu",
				      i, cqe.res, cqe.res < 0 ? ename(-cqe.res) : "", nth_len(i));
				CHECK(!memcmp(in, out, nth_len(i)), "datagram %u differs", i);
				CHECK(!(rmh.msg_flags & MSG_TRUNC), "datagram %u: MSG_TRUNC", i);
				CHECK(ss_port(&from) == ss_port(&ba), "datagram %u from %s, expected %s",
				      i, ss_str(&from), ss_str(&ba));
			}
			seen |= 1 << (cqe.user_data - 1);
		}
		EXPECT_EQ(seen, 3);
	}
	check_over_sci(b, a, before, N);
	io_uring_queue_exit(&ring);
	close(a);
	close(b);
}

/*
 * A zero-copy send (IORING_OP_SEND_ZC), from a connected stream socket and to a datagram
 * socket's peer: the send completes with its length and a notification follows once the
 * kernel no longer needs the buffer (IORING_CQE_F_NOTIF); the peer receives the bytes.
 */
static void send_zc(int from, int to, const struct sockaddr_storage *dest, size_t len,
		    unsigned seed)
{
	char *out = malloc(len), *in = malloc(len);
	bool sent = false, notified = false;
	struct io_uring ring;
	struct io_uring_sqe *sqe;

	CHECK(out && in, "malloc");
	fill_pattern(out, len, seed);
	ring_init(&ring, 8);
	sqe = sqe_of(&ring);
	io_uring_prep_send_zc(sqe, from, out, len, MSG_NOSIGNAL, 0);
	if (dest)
		io_uring_prep_send_set_addr(sqe, (const struct sockaddr *)dest,
					    sizeof(struct sockaddr_in));
	while (!sent || !notified) {
		struct completion cqe = next_cqe(&ring, "the zero-copy send and its notification");

		if (cqe.flags & IORING_CQE_F_NOTIF) {
			CHECK(sent, "IORING_OP_SEND_ZC: the notification came before the send");
			notified = true;
			continue;
		}
		CHECK(cqe.res == (int)len, "IORING_OP_SEND_ZC of %zu bytes: %s", len,
		      cqe.res < 0 ? ename(-cqe.res) : "short");
		CHECK(cqe.flags & IORING_CQE_F_MORE, "IORING_OP_SEND_ZC: no notification to come");
		sent = true;
	}
	if (dest) {
		ssize_t n;

		wait_for(to, POLLIN);
		n = recv(to, in, len, 0);
		CHECK(n == (ssize_t)len, "recv of the datagram: %zd (%s)", n, n < 0 ? ename(errno) : "");
	} else {
		read_exact(to, in, len);
	}
	CHECK(!memcmp(in, out, len), "what the zero-copy send sent differs");
	io_uring_queue_exit(&ring);
	free(out);
	free(in);
}

void t_uring_send_zc(void)
{
	struct sockaddr_storage aa, ba;
	int c, s, a, b;

	ut_pair(AF_INET, &c, &s);
	/* What the receiver's buffer holds: it reads once the send has completed. */
	send_zc(c, s, NULL, 48 * 1024, 5);
	send_zc(s, c, NULL, 100, 6);
	close(c);
	close(s);
	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	send_zc(b, a, &aa, 1200, 7);
	close(a);
	close(b);
}
