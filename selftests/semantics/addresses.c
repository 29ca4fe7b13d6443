// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: addresses (getsockname/getpeername, truncation, v6 dual-stack).
 */
#include "harness.h"
#include "tests.h"

static void check_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;

		CHECK(sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK), "not 127.0.0.1: %s", ss_str(ss));
		for (size_t i = 0; i < sizeof(sin->sin_zero); i++)
			CHECK(sin->sin_zero[i] == 0, "sin_zero not zeroed: %s", ss_str(ss));
	} else {
		const struct sockaddr_in6 *sin6 = (const void *)ss;

		CHECK(!memcmp(&sin6->sin6_addr, &in6addr_loopback, 16), "not ::1: %s", ss_str(ss));
		CHECK(sin6->sin6_flowinfo == 0 && sin6->sin6_scope_id == 0,
		      "flowinfo %u scope_id %u", sin6->sin6_flowinfo, sin6->sin6_scope_id);
	}
}

static void names_test(int af)
{
	struct sockaddr_storage ln, cn, cp, sn, sp;
	socklen_t len = sizeof(ln);
	uint16_t port = 0;
	int l = ut_listener(af, &port, 16), c, s;

	get_name(l, false, &ln, af);
	check_loopback(&ln);
	EXPECT_EQ(ss_port(&ln), port);
	CHECK(port != 0, "listener port 0");
	EXPECT_ERR(getpeername(l, (struct sockaddr *)&sp, &len), ENOTCONN);
	c = ut_connect(af, port);
	s = ut_accept(l, af);
	get_name(c, false, &cn, af);
	get_name(c, true, &cp, af);
	get_name(s, false, &sn, af);
	get_name(s, true, &sp, af);
	check_loopback(&cn);
	check_loopback(&cp);
	check_loopback(&sn);
	check_loopback(&sp);
	EXPECT_EQ(ss_port(&cp), port);
	EXPECT_EQ(ss_port(&sn), port);
	EXPECT_EQ(ss_port(&sp), ss_port(&cn));
	CHECK(ss_port(&cn) != 0 && ss_port(&cn) != port, "client port %u", ss_port(&cn));
	/* accept() fills in the peer address too. */
	{
		int c2 = ut_connect(af, port), s2;
		struct sockaddr_storage a, c2n;

		len = sizeof(a);
		memset(&a, 0xa5, sizeof(a));
		s2 = accept(l, (struct sockaddr *)&a, &len);
		CHECK(s2 >= 0, "accept: %s", ename(errno));
		check_sock(s2, af, -1, af);
		EXPECT_EQ(len, af == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
		get_name(c2, false, &c2n, af);
		CHECK(!memcmp(&a, &c2n, len), "accept address %s != client name %s", ss_str(&a),
		      ss_str(&c2n));
		close(c2);
		close(s2);
	}
	close(c);
	close(s);
	close(l);
}

void t_names_v4(void)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = ut_socket(AF_INET);

	/* Unbound, unconnected: 0.0.0.0:0, no peer. */
	get_name(fd, false, &ss, AF_INET);
	CHECK(((struct sockaddr_in *)&ss)->sin_addr.s_addr == 0 && ss_port(&ss) == 0,
	      "fresh socket name %s", ss_str(&ss));
	EXPECT_ERR(getpeername(fd, (struct sockaddr *)&ss, &len), ENOTCONN);
	close(fd);
	names_test(AF_INET);
}

void t_names_v6(void)
{
	names_test(AF_INET6);
}

static void truncated_test(int af)
{
	struct sockaddr_storage full, ss;
	const socklen_t want = af == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	socklen_t len;
	int c, s, k;

	ut_pair(af, &c, &s);
	for (k = 0; k < 2; k++) {
		int (*fn)(int, struct sockaddr *, socklen_t *) = k ? getpeername : getsockname;

		len = sizeof(full);
		SYS(fn(c, (struct sockaddr *)&full, &len));
		/* Short buffer: truncated copy, full length returned. */
		len = 4;
		memset(&ss, 0xa5, sizeof(ss));
		SYS(fn(c, (struct sockaddr *)&ss, &len));
		EXPECT_EQ(len, want);
		CHECK(!memcmp(&ss, &full, 4), "truncated copy differs");
		CHECK(((unsigned char *)&ss)[4] == 0xa5, "wrote beyond the given length");
		/* Zero length: nothing copied, full length returned. */
		len = 0;
		memset(&ss, 0xa5, sizeof(ss));
		SYS(fn(c, (struct sockaddr *)&ss, &len));
		EXPECT_EQ(len, want);
		CHECK(((unsigned char *)&ss)[0] == 0xa5, "wrote with length 0");
		/* Longer buffer: the real length. */
		len = sizeof(ss);
		SYS(fn(c, (struct sockaddr *)&ss, &len));
		EXPECT_EQ(len, want);
		/* Negative length. */
		len = (socklen_t)-1;
		EXPECT_ERR(fn(c, (struct sockaddr *)&ss, &len), EINVAL);
	}
	close(c);
	close(s);
}

void t_names_truncated(void)
{
	truncated_test(AF_INET);
	truncated_test(AF_INET6);
}

void t_v6_dualstack(void)
{
	struct sockaddr_in6 any = { .sin6_family = AF_INET6 }, a;
	struct sockaddr_storage cn;
	socklen_t len = sizeof(a);
	static const unsigned char mapped[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	int l = ut_socket(AF_INET6), c, s, l2;
	uint16_t port;

	setint(l, IPPROTO_IPV6, IPV6_V6ONLY, 0);
	EXPECT_EQ(getint(l, IPPROTO_IPV6, IPV6_V6ONLY), 0);
	SYS(bind(l, (struct sockaddr *)&any, sizeof(any)));
	SYS(listen(l, 16));
	port = local_port(l);
	check_sock(l, AF_INET6, TCP_LISTEN, AF_INET6);
	c = ut_connect(AF_INET, port);
	s = accept(l, (struct sockaddr *)&a, &len);
	CHECK(s >= 0, "accept: %s", ename(errno));
	check_sock(s, AF_INET6, TCP_ESTABLISHED, AF_INET6);
	EXPECT_EQ(len, sizeof(struct sockaddr_in6));
	EXPECT_EQ(a.sin6_family, AF_INET6);
	CHECK(!memcmp(&a.sin6_addr, mapped, 16), "peer is not ::ffff:127.0.0.1: %s",
	      ss_str((struct sockaddr_storage *)&a));
	get_name(c, false, &cn, AF_INET);
	EXPECT_EQ(ntohs(a.sin6_port), ss_port(&cn));
	len = sizeof(a);
	SYS(getsockname(s, (struct sockaddr *)&a, &len));
	CHECK(len == sizeof(a) && !memcmp(&a.sin6_addr, mapped, 16) && ntohs(a.sin6_port) == port,
	      "accepted socket name %s", ss_str((struct sockaddr_storage *)&a));
	echo_check(c, s, 3000, 21);
	close(c);
	close(s);
	close(l);
	/* IPV6_V6ONLY=1: a v4 client finds nothing there. */
	l2 = ut_socket(AF_INET6);
	setint(l2, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	EXPECT_EQ(getint(l2, IPPROTO_IPV6, IPV6_V6ONLY), 1);
	SYS(bind(l2, (struct sockaddr *)&any, sizeof(any)));
	SYS(listen(l2, 16));
	port = local_port(l2);
	c = ut_socket(AF_INET);
	{
		struct sockaddr_storage ss;
		socklen_t sl = mkaddr(AF_INET, port, &ss);

		EXPECT_ERR(connect(c, (struct sockaddr *)&ss, sl), ECONNREFUSED);
	}
	close(c);
	close(l2);
}
