// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: data transfer (echo round trips, large bidirectional
 * transfer, splice, MSG_ZEROCOPY).
 */
#include "harness.h"
#include "tests.h"
#include <linux/errqueue.h>

static void echo_test(int af)
{
	uint16_t port = fixed_port(0);
	int l = ut_listener(af, &port, 16);
	int c = ut_connect(af, port);
	int s = ut_accept(l, af);

	CHECK(port == fixed_port(0), "listener port %u", port);
	echo_check(c, s, 1, 1);
	echo_check(c, s, 1000, 2);
	echo_check(c, s, 60000, 3);
	echo_check(s, c, 7, 4);
	/* A second connection through the same listener. */
	{
		int c2 = ut_connect(af, port), s2 = ut_accept(l, af);

		echo_check(c2, s2, 4096, 5);
		close(c2);
		close(s2);
	}
	close(c);
	close(s);
	close(l);
}

void t_echo_v4(void) { echo_test(AF_INET); }
void t_echo_v6(void) { echo_test(AF_INET6); }

/* Large transfer in both directions at once, FNV-1a checked at both ends. */
struct xfer {
	int fd;
	size_t total;
	uint64_t seed;
	uint32_t hash;
	size_t done;
	int err;
	const char *what;
};

static uint64_t xs64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint32_t fnv1a(uint32_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

#define XFER_CHUNK (256 * 1024)

static void *xfer_writer(void *arg)
{
	struct xfer *x = arg;
	uint64_t *buf = malloc(XFER_CHUNK);
	uint64_t rs = x->seed, ds = x->seed ^ 0x9e3779b97f4a7c15ull;

	x->hash = 2166136261u;
	if (!buf) {
		x->err = ENOMEM;
		return NULL;
	}
	while (x->done < x->total) {
		size_t n = xs64(&rs) % XFER_CHUNK + 1, off = 0;

		if (n > x->total - x->done)
			n = x->total - x->done;
		for (size_t i = 0; i < (n + 7) / 8; i++)
			buf[i] = xs64(&ds);
		x->hash = fnv1a(x->hash, (unsigned char *)buf, n);
		while (off < n) {
			ssize_t r = send(x->fd, (char *)buf + off, n - off, MSG_NOSIGNAL);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				x->err = r < 0 ? errno : EIO;
				x->what = "send";
				goto out;
			}
			off += r;
			x->done += r;
		}
	}
	if (shutdown(x->fd, SHUT_WR) < 0) {
		x->err = errno;
		x->what = "shutdown";
	}
out:
	free(buf);
	return NULL;
}

static void *xfer_reader(void *arg)
{
	struct xfer *x = arg;
	unsigned char *buf = malloc(XFER_CHUNK);
	uint64_t rs = x->seed;

	x->hash = 2166136261u;
	if (!buf) {
		x->err = ENOMEM;
		return NULL;
	}
	for (;;) {
		size_t want = xs64(&rs) % XFER_CHUNK + 1;
		ssize_t r = recv(x->fd, buf, want, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			x->err = errno;
			x->what = "recv";
			break;
		}
		if (r == 0)
			break;
		x->hash = fnv1a(x->hash, buf, r);
		x->done += r;
	}
	free(buf);
	return NULL;
}

void t_large_transfer(void)
{
	const size_t total = 32u << 20;
	struct xfer x[4];
	pthread_t th[4];
	int c, s, i;

	ut_pair(AF_INET, &c, &s);
	memset(x, 0, sizeof(x));
	x[0] = (struct xfer){ .fd = c, .total = total, .seed = 0x1234567 };	/* c -> s */
	x[1] = (struct xfer){ .fd = s, .seed = 0x7654321 };			/* reads c -> s */
	x[2] = (struct xfer){ .fd = s, .total = total, .seed = 0xabcdef1 };	/* s -> c */
	x[3] = (struct xfer){ .fd = c, .seed = 0x1fedcba };			/* reads s -> c */
	for (i = 0; i < 4; i++)
		CHECK(!pthread_create(&th[i], NULL, i % 2 ? xfer_reader : xfer_writer, &x[i]),
		      "pthread_create");
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 4; i++)
		CHECK(!x[i].err, "thread %d: %s: %s", i, x[i].what ? x[i].what : "?",
		      ename(x[i].err));
	CHECK(x[1].done == total, "c->s: received %zu of %zu bytes", x[1].done, total);
	CHECK(x[3].done == total, "s->c: received %zu of %zu bytes", x[3].done, total);
	CHECK(x[0].hash == x[1].hash, "c->s checksum mismatch %08x != %08x", x[0].hash, x[1].hash);
	CHECK(x[2].hash == x[3].hash, "s->c checksum mismatch %08x != %08x", x[2].hash, x[3].hash);
	note("fnv c->s %08x s->c %08x", x[0].hash, x[2].hash);
	close(c);
	close(s);
}

/*
 * splice(2) between a socket and a pipe, both ways, as over TCP: the bytes arrive
 * intact; a socket that never connected, or listens, gives ENOTCONN; a non-blocking one
 * with nothing to read EAGAIN. (An AF_SCI socket not handed over to its TCP socket used
 * to forward splice to tcp_splice_read on its native socket, a kernel socket without a
 * file, whose O_NONBLOCK flag tcp_splice_read reads: a NULL dereference, found by
 * tools/sci-fuzz.)
 */
/* The pipe's side: read(2) and write(2) (the harness's helpers use send/recv). */
static void pipe_write(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = SYS(write(fd, p, len));

		p += n;
		len -= n;
	}
}

static void pipe_read(int fd, char *p, size_t len)
{
	while (len) {
		ssize_t n = SYS(read(fd, p, len));

		CHECK(n > 0, "read from the pipe: EOF");
		p += n;
		len -= n;
	}
}

void t_splice(void)
{
	uint16_t port = fixed_port(0);
	char out[3000], in[3000];
	size_t done;
	int p[2], fd, l, c, s;

	SYS(pipe(p));
	fd = ut_socket(AF_INET);
	EXPECT_ERR(splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK), ENOTCONN);
	EXPECT_ERR(splice(fd, NULL, p[1], NULL, 100, 0), ENOTCONN);
	close(fd);
	l = ut_listener(AF_INET, &port, 4);
	EXPECT_ERR(splice(l, NULL, p[1], NULL, 100, 0), ENOTCONN);
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);

	/* socket -> pipe */
	fill_pattern(out, sizeof(out), 11);
	write_all(c, out, sizeof(out));
	for (done = 0; done < sizeof(out);) {
		long n = SYS(splice(s, NULL, p[1], NULL, sizeof(out) - done, 0));

		CHECK(n > 0, "splice from the socket returned %ld", n);
		done += n;
	}
	pipe_read(p[0], in, sizeof(in));
	CHECK(!memcmp(in, out, sizeof(out)), "the bytes spliced from the socket differ");

	/* pipe -> socket */
	fill_pattern(out, sizeof(out), 12);
	pipe_write(p[1], out, sizeof(out));
	for (done = 0; done < sizeof(out);) {
		long n = SYS(splice(p[0], NULL, s, NULL, sizeof(out) - done, 0));

		CHECK(n > 0, "splice into the socket returned %ld", n);
		done += n;
	}
	read_exact(c, in, sizeof(in));
	CHECK(!memcmp(in, out, sizeof(out)), "the bytes spliced into the socket differ");

	/* Nothing to read on a non-blocking socket. */
	set_nonblock(s, true);
	EXPECT_ERR(splice(s, NULL, p[1], NULL, 100, 0), EAGAIN);
	check_sock(s, AF_INET, -1, 0);
	close(c);
	close(s);
	close(l);
	close(p[0]);
	close(p[1]);
}

/*
 * A write to a pipe that faults leaves a zero-length buffer in it (pipe_write links a
 * fresh buffer before it copies). splice(2) from that pipe into a socket treats it as
 * empty: EAGAIN with SPLICE_F_NONBLOCK, the bytes of a later write intact, 0 once the
 * writer is gone. Linux 6.12's splice_to_socket returned ERESTARTSYS (errno 512) to user
 * space instead, with no signal pending, for TCP and AF_SCI alike (found by
 * tools/sci-fuzz; fixed by kernel/patches/0003-splice-release-zero-length-pipe-buffers-
 * in-splice_to_socket.patch, which this case checks).
 */
void t_splice_faulted_write(void)
{
	uint16_t port = fixed_port(0);
	void *bad = unmapped_page();
	char out[100], in[100];
	int p[2], l, c, s;

	l = ut_listener(AF_INET, &port, 4);
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	SYS(pipe(p));

	EXPECT_ERR(write(p[1], bad, 100), EFAULT);
	EXPECT_ERR(splice(p[0], NULL, s, NULL, 4096, SPLICE_F_NONBLOCK), EAGAIN);

	EXPECT_ERR(write(p[1], bad, 100), EFAULT);
	fill_pattern(out, sizeof(out), 13);
	pipe_write(p[1], out, sizeof(out));
	for (size_t done = 0; done < sizeof(out);) {
		long n = SYS(splice(p[0], NULL, s, NULL, sizeof(out) - done, 0));

		CHECK(n > 0, "splice into the socket returned %ld", n);
		done += n;
	}
	read_exact(c, in, sizeof(in));
	CHECK(!memcmp(in, out, sizeof(out)), "the bytes spliced into the socket differ");

	EXPECT_ERR(write(p[1], bad, 100), EFAULT);
	close(p[1]);
	CHECK(SYS(splice(p[0], NULL, s, NULL, 4096, 0)) == 0,
	      "splice from a pipe whose writer is gone did not return 0");
	check_sock(s, AF_INET, -1, 0);
	close(p[0]);
	close(c);
	close(s);
	close(l);
}

/*
 * The notification of each MSG_ZEROCOPY send (SO_ZEROCOPY): on the error queue, once,
 * in order, its ids counted from 0 by send, as copied (SO_EE_CODE_ZEROCOPY_COPIED: over
 * loopback TCP copies too, and an SCI connection's ring is a copy), with POLLERR while
 * one waits. A program that reuses a buffer only once it is notified (the point of
 * MSG_ZEROCOPY) waits for every one. Without SO_ZEROCOPY the flag is ignored.
 */
void t_msg_zerocopy(void)
{
	enum { SENDS = 4, LEN = 3000 };
	char out[LEN], in[LEN], control[128];
	struct iovec iov = { in, sizeof(in) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	unsigned next = 0;
	int c, s, i;

	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, LEN, 1);
	EXPECT_EQ(send(c, out, LEN, MSG_ZEROCOPY), LEN);
	read_exact(s, in, LEN);
	CHECK(!memcmp(in, out, LEN), "data mismatch without SO_ZEROCOPY");
	EXPECT_ERR(recvmsg(c, &mh, MSG_ERRQUEUE | MSG_DONTWAIT), EAGAIN);

	setint(c, SOL_SOCKET, SO_ZEROCOPY, 1);
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_ZEROCOPY), 1);
	for (i = 0; i < SENDS; i++) {
		fill_pattern(out, LEN, 10 + i);
		EXPECT_EQ(send(c, out, LEN, MSG_ZEROCOPY), LEN);
		read_exact(s, in, LEN);
		CHECK(!memcmp(in, out, LEN), "data mismatch of zero-copy send %d", i);
	}
	/* A send of nothing takes no id, as TCP's. */
	EXPECT_EQ(send(c, out, 0, MSG_ZEROCOPY), 0);
	while (next < SENDS) {
		struct sock_extended_err *ee;
		struct cmsghdr *cm;

		wait_for(c, POLLERR);
		mh.msg_control = control;
		mh.msg_controllen = sizeof(control);
		SYS(recvmsg(c, &mh, MSG_ERRQUEUE));
		cm = CMSG_FIRSTHDR(&mh);
		CHECK(cm && cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR,
		      "error queue: no IP_RECVERR message");
		ee = (struct sock_extended_err *)CMSG_DATA(cm);
		CHECK(ee->ee_errno == 0 && ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY,
		      "error queue: errno %u origin %u, expected a zero-copy notification",
		      ee->ee_errno, ee->ee_origin);
		CHECK(ee->ee_code == SO_EE_CODE_ZEROCOPY_COPIED, "notification code %u", ee->ee_code);
		CHECK(ee->ee_info == next && ee->ee_data >= next && ee->ee_data < SENDS,
		      "notification of ids %u to %u, expected from %u (of %d)", ee->ee_info,
		      ee->ee_data, next, SENDS);
		next = ee->ee_data + 1;
	}
	mh.msg_control = NULL;
	mh.msg_controllen = 0;
	EXPECT_ERR(recvmsg(c, &mh, MSG_ERRQUEUE | MSG_DONTWAIT), EAGAIN);
	CHECK(!(poll1(c, POLLOUT, 0) & POLLERR), "POLLERR with no notification left");
	close(c);
	close(s);
}
