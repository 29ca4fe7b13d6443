// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: bad input (address lengths and families, EFAULT, bad
 * options, calls in the wrong state).
 */
#include "harness.h"
#include "tests.h"

void t_bad_addrlen_bind(void)
{
	struct sockaddr_storage ss;
	int fd;

	fd = ut_socket(AF_INET);
	mkaddr(AF_INET, 0, &ss);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, 0), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, 1), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in) - 1), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_storage) + 1), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, (socklen_t)-1), EINVAL);
	/* Longer than needed is fine. */
	SYS(bind(fd, (struct sockaddr *)&ss, sizeof(ss)));
	close(fd);

	fd = ut_socket(AF_INET6);
	mkaddr(AF_INET6, 0, &ss);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, 0), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, 1), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in)), EINVAL);
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, 23), EINVAL);
	/* Linux accepts the RFC 2133 length (24: without sin6_scope_id). */
	SYS(bind(fd, (struct sockaddr *)&ss, 24));
	close(fd);
	fd = ut_socket(AF_INET6);
	SYS(bind(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in6) - 1));
	close(fd);
}

void t_bad_addrlen_connect(void)
{
	struct sockaddr_storage ss;
	uint16_t port = 0, port6 = 0;
	int l = ut_listener(AF_INET, &port, 16), l6 = ut_listener(AF_INET6, &port6, 16), fd;

	fd = ut_socket(AF_INET);
	mkaddr(AF_INET, port, &ss);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, 0), EINVAL);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, 1), EINVAL);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in) - 1), EINVAL);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_storage) + 1), EINVAL);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_ERROR), 0);
	SYS(connect(fd, (struct sockaddr *)&ss, sizeof(ss)));
	check_sock(fd, AF_INET, TCP_ESTABLISHED, AF_INET);
	close(fd);

	fd = ut_socket(AF_INET6);
	mkaddr(AF_INET6, port6, &ss);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, 0), EINVAL);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, 1), EINVAL);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in)), EINVAL);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, 23), EINVAL);
	/* The RFC 2133 length is accepted. */
	SYS(connect(fd, (struct sockaddr *)&ss, 24));
	check_sock(fd, AF_INET6, TCP_ESTABLISHED, AF_INET6);
	close(fd);
	close(l);
	close(l6);
}

void t_bad_family(void)
{
	struct sockaddr_storage ss;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), fd;
	socklen_t len;

	fd = ut_socket(AF_INET);
	len = mkaddr(AF_INET, port, &ss);
	ss.ss_family = AF_UNIX;
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EAFNOSUPPORT);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, len), EAFNOSUPPORT);
	/* Legacy: bind() takes AF_UNSPEC with INADDR_ANY as AF_INET, nothing else. */
	ss.ss_family = AF_UNSPEC;
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EAFNOSUPPORT);
	((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_ANY);
	((struct sockaddr_in *)&ss)->sin_port = 0;
	SYS(bind(fd, (struct sockaddr *)&ss, len));
	CHECK(local_port(fd) != 0, "AF_UNSPEC bind gave no port");
	close(fd);

	fd = ut_socket(AF_INET6);
	len = mkaddr(AF_INET6, port, &ss);
	ss.ss_family = AF_UNIX;
	EXPECT_ERR(bind(fd, (struct sockaddr *)&ss, len), EAFNOSUPPORT);
	close(fd);
	fd = ut_socket(AF_INET6);
	/* connect() needs the socket to be v6 first under AF_SCI: bind it. */
	bind_lo(fd, AF_INET6, 0);
	EXPECT_ERR(connect(fd, (struct sockaddr *)&ss, len), EAFNOSUPPORT);
	close(fd);
	close(l);
}

void t_connect_af_unspec(void)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };
	struct sockaddr_storage ss;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), fd, s;
	socklen_t len = sizeof(ss);
	char b;

	/* On an unconnected socket: a no-op that succeeds. */
	fd = ut_socket(AF_INET);
	SYS(connect(fd, &sa, sizeof(sa)));
	close(fd);
	/* On a connection: disconnects (the peer sees a reset), and the socket can connect again. */
	fd = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	SYS(connect(fd, &sa, sizeof(sa)));
	EXPECT_ERR(getpeername(fd, (struct sockaddr *)&ss, &len), ENOTCONN);
	wait_for(s, POLLERR);
	EXPECT_ERR(recv(s, &b, 1, 0), ECONNRESET);
	close(s);
	connect_lo(fd, AF_INET, port);
	s = ut_accept(l, AF_INET);
	echo_check(fd, s, 10, 81);
	close(fd);
	close(s);
	close(l);
}

void t_efault_send_recv(void)
{
	void *bad = unmapped_page();
	char buf[16];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(send(c, NULL, 10, MSG_NOSIGNAL), EFAULT);
	EXPECT_ERR(send(c, bad, 10, MSG_NOSIGNAL), EFAULT);
	EXPECT_ERR(write(c, bad, 10), EFAULT);
	EXPECT_EQ(send(c, NULL, 0, MSG_NOSIGNAL), 0);
	write_all(c, "0123456789", 10);
	wait_inq(s, 10);
	EXPECT_ERR(recv(s, NULL, 10, 0), EFAULT);
	EXPECT_ERR(recv(s, bad, 10, 0), EFAULT);
	EXPECT_ERR(read(s, bad, 10), EFAULT);
	/* Nothing was consumed by the failed calls. */
	EXPECT_EQ(inq(s), 10);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 10);
	CHECK(!memcmp(buf, "0123456789", 10), "data mismatch after EFAULT");
	/* The connection is still fine. */
	echo_check(c, s, 100, 91);
	close(c);
	close(s);
}

void t_efault_msg(void)
{
	void *bad = unmapped_page();
	char buf[16];
	struct iovec iov = { .iov_base = NULL, .iov_len = 10 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int c, s;

	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(sendmsg(c, NULL, MSG_NOSIGNAL), EFAULT);
	EXPECT_ERR(sendmsg(c, bad, MSG_NOSIGNAL), EFAULT);
	EXPECT_ERR(sendmsg(c, &mh, MSG_NOSIGNAL), EFAULT);
	iov.iov_base = bad;
	EXPECT_ERR(sendmsg(c, &mh, MSG_NOSIGNAL), EFAULT);
	mh.msg_iov = bad;
	EXPECT_ERR(sendmsg(c, &mh, MSG_NOSIGNAL), EFAULT);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1025;	/* > UIO_MAXIOV */
	EXPECT_ERR(sendmsg(c, &mh, MSG_NOSIGNAL), EMSGSIZE);
	mh.msg_iovlen = 1;
	write_all(c, "abcdefghij", 10);
	wait_inq(s, 10);
	EXPECT_ERR(recvmsg(s, NULL, 0), EFAULT);
	EXPECT_ERR(recvmsg(s, bad, 0), EFAULT);
	iov.iov_base = NULL;
	EXPECT_ERR(recvmsg(s, &mh, 0), EFAULT);
	iov.iov_base = bad;
	EXPECT_ERR(recvmsg(s, &mh, 0), EFAULT);
	mh.msg_iov = bad;
	EXPECT_ERR(recvmsg(s, &mh, 0), EFAULT);
	EXPECT_EQ(inq(s), 10);
	mh.msg_iov = &iov;
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	EXPECT_EQ(recvmsg(s, &mh, 0), 10);
	CHECK(!memcmp(buf, "abcdefghij", 10), "data mismatch after EFAULT");
	close(c);
	close(s);
}

void t_efault_addr(void)
{
	void *bad = unmapped_page();
	struct sockaddr_storage ss;
	socklen_t len;
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), fd, c, s;

	fd = ut_socket(AF_INET);
	EXPECT_ERR(bind(fd, NULL, sizeof(struct sockaddr_in)), EFAULT);
	EXPECT_ERR(bind(fd, bad, sizeof(struct sockaddr_in)), EFAULT);
	EXPECT_ERR(connect(fd, NULL, sizeof(struct sockaddr_in)), EFAULT);
	EXPECT_ERR(connect(fd, bad, sizeof(struct sockaddr_in)), EFAULT);
	len = sizeof(ss);
	EXPECT_ERR(getsockname(fd, NULL, &len), EFAULT);
	EXPECT_ERR(getsockname(fd, bad, &len), EFAULT);
	EXPECT_ERR(getsockname(fd, (struct sockaddr *)&ss, NULL), EFAULT);
	EXPECT_ERR(getsockname(fd, (struct sockaddr *)&ss, bad), EFAULT);
	close(fd);
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	len = sizeof(ss);
	EXPECT_ERR(getpeername(c, NULL, &len), EFAULT);
	EXPECT_ERR(getpeername(c, bad, &len), EFAULT);
	EXPECT_ERR(getpeername(c, (struct sockaddr *)&ss, NULL), EFAULT);
	/* accept() with a bad address buffer (the connection is lost). */
	fd = ut_connect(AF_INET, port);
	wait_for(l, POLLIN);
	len = sizeof(ss);
	EXPECT_ERR(accept(l, bad, &len), EFAULT);
	close(fd);
	echo_check(c, s, 10, 101);
	close(c);
	close(s);
	close(l);
}

void t_bad_getsockopt(void)
{
	void *bad = unmapped_page();
	socklen_t len;
	int fd = ut_socket(AF_INET), v;

	EXPECT_ERR(getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, NULL), EFAULT);
	EXPECT_ERR(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, NULL), EFAULT);
	EXPECT_ERR(getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, bad), EFAULT);
	len = (socklen_t)-1;
	EXPECT_ERR(getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len), EINVAL);
	len = (socklen_t)-1;
	EXPECT_ERR(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len), EINVAL);
	len = sizeof(v);
	EXPECT_ERR(getsockopt(fd, SOL_SOCKET, SO_TYPE, NULL, &len), EFAULT);
	len = sizeof(v);
	EXPECT_ERR(getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, bad, &len), EFAULT);
	/* Zero length: succeeds, copies nothing. */
	len = 0;
	v = 12345;
	SYS(getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len));
	EXPECT_EQ(len, 0);
	EXPECT_EQ(v, 12345);
	len = 0;
	SYS(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len));
	EXPECT_EQ(len, 0);
	/* Unknown options. */
	len = sizeof(v);
	EXPECT_ERR(getsockopt(fd, SOL_SOCKET, 9999, &v, &len), ENOPROTOOPT);
	len = sizeof(v);
	EXPECT_ERR(getsockopt(fd, IPPROTO_TCP, 9999, &v, &len), ENOPROTOOPT);
	close(fd);
}

void t_bad_setsockopt(void)
{
	void *bad = unmapped_page();
	struct linger lg = { 1, 1 };
	struct timeval tv = { 1, 0 };
	int fd = ut_socket(AF_INET), v = 1;

	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, 2), EINVAL);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, 0), EINVAL);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, 2), EINVAL);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, 3), EINVAL);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(int)), EINVAL);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(int)), EINVAL);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, NULL, sizeof(v)), EFAULT);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, bad, sizeof(v)), EFAULT);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, NULL, sizeof(v)), EFAULT);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, bad, sizeof(v)), EFAULT);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, (socklen_t)-1), EINVAL);
	EXPECT_ERR(setsockopt(fd, SOL_SOCKET, 9999, &v, sizeof(v)), ENOPROTOOPT);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, 9999, &v, sizeof(v)), ENOPROTOOPT);
	/* Nothing changed. */
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_NODELAY), 0);
	close(fd);
}

void t_accept_not_listening(void)
{
	int fd = ut_socket(AF_INET), c, s;

	EXPECT_ERR(accept(fd, NULL, NULL), EINVAL);
	bind_lo(fd, AF_INET, 0);
	EXPECT_ERR(accept(fd, NULL, NULL), EINVAL);
	close(fd);
	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(accept(c, NULL, NULL), EINVAL);
	EXPECT_ERR(accept(s, NULL, NULL), EINVAL);
	close(c);
	close(s);
}

void t_listen_connected(void)
{
	int c, s;

	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(listen(c, 4), EINVAL);
	EXPECT_ERR(listen(s, 4), EINVAL);
	/* Still connected. */
	echo_check(c, s, 10, 111);
	close(c);
	close(s);
}

void t_send_recv_unconnected(void)
{
	uint16_t port = 0;
	int fd = ut_socket(AF_INET), l;
	char b[4];

	catch_sigpipe();
	EXPECT_ERR(send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_EQ(g_sigpipes, 0);
	EXPECT_ERR(send(fd, "x", 1, 0), EPIPE);
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_ERR(write(fd, "x", 1), EPIPE);
	EXPECT_EQ(g_sigpipes, 2);
	EXPECT_ERR(recv(fd, b, sizeof(b), 0), ENOTCONN);
	EXPECT_ERR(read(fd, b, sizeof(b)), ENOTCONN);
	EXPECT_ERR(recv(fd, b, sizeof(b), MSG_DONTWAIT), ENOTCONN);
	bind_lo(fd, AF_INET, 0);
	EXPECT_ERR(send(fd, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(recv(fd, b, sizeof(b), 0), ENOTCONN);
	close(fd);
	l = ut_listener(AF_INET, &port, 4);
	EXPECT_ERR(send(l, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_ERR(recv(l, b, sizeof(b), 0), ENOTCONN);
	close(l);
}

void t_sendto_connected(void)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(AF_INET, 9, &ss);
	int c, s;
	char b[4];

	/* TCP ignores the destination of sendto() on a connection. */
	ut_pair(AF_INET, &c, &s);
	EXPECT_EQ(sendto(c, "abc", 3, MSG_NOSIGNAL, (struct sockaddr *)&ss, len), 3);
	read_exact(s, b, 3);
	CHECK(!memcmp(b, "abc", 3), "data mismatch");
	close(c);
	close(s);
}

void t_recv_oob_no_urgent(void)
{
	int fd = ut_socket(AF_INET), c, s;
	char b[4];

	EXPECT_ERR(recv(fd, b, 1, MSG_OOB), EINVAL);	/* not ENOTCONN */
	close(fd);
	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(recv(s, b, 1, MSG_OOB), EINVAL);
	write_all(c, "data", 4);
	wait_inq(s, 4);
	EXPECT_ERR(recv(s, b, 1, MSG_OOB), EINVAL);
	EXPECT_EQ(recv(s, b, 4, 0), 4);
	close(c);
	close(s);
}

void t_shutdown_bad(void)
{
	int fd = ut_socket(AF_INET), c, s;

	EXPECT_ERR(shutdown(fd, SHUT_RD), ENOTCONN);
	EXPECT_ERR(shutdown(fd, SHUT_WR), ENOTCONN);
	EXPECT_ERR(shutdown(fd, SHUT_RDWR), ENOTCONN);
	EXPECT_ERR(shutdown(fd, 3), EINVAL);
	close(fd);
	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(shutdown(c, 3), EINVAL);
	EXPECT_ERR(shutdown(c, -1), EINVAL);
	EXPECT_ERR(shutdown(c, 100), EINVAL);
	echo_check(c, s, 10, 121);
	close(c);
	close(s);
}
