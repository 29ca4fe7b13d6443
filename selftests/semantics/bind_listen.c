// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: binding and listening.
 */
#include "harness.h"
#include "tests.h"

void t_reuseaddr_rebind(void)
{
	struct sockaddr_storage ss;
	uint16_t port = 0;
	int l = ut_socket(AF_INET), c, s, fd;
	socklen_t len;
	char b;

	setint(l, SOL_SOCKET, SO_REUSEADDR, 1);
	bind_lo(l, AF_INET, 0);
	SYS(listen(l, 16));
	port = local_port(l);
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	/* The server closes first: its side of the connection enters TIME_WAIT. */
	SYS(close(s));
	EXPECT_EQ(recv(c, &b, 1, 0), 0);
	SYS(close(c));
	SYS(close(l));
	/* Without SO_REUSEADDR the port is still in use. */
	fd = ut_socket(AF_INET);
	len = mkaddr(AF_INET, port, &ss);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EADDRINUSE);
	close(fd);
	/* With it, a new listener can take over and accept connections. */
	fd = ut_socket(AF_INET);
	setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	SYS(bind(fd, (struct sockaddr *)&ss, len));
	SYS(listen(fd, 16));
	EXPECT_EQ(local_port(fd), port);
	c = ut_connect(AF_INET, port);
	s = ut_accept(fd, AF_INET);
	echo_check(c, s, 10, 61);
	close(c);
	close(s);
	close(fd);
}

void t_bind_eaddrinuse(void)
{
	struct sockaddr_storage ss;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), fd, b1;
	socklen_t len = mkaddr(AF_INET, port, &ss);

	fd = ut_socket(AF_INET);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EADDRINUSE);
	close(fd);
	/* SO_REUSEADDR does not allow binding over a listener. */
	fd = ut_socket(AF_INET);
	setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EADDRINUSE);
	close(fd);
	close(l);
	/* Two bound (not listening) sockets without SO_REUSEADDR. */
	b1 = ut_socket(AF_INET);
	bind_lo(b1, AF_INET, 0);
	port = local_port(b1);
	len = mkaddr(AF_INET, port, &ss);
	fd = ut_socket(AF_INET);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EADDRINUSE);
	/* Binding twice: EINVAL. */
	EXPECT_ERR(bind(b1, (struct sockaddr *)&ss, len), EINVAL);
	close(fd);
	close(b1);
	/* v6 as well. */
	port = 0;
	l = ut_listener(AF_INET6, &port, 16);
	len = mkaddr(AF_INET6, port, &ss);
	fd = ut_socket(AF_INET6);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EADDRINUSE);
	close(fd);
	close(l);
}

void t_listen_backlog_order(void)
{
	struct sockaddr_storage a, cn;
	uint16_t port = fixed_port(0);
	int l = ut_listener(AF_INET, &port, 8), c[5], s, i;
	socklen_t len;
	char b;

	EXPECT_EQ(port, fixed_port(0));
	for (i = 0; i < 5; i++) {
		c[i] = ut_connect(AF_INET, port);
		b = (char)('A' + i);
		write_all(c[i], &b, 1);
	}
	/* listen() again on a listener just changes the backlog. */
	SYS(listen(l, 16));
	for (i = 0; i < 5; i++) {
		len = sizeof(a);
		s = accept(l, (struct sockaddr *)&a, &len);
		CHECK(s >= 0, "accept %d: %s", i, ename(errno));
		check_sock(s, AF_INET, -1, AF_INET);
		get_name(c[i], false, &cn, AF_INET);
		CHECK(ss_port(&a) == ss_port(&cn), "accept %d returned the connection from port %u, "
		      "expected %u (FIFO order)", i, ss_port(&a), ss_port(&cn));
		read_exact(s, &b, 1);
		EXPECT_EQ(b, 'A' + i);
		close(c[i]);
		close(s);
	}
	close(l);
}

void t_listen_autobind(void)
{
	int l = ut_socket(AF_INET), c, s;
	uint16_t port;

	/* listen() on an unbound socket binds an ephemeral port on the wildcard address. */
	SYS(listen(l, 4));
	port = local_port(l);
	CHECK(port != 0, "listen did not bind a port");
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	echo_check(c, s, 5, 71);
	close(c);
	close(s);
	close(l);
}

static void *blocked_accept(void *arg)
{
	int *p = arg;

	p[1] = accept(p[0], NULL, NULL);
	p[2] = errno;
	return NULL;
}

void t_shutdown_listener(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), a[3] = { l, 0, 0 }, rev;
	pthread_t th;

	/* shutdown(SHUT_WR) on a listener does nothing. */
	SYS(shutdown(l, SHUT_WR));
	EXPECT_EQ(getint(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
	/* SHUT_RD(WR) stops listening and wakes a blocked accept() with EINVAL. */
	CHECK(!pthread_create(&th, NULL, blocked_accept, a), "pthread_create");
	msleep(50);
	SYS(shutdown(l, SHUT_RDWR));
	pthread_join(th, NULL);
	CHECK(a[1] == -1 && a[2] == EINVAL, "blocked accept returned %d (%s), expected EINVAL",
	      a[1], ename(a[2]));
	EXPECT_EQ(getint(l, SOL_SOCKET, SO_ACCEPTCONN), 0);
	EXPECT_ERR(accept(l, NULL, NULL), EINVAL);
	rev = poll1(l, ALLEV, 0);
	CHECK(rev & POLLHUP, "after shutdown: revents %s", pollnames(rev));
	close(l);
}
