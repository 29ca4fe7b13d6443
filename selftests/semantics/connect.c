// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: connect() (blocking, non-blocking, refused, twice).
 */
#include "harness.h"
#include "tests.h"

void t_nonblock_connect(void)
{
	struct sockaddr_storage ss;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16);
	int c = ut_socket(AF_INET), s, rev;
	socklen_t len = mkaddr(AF_INET, port, &ss);

	set_nonblock(c, true);
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), EINPROGRESS);
	rev = wait_for(c, POLLOUT);
	CHECK(!(rev & (POLLERR | POLLHUP | POLLIN)), "revents %s after connect", pollnames(rev));
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_ERROR), 0);
	/* Linux: the first connect() after completion reports success, later ones EISCONN. */
	SYS(connect(c, (struct sockaddr *)&ss, len));
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), EISCONN);
	check_sock(c, AF_INET, TCP_ESTABLISHED, AF_INET);
	s = ut_accept(l, AF_INET);
	set_nonblock(c, false);
	echo_check(c, s, 100, 9);
	close(c);
	close(s);
	close(l);
}

void t_nonblock_connect_refused(void)
{
	struct sockaddr_storage ss;
	uint16_t port;
	int r = reserve_port(AF_INET, &port);
	int c = ut_socket(AF_INET), rev;
	socklen_t len = mkaddr(AF_INET, port, &ss);
	const int want1 = POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLERR | POLLHUP | POLLRDHUP;
	const int want2 = want1 & ~POLLERR;

	set_nonblock(c, true);
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), EINPROGRESS);
	wait_for(c, POLLOUT);
	rev = poll1(c, ALLEV, 0);
	CHECK(rev == want1, "revents %s, expected %s", pollnames(rev), pollnames(want1));
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_ERROR), ECONNREFUSED);
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_ERROR), 0);
	rev = poll1(c, ALLEV, 0);
	CHECK(rev == want2, "revents after SO_ERROR %s, expected %s", pollnames(rev),
	      pollnames(want2));
	/* The failed attempt is reported once more by connect() itself. */
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), ECONNABORTED);
	/* Then a new attempt starts. */
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), EINPROGRESS);
	wait_for(c, POLLOUT);
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), ECONNREFUSED);
	close(c);
	close(r);
}

void t_connect_refused(void)
{
	struct sockaddr_storage ss;
	uint16_t port;
	int r = reserve_port(AF_INET, &port);
	int c = ut_socket(AF_INET);
	socklen_t len = mkaddr(AF_INET, port, &ss);

	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), ECONNREFUSED);
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_ERROR), 0);
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), ECONNREFUSED);
	EXPECT_ERR(getpeername(c, (struct sockaddr *)&ss, &len), ENOTCONN);
	close(c);
	close(r);
}

void t_connect_twice(void)
{
	struct sockaddr_storage ss;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16);
	int c = ut_connect(AF_INET, port);
	socklen_t len = mkaddr(AF_INET, port, &ss);

	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), EISCONN);
	set_nonblock(c, true);
	EXPECT_ERR(connect(c, (struct sockaddr *)&ss, len), EISCONN);
	close(c);
	close(l);
}
