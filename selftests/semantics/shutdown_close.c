// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: shutdown, peer close / reset, SIGPIPE.
 */
#include "harness.h"
#include "tests.h"

void t_shutdown_wr(void)
{
	const size_t len = 100000;
	char *out = malloc(len), *in = malloc(len + 1);
	int c, s;

	CHECK(out && in, "malloc");
	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, len, 3);
	write_all(c, out, len);
	SYS(shutdown(c, SHUT_WR));
	SYS(shutdown(c, SHUT_WR));	/* again: allowed */
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	read_exact(s, in, len);
	CHECK(!memcmp(in, out, len), "data mismatch before EOF");
	EXPECT_EQ(recv(s, in, len, 0), 0);
	EXPECT_EQ(recv(s, in, len, 0), 0);
	/* The reverse direction still works. */
	write_all(s, "reply", 5);
	read_exact(c, in, 5);
	CHECK(!memcmp(in, "reply", 5), "reverse data mismatch");
	SYS(shutdown(s, SHUT_WR));
	EXPECT_EQ(recv(c, in, 10, 0), 0);
	/* Both directions closed: c is in TIME_WAIT, i.e. closed: ENOTCONN. */
	EXPECT_ERR(shutdown(c, SHUT_WR), ENOTCONN);
	EXPECT_ERR(shutdown(s, SHUT_RDWR), ENOTCONN);
	free(out);
	free(in);
	close(c);
	close(s);
}

void t_shutdown_rd(void)
{
	int c, s, rev;
	char buf[16];

	ut_pair(AF_INET, &c, &s);
	SYS(shutdown(s, SHUT_RD));
	/* Reads return EOF at once, even when non-blocking. */
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	EXPECT_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 0);
	rev = poll1(s, ALLEV, 0);
	CHECK(rev == (POLLIN | POLLRDNORM | POLLRDHUP | POLLOUT | POLLWRNORM),
	      "after SHUT_RD: revents %s", pollnames(rev));
	/* The peer can still send; Linux TCP still queues and delivers the data. */
	write_all(c, "late", 4);
	wait_inq(s, 4);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 4);
	CHECK(!memcmp(buf, "late", 4), "data mismatch");
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	/* Our direction is unaffected. */
	write_all(s, "out", 3);
	read_exact(c, buf, 3);
	close(c);
	close(s);
}

/* Send single bytes until one fails; returns its errno. */
static int send_until_error(int fd, int flags, int *sent)
{
	*sent = 0;
	for (int i = 0; i < 1000; i++) {
		if (send(fd, "x", 1, flags) < 0)
			return errno;
		++*sent;
		msleep(2);
	}
	FAIL("send kept succeeding after the peer closed");
}

void t_sigpipe_after_close(void)
{
	int c, s, e, sent;
	char buf[4];

	catch_sigpipe();
	ut_pair(AF_INET, &c, &s);
	SYS(close(s));
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	/* The first write goes out (the peer answers with RST), later ones fail. */
	e = send_until_error(c, 0, &sent);
	CHECK(sent >= 1, "the first send after the peer's FIN failed (%s)", ename(e));
	CHECK(e == EPIPE, "send failed with %s, expected EPIPE", ename(e));
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_ERR(send(c, "x", 1, 0), EPIPE);
	EXPECT_EQ(g_sigpipes, 2);
	EXPECT_ERR(write(c, "x", 1), EPIPE);
	EXPECT_EQ(g_sigpipes, 3);
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_EQ(g_sigpipes, 3);
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	close(c);
}

void t_sigpipe_after_reset(void)
{
	int c, s, rev;
	char buf[4];

	catch_sigpipe();
	ut_pair(AF_INET, &c, &s);
	hard_close(s);
	wait_for(c, POLLERR);
	rev = poll1(c, ALLEV, 0);
	CHECK(rev == (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLERR | POLLHUP | POLLRDHUP),
	      "after peer reset: revents %s", pollnames(rev));
	/* The pending error is reported first (no signal), then EPIPE with SIGPIPE. */
	EXPECT_ERR(send(c, "x", 1, 0), ECONNRESET);
	EXPECT_EQ(g_sigpipes, 0);
	EXPECT_ERR(send(c, "x", 1, 0), EPIPE);
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	close(c);
}

void t_msg_nosignal(void)
{
	int c, s, e, sent;
	char buf[4];

	/* Default disposition: a SIGPIPE would kill the test. */
	signal(SIGPIPE, SIG_DFL);
	ut_pair(AF_INET, &c, &s);
	SYS(close(s));
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	e = send_until_error(c, MSG_NOSIGNAL, &sent);
	CHECK(e == EPIPE, "send failed with %s, expected EPIPE", ename(e));
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	close(c);
}

void t_peer_close_eof(void)
{
	char out[100], in[200];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, sizeof(out), 5);
	write_all(c, out, sizeof(out));
	SYS(close(c));
	read_exact(s, in, sizeof(out));
	CHECK(!memcmp(in, out, sizeof(out)), "data mismatch");
	EXPECT_EQ(recv(s, in, sizeof(in), 0), 0);
	EXPECT_EQ(recv(s, in, sizeof(in), 0), 0);
	EXPECT_EQ(read(s, in, sizeof(in)), 0);
	close(s);
}

void t_peer_reset(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	hard_close(c);
	wait_for(s, POLLERR);
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), ECONNRESET);
	/* The error is reported once; then the socket reads as closed. */
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ERROR), 0);
	close(s);
	/* SO_ERROR reports (and clears) the reset too. */
	ut_pair(AF_INET, &c, &s);
	hard_close(c);
	wait_for(s, POLLERR);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ERROR), ECONNRESET);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ERROR), 0);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	close(s);
}

void t_close_unread_rst(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	write_all(c, "unread data", 11);
	wait_inq(s, 11);
	SYS(close(s));		/* unread data: RST instead of FIN */
	wait_for(c, POLLERR);
	EXPECT_ERR(recv(c, buf, sizeof(buf), 0), ECONNRESET);
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	close(c);
}
