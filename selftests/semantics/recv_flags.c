// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: recv flags, non-blocking I/O, timeouts, FIONREAD/SIOCOUTQ.
 */
#include "harness.h"
#include "tests.h"

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <time.h>

void t_msg_peek(void)
{
	char out[100], a[200], b[200];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, sizeof(out), 11);
	write_all(c, out, sizeof(out));
	wait_inq(s, 100);
	EXPECT_EQ(recv(s, a, sizeof(a), MSG_PEEK), 100);
	EXPECT_EQ(recv(s, a, 10, MSG_PEEK), 10);
	EXPECT_EQ(inq(s), 100);
	EXPECT_EQ(recv(s, b, sizeof(b), 0), 100);
	CHECK(!memcmp(a, out, 10) && !memcmp(b, out, 100), "peeked/read bytes differ");
	EXPECT_ERR(recv(s, a, sizeof(a), MSG_PEEK | MSG_DONTWAIT), EAGAIN);
	/* Peek then partial read then peek again. */
	write_all(c, out, sizeof(out));
	wait_inq(s, 100);
	EXPECT_EQ(recv(s, b, 30, 0), 30);
	EXPECT_EQ(recv(s, a, sizeof(a), MSG_PEEK), 70);
	CHECK(!memcmp(a, out + 30, 70), "peek after partial read differs");
	EXPECT_EQ(recv(s, b, sizeof(b), 0), 70);
	close(c);
	close(s);
}

struct slow_sender {
	int fd, pieces, size, delay_ms;
	bool shut;
};

static void *slow_send(void *arg)
{
	struct slow_sender *ss = arg;
	char *buf = malloc(ss->size);

	for (int i = 0; i < ss->pieces; i++) {
		fill_pattern(buf, ss->size, i);
		msleep(ss->delay_ms);
		if (send(ss->fd, buf, ss->size, MSG_NOSIGNAL) != ss->size)
			break;
	}
	if (ss->shut)
		shutdown(ss->fd, SHUT_WR);
	free(buf);
	return NULL;
}

void t_msg_waitall(void)
{
	struct slow_sender snd = { .pieces = 4, .size = 1000, .delay_ms = 30 };
	char buf[5000], want[1000];
	pthread_t th;
	int c, s;

	ut_pair(AF_INET, &c, &s);
	snd.fd = c;
	CHECK(!pthread_create(&th, NULL, slow_send, &snd), "pthread_create");
	EXPECT_EQ(recv(s, buf, 4000, MSG_WAITALL), 4000);
	pthread_join(th, NULL);
	for (int i = 0; i < 4; i++) {
		fill_pattern(want, 1000, i);
		CHECK(!memcmp(buf + i * 1000, want, 1000), "piece %d differs", i);
	}
	/* MSG_WAITALL stops short at EOF. */
	snd.pieces = 1;
	snd.size = 100;
	snd.shut = true;
	CHECK(!pthread_create(&th, NULL, slow_send, &snd), "pthread_create");
	EXPECT_EQ(recv(s, buf, 1000, MSG_WAITALL), 100);
	pthread_join(th, NULL);
	EXPECT_EQ(recv(s, buf, 1000, MSG_WAITALL), 0);
	close(c);
	close(s);
}

/*
 * SO_RCVLOWAT: poll reports readable, and a blocking recv returns, once that many bytes
 * are there (or all asked for, if fewer), as TCP counts them; an end of stream or a
 * timeout ends the wait with what came; MSG_DONTWAIT takes what is there.
 */
void t_so_rcvlowat(void)
{
	struct slow_sender snd = { .pieces = 3, .size = 40, .delay_ms = 20 };
	struct timeval tv = { 0, 200 * 1000 };
	char buf[400];
	pthread_t th;
	ssize_t n;
	int c, s;

	memset(buf, 'x', sizeof(buf));
	ut_pair(AF_INET, &c, &s);
	setint(s, SOL_SOCKET, SO_RCVLOWAT, 100);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_RCVLOWAT), 100);
	write_all(c, buf, 50);
	wait_inq(s, 50);
	EXPECT_EQ(poll1(s, POLLIN, 0), 0);
	write_all(c, buf, 60);
	wait_inq(s, 110);
	EXPECT_EQ(poll1(s, POLLIN, 0), POLLIN);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 110);
	/* Fewer asked for than SO_RCVLOWAT: those. */
	write_all(c, buf, 30);
	EXPECT_EQ(recv(s, buf, 20, 0), 20);
	EXPECT_EQ(recv(s, buf, 20, MSG_DONTWAIT), 10);
	/* A blocking recv waits for 100 of the 120 bytes sent 40 at a time. */
	snd.fd = c;
	CHECK(!pthread_create(&th, NULL, slow_send, &snd), "pthread_create");
	n = recv(s, buf, sizeof(buf), 0);
	CHECK(n >= 100 && n <= 120, "recv with SO_RCVLOWAT 100: %zd (%s)", n, n < 0 ? ename(errno) : "");
	pthread_join(th, NULL);
	if (n < 120)
		EXPECT_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 120 - n);
	/* The receive timeout ends the wait with what came. */
	SYS(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	write_all(c, buf, 30);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 30);
	/* So does the end of stream. */
	write_all(c, buf, 30);
	SYS(shutdown(c, SHUT_WR));
	wait_for(s, POLLIN);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 30);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	close(c);
	close(s);
}

/* A read's TCP_CM_INQ control message (TCP_INQ set): the bytes left to read after it. */
static int read_inq(int fd, char *buf, size_t len, ssize_t *n)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	struct cmsghdr *cm;
	int inq;

	*n = SYS(recvmsg(fd, &mh, 0));
	cm = CMSG_FIRSTHDR(&mh);
	CHECK(cm && cm->cmsg_level == SOL_TCP && cm->cmsg_type == TCP_CM_INQ,
	      "recvmsg: no TCP_CM_INQ message");
	memcpy(&inq, CMSG_DATA(cm), sizeof(inq));
	return inq;
}

/*
 * TCP_INQ: each read says how many bytes are left to read after it, one more once the
 * peer finished writing (TCP counts its FIN), so a reader told 0 knows to wait.
 */
void t_tcp_inq(void)
{
	char buf[200];
	ssize_t n;
	int c, s;

	memset(buf, 'q', sizeof(buf));
	ut_pair(AF_INET, &c, &s);
	setint(s, SOL_TCP, TCP_INQ, 1);
	EXPECT_EQ(getint(s, SOL_TCP, TCP_INQ), 1);
	write_all(c, buf, 100);
	wait_inq(s, 100);
	EXPECT_EQ(read_inq(s, buf, 30, &n), 70);
	EXPECT_EQ(n, 30);
	EXPECT_EQ(read_inq(s, buf, sizeof(buf), &n), 0);
	EXPECT_EQ(n, 70);
	write_all(c, buf, 50);
	SYS(shutdown(c, SHUT_WR));
	wait_for(s, POLLRDHUP);
	EXPECT_EQ(read_inq(s, buf, 20, &n), 31);
	EXPECT_EQ(read_inq(s, buf, sizeof(buf), &n), 1);
	EXPECT_EQ(n, 30);
	close(c);
	close(s);
}

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * Sends 10 bytes from c and reads them at s with room for control messages: the read must
 * carry one timestamp message (SOL_SOCKET, type), none when type is 0, and no other, with a
 * stamp between the send and the read's return (less a microsecond: SO_TIMESTAMP's
 * resolution). `inq`: TCP_INQ is set on s, and its message must follow the stamp, as TCP
 * puts them.
 */
static void read_stamped(int c, int s, int type, bool inq)
{
	char buf[64], control[512];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			     .msg_controllen = sizeof(control) };
	struct cmsghdr *cm;
	int64_t before, after, stamp;
	bool stamped = false;

	memset(buf, 't', sizeof(buf));
	before = now_ns();
	write_all(c, buf, 10);
	wait_inq(s, 10);
	EXPECT_EQ(SYS(recvmsg(s, &mh, 0)), 10);
	after = now_ns();
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == SOL_TCP && cm->cmsg_type == TCP_CM_INQ) {
			CHECK(inq, "a TCP_CM_INQ message without TCP_INQ");
			CHECK(stamped || type == 0, "TCP_CM_INQ came before the timestamp");
			inq = false;
			continue;
		}
		CHECK(cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == type && !stamped,
		      "unexpected control message (level %d, type %d; wanted type %d)",
		      cm->cmsg_level, cm->cmsg_type, type);
		stamped = true;
		if (type == SCM_TIMESTAMP) {
			struct timeval tv;

			memcpy(&tv, CMSG_DATA(cm), sizeof(tv));
			stamp = (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000;
		} else if (type == SCM_TIMESTAMPNS) {
			struct timespec ts;

			memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
			stamp = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		} else {
			struct scm_timestamping tss;

			memcpy(&tss, CMSG_DATA(cm), sizeof(tss));
			stamp = (int64_t)tss.ts[0].tv_sec * 1000000000 + tss.ts[0].tv_nsec;
			CHECK(!tss.ts[1].tv_sec && !tss.ts[2].tv_sec,
			      "SCM_TIMESTAMPING with a hardware stamp");
		}
		CHECK(stamp >= before - 1000 && stamp <= after,
		      "stamp %" PRId64 " ns outside the send (%" PRId64 ") and the read (%" PRId64 ")",
		      stamp, before, after);
	}
	CHECK(!inq, "no TCP_CM_INQ message with TCP_INQ set");
	CHECK(stamped || type == 0, "no timestamp message (type %d)", type);
}

/*
 * Turns the stack's receive stamping on and waits until it took effect, on a plain TCP
 * connection of its own (fds: listener, client, server, for the caller to close). The first
 * socket that asks for timestamps turns stamping on through a work item
 * (net_enable_timestamp()), so a TCP segment that arrives just after the setsockopt may
 * carry no stamp, and TCP, unlike UDP, does not stamp it at the read: one byte at a time
 * until one comes stamped. The server end keeps stamping on while it is open.
 */
static void stamping_on(int fds[3])
{
	uint16_t port;
	int i;

	fds[0] = tcp_socket(AF_INET);
	bind_lo(fds[0], AF_INET, 0);
	SYS(listen(fds[0], 1));
	port = local_port(fds[0]);
	fds[1] = tcp_socket(AF_INET);
	connect_lo(fds[1], AF_INET, port);
	fds[2] = SYS(accept(fds[0], NULL, NULL));
	setint(fds[2], SOL_SOCKET, SO_TIMESTAMP, 1);
	for (i = 0; i < 10000; i++) {
		char b, control[64];
		struct iovec iov = { &b, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
				     .msg_controllen = sizeof(control) };

		write_all(fds[1], "s", 1);
		EXPECT_EQ(SYS(recvmsg(fds[2], &mh, 0)), 1);
		if (CMSG_FIRSTHDR(&mh))
			return;
		usleep(1000);
	}
	FAIL("no TCP segment came stamped after SO_TIMESTAMP");
}

/*
 * A stream's receive timestamps: SO_TIMESTAMP, SO_TIMESTAMPNS and SO_TIMESTAMPING's
 * software stamp each put theirs into a read's control messages (before TCP_INQ's), none
 * without them. A stamp lies between the send and the read. An accepted socket inherits
 * the listener's.
 */
void t_so_timestamp_stream(void)
{
	uint16_t port = 0;
	int c, s, l, on[3];

	stamping_on(on);
	ut_pair(AF_INET, &c, &s);
	read_stamped(c, s, 0, false);
	setint(s, SOL_SOCKET, SO_TIMESTAMP, 1);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_TIMESTAMP), 1);
	read_stamped(c, s, SCM_TIMESTAMP, false);
	setint(s, SOL_TCP, TCP_INQ, 1);
	read_stamped(c, s, SCM_TIMESTAMP, true);
	setint(s, SOL_TCP, TCP_INQ, 0);
	setint(s, SOL_SOCKET, SO_TIMESTAMPNS, 1);
	read_stamped(c, s, SCM_TIMESTAMPNS, false);
	setint(s, SOL_SOCKET, SO_TIMESTAMPNS, 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_TIMESTAMP), 0);
	read_stamped(c, s, 0, false);
	setint(s, SOL_SOCKET, SO_TIMESTAMPING,
	       SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE);
	read_stamped(c, s, SCM_TIMESTAMPING, false);
	setint(s, SOL_SOCKET, SO_TIMESTAMPING, 0);
	read_stamped(c, s, 0, false);
	close(c);
	close(s);

	/* An accepted socket inherits its listener's SO_TIMESTAMP, as TCP's does. */
	l = ut_listener(AF_INET, &port, 4);
	setint(l, SOL_SOCKET, SO_TIMESTAMP, 1);
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	close(l);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_TIMESTAMP), 1);
	read_stamped(c, s, SCM_TIMESTAMP, false);
	close(c);
	close(s);
	for (l = 0; l < 3; l++)
		close(on[l]);
}

/*
 * SO_PEEK_OFF on a stream: each peek starts where the last one ended, a read moves the
 * offset back by what it consumed, a peek past the queued bytes waits for more (or says
 * EAGAIN), and -1 turns it off. A program that peeks at an offset (passt, some proxies)
 * must never see a byte twice or skip one.
 */
void t_so_peek_off(void)
{
	struct slow_sender late = { .pieces = 1, .size = 50, .delay_ms = 50 };
	char out[100], more[50], a[200], b[200];
	pthread_t th;
	int c, s;

	ut_pair(AF_INET, &c, &s);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), -1);
	setint(s, SOL_SOCKET, SO_PEEK_OFF, 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), 0);
	fill_pattern(out, sizeof(out), 8);
	write_all(c, out, sizeof(out));
	wait_inq(s, 100);
	EXPECT_EQ(recv(s, a, 30, MSG_PEEK), 30);
	EXPECT_EQ(recv(s, a + 30, 30, MSG_PEEK), 30);
	CHECK(!memcmp(a, out, 60), "two peeks at an offset did not walk the stream");
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), 60);
	/* A read consumes from the first unread byte and moves the offset back. */
	EXPECT_EQ(recv(s, b, 20, 0), 20);
	CHECK(!memcmp(b, out, 20), "a read with a peek offset did not start at the first byte");
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), 40);
	EXPECT_EQ(inq(s), 80);
	EXPECT_EQ(recv(s, a, sizeof(a), MSG_PEEK), 40);
	CHECK(!memcmp(a, out + 60, 40), "the peek after a read differs");
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), 80);
	/* Past the end: nothing yet, then a blocking peek waits for the next bytes. */
	EXPECT_ERR(recv(s, a, sizeof(a), MSG_PEEK | MSG_DONTWAIT), EAGAIN);
	late.fd = c;
	CHECK(!pthread_create(&th, NULL, slow_send, &late), "pthread_create");
	EXPECT_EQ(recv(s, a, sizeof(a), MSG_PEEK), 50);
	pthread_join(th, NULL);
	fill_pattern(more, sizeof(more), 0);
	CHECK(!memcmp(a, more, 50), "the peek that waited differs");
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), 130);
	/* Off again: a peek starts at the first unread byte. */
	setint(s, SOL_SOCKET, SO_PEEK_OFF, -1);
	EXPECT_EQ(recv(s, a, 10, MSG_PEEK), 10);
	CHECK(!memcmp(a, out + 20, 10), "a peek without an offset did not start at the first byte");
	/* Every byte once, in order. */
	EXPECT_EQ(recv(s, b, 80, MSG_WAITALL), 80);
	EXPECT_EQ(recv(s, b + 80, 50, MSG_WAITALL), 50);
	CHECK(!memcmp(b, out + 20, 80) && !memcmp(b + 80, more, 50), "the bytes read differ");
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PEEK_OFF), -1);
	close(c);
	close(s);
}

void t_msg_dontwait(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	CHECK(!(fcntl(s, F_GETFL) & O_NONBLOCK), "MSG_DONTWAIT changed the file flags");
	EXPECT_EQ(send(c, "hi", 2, MSG_DONTWAIT), 2);
	wait_inq(s, 2);
	EXPECT_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 2);
	EXPECT_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	close(c);
	close(s);
}

/*
 * A zero-length read with bytes queued returns 0 at once and takes nothing (an
 * AF_SCI recv once spun here: its ring was not empty, yet it copied nothing).
 */
void t_recv_zero_len(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	EXPECT_EQ(send(c, "hi", 2, 0), 2);
	wait_inq(s, 2);
	EXPECT_EQ(recv(s, buf, 0, 0), 0);
	EXPECT_EQ(recv(s, buf, 0, MSG_DONTWAIT), 0);
	EXPECT_EQ(recv(s, buf, 0, MSG_WAITALL), 0);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 2);
	CHECK(memcmp(buf, "hi", 2) == 0, "the bytes changed after zero-length reads");
	close(c);
	close(s);
}

void t_nonblock_recv_accept(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s, fd;
	char buf[8];

	set_nonblock(l, true);
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	EXPECT_ERR(accept4(l, NULL, NULL, SOCK_NONBLOCK), EAGAIN);
	c = ut_connect(AF_INET, port);
	wait_for(l, POLLIN);
	s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(s >= 0, "accept4: %s", ename(errno));
	check_sock(s, AF_INET, TCP_ESTABLISHED, AF_INET);
	CHECK(fcntl(s, F_GETFL) & O_NONBLOCK, "accept4(SOCK_NONBLOCK): no O_NONBLOCK");
	CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC, "accept4(SOCK_CLOEXEC): no FD_CLOEXEC");
	/* The accepted socket does not inherit the listener's O_NONBLOCK. */
	fd = ut_connect(AF_INET, port);
	wait_for(l, POLLIN);
	{
		int s2 = ut_accept(l, AF_INET);

		CHECK(!(fcntl(s2, F_GETFL) & O_NONBLOCK), "accepted socket inherited O_NONBLOCK");
		close(s2);
	}
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	EXPECT_ERR(read(s, buf, sizeof(buf)), EAGAIN);
	set_nonblock(c, true);
	EXPECT_ERR(recv(c, buf, sizeof(buf), 0), EAGAIN);
	write_all(c, "z", 1);
	wait_for(s, POLLIN);
	EXPECT_EQ(read(s, buf, sizeof(buf)), 1);
	close(fd);
	close(c);
	close(s);
	/* SOCK_NONBLOCK | SOCK_CLOEXEC at creation. */
	fd = ut_socket_flags(AF_INET, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK, "socket(SOCK_NONBLOCK): no O_NONBLOCK");
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "socket(SOCK_CLOEXEC): no FD_CLOEXEC");
	close(fd);
	close(l);
}

static void set_timeo(int fd, int opt, long usec)
{
	struct timeval tv = { usec / 1000000, usec % 1000000 };

	SYS(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)));
}

static long get_timeo(int fd, int opt)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	SYS(getsockopt(fd, SOL_SOCKET, opt, &tv, &len));
	EXPECT_EQ(len, sizeof(tv));
	return tv.tv_sec * 1000000L + tv.tv_usec;
}

void t_so_rcvtimeo(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s;
	char buf[8];
	struct moment t0;
	char took[96];

	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	EXPECT_EQ(get_timeo(s, SO_RCVTIMEO), 0);
	set_timeo(s, SO_RCVTIMEO, 300000);
	EXPECT_EQ(get_timeo(s, SO_RCVTIMEO), 300000);
	t0 = moment_now();
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	CHECK(timeo_honoured(t0, 0.3, took, sizeof(took)), "recv timed out after %s, expected 0.3 s",
	      took);
	/* Data before the timeout is returned normally. */
	write_all(c, "x", 1);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 1);
	/* accept() honours SO_RCVTIMEO of the listener. */
	set_timeo(l, SO_RCVTIMEO, 200000);
	t0 = moment_now();
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	CHECK(timeo_honoured(t0, 0.2, took, sizeof(took)),
	      "accept timed out after %s, expected 0.2 s", took);
	/* Clearing it. */
	set_timeo(s, SO_RCVTIMEO, 0);
	EXPECT_EQ(get_timeo(s, SO_RCVTIMEO), 0);
	close(c);
	close(s);
	close(l);
}

void t_so_sndtimeo(void)
{
	static char buf[65536];
	int c, s, i;
	struct moment t0 = { 0, 0 };
	char took[96];
	ssize_t n = 0;

	ut_pair(AF_INET, &c, &s);
	EXPECT_EQ(get_timeo(c, SO_SNDTIMEO), 0);
	set_timeo(c, SO_SNDTIMEO, 1500000);
	EXPECT_EQ(get_timeo(c, SO_SNDTIMEO), 1500000);
	/* Multiples of 20 ms are exact in jiffies for HZ 100, 250, 300 and 1000. */
	set_timeo(c, SO_SNDTIMEO, 200000);
	EXPECT_EQ(get_timeo(c, SO_SNDTIMEO), 200000);
	/* Small buffers so that the pipe fills quickly; the peer never reads. */
	setint(c, SOL_SOCKET, SO_SNDBUF, 32768);
	setint(s, SOL_SOCKET, SO_RCVBUF, 32768);
	for (i = 0; i < 1000; i++) {
		t0 = moment_now();
		n = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
		if (n < 0)
			break;
	}
	CHECK(n < 0, "send never blocked (%d sends)", i);
	CHECK(errno == EAGAIN, "blocked send failed with %s, expected EAGAIN", ename(errno));
	CHECK(timeo_honoured(t0, 0.2, took, sizeof(took)), "send timed out after %s, expected 0.2 s",
	      took);
	close(c);
	close(s);
}

void t_fionread_siocoutq(void)
{
	static char buf[65536];
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s, v, i;
	double end;

	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	EXPECT_EQ(inq(s), 0);
	EXPECT_EQ(outq(c), 0);
	/* On a listener both are EINVAL. */
	EXPECT_ERR(ioctl(l, FIONREAD, &v), EINVAL);
	EXPECT_ERR(ioctl(l, SIOCOUTQ, &v), EINVAL);
	write_all(c, buf, 1234);
	wait_inq(s, 1234);
	EXPECT_EQ(inq(s), 1234);
	EXPECT_EQ(recv(s, buf, 234, 0), 234);
	EXPECT_EQ(inq(s), 1000);
	for (end = now() + 10; outq(c) != 0 && now() < end; msleep(1))
		;
	EXPECT_EQ(outq(c), 0);
	/* Fill the path: unacknowledged data shows in SIOCOUTQ. */
	setint(s, SOL_SOCKET, SO_RCVBUF, 32768);
	set_nonblock(c, true);
	for (i = 0; i < 10000 && send(c, buf, sizeof(buf), 0) > 0; i++)
		;
	CHECK(errno == EAGAIN, "filling: %s", ename(errno));
	v = outq(c);
	CHECK(v > 0, "SIOCOUTQ %d with a full pipe", v);
	/* Drain everything: SIOCOUTQ returns to 0. */
	set_nonblock(s, true);
	for (end = now() + 10; now() < end;) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);

		if (n < 0 && errno != EAGAIN)
			FAIL("drain: %s", ename(errno));
		if (n < 0 && outq(c) == 0 && inq(s) == 0)
			break;
		if (n < 0)
			poll1(s, POLLIN, 10);
	}
	EXPECT_EQ(outq(c), 0);
	EXPECT_EQ(inq(s), 0);
	/* FIN does not count in FIONREAD. */
	set_nonblock(c, false);
	write_all(c, "12345", 5);
	SYS(shutdown(c, SHUT_WR));
	wait_for(s, POLLRDHUP);
	EXPECT_EQ(inq(s), 5);
	close(c);
	close(s);
	close(l);
}
