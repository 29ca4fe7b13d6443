// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: socket options (TCP level, keepalive, SOL_SOCKET).
 */
#include "harness.h"
#include "tests.h"

void t_sockopt_tcp(void)
{
	int fd = ut_socket(AF_INET), c, s, v;
	socklen_t len;

	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_NODELAY), 0);
	setint(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	setint(fd, IPPROTO_TCP, TCP_NODELAY, 5);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	setint(fd, IPPROTO_TCP, TCP_NODELAY, 0);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_NODELAY), 0);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_CORK), 0);
	setint(fd, IPPROTO_TCP, TCP_CORK, 1);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_CORK), 1);
	setint(fd, IPPROTO_TCP, TCP_CORK, 0);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_CORK), 0);
	/* TCP_MAXSEG: 536 (TCP_MSS_DEFAULT) before connecting, user value once set. */
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_MAXSEG), 536);
	setint(fd, IPPROTO_TCP, TCP_MAXSEG, 1000);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_MAXSEG), 1000);
	v = 10;
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &v, sizeof(v)), EINVAL);
	/* A longer optlen is cut to sizeof(int). */
	{
		int big[2] = { -1, -1 };

		len = sizeof(big);
		SYS(getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, big, &len));
		EXPECT_EQ(len, sizeof(int));
		EXPECT_EQ(big[0], 1000);
		EXPECT_EQ(big[1], -1);
	}
	close(fd);
	/* On a connection: options work and data still flows when corked/uncorked. */
	ut_pair(AF_INET, &c, &s);
	setint(c, IPPROTO_TCP, TCP_NODELAY, 1);
	EXPECT_EQ(getint(c, IPPROTO_TCP, TCP_NODELAY), 1);
	v = getint(c, IPPROTO_TCP, TCP_MAXSEG);
	CHECK(v >= 536 && v <= 65535, "TCP_MAXSEG on a connection: %d", v);
	setint(c, IPPROTO_TCP, TCP_CORK, 1);
	write_all(c, "cork", 4);
	setint(c, IPPROTO_TCP, TCP_CORK, 0);	/* uncorking pushes the data */
	{
		char buf[4];

		read_exact(s, buf, 4);
	}
	close(c);
	close(s);
}

void t_sockopt_tcp_info(void)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int c, s;

	ut_pair(AF_INET, &c, &s);
	memset(&ti, 0, sizeof(ti));
	SYS(getsockopt(c, IPPROTO_TCP, TCP_INFO, &ti, &len));
	CHECK(len > 0 && len <= sizeof(ti), "TCP_INFO len %u", len);
	EXPECT_EQ(ti.tcpi_state, TCP_ESTABLISHED);
	close(c);
	close(s);
}

static int read_proc_int(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

void t_sockopt_keepalive(void)
{
	int fd = ut_socket(AF_INET), v, d;

	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	setint(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	setint(fd, SOL_SOCKET, SO_KEEPALIVE, 0);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	/* Defaults come from the sysctls. */
	if ((d = read_proc_int("/proc/sys/net/ipv4/tcp_keepalive_time")) > 0)
		EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPIDLE), d);
	if ((d = read_proc_int("/proc/sys/net/ipv4/tcp_keepalive_intvl")) > 0)
		EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPINTVL), d);
	if ((d = read_proc_int("/proc/sys/net/ipv4/tcp_keepalive_probes")) > 0)
		EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPCNT), d);
	setint(fd, IPPROTO_TCP, TCP_KEEPIDLE, 30);
	setint(fd, IPPROTO_TCP, TCP_KEEPINTVL, 5);
	setint(fd, IPPROTO_TCP, TCP_KEEPCNT, 4);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPINTVL), 5);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPCNT), 4);
	v = 0;
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)), EINVAL);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v, sizeof(v)), EINVAL);
	EXPECT_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &v, sizeof(v)), EINVAL);
	EXPECT_EQ(getint(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
	close(fd);
	/* Also on an established connection. */
	{
		int c, s;

		ut_pair(AF_INET, &c, &s);
		setint(c, SOL_SOCKET, SO_KEEPALIVE, 1);
		setint(c, IPPROTO_TCP, TCP_KEEPIDLE, 60);
		EXPECT_EQ(getint(c, SOL_SOCKET, SO_KEEPALIVE), 1);
		EXPECT_EQ(getint(c, IPPROTO_TCP, TCP_KEEPIDLE), 60);
		close(c);
		close(s);
	}
}

void t_sockopt_socket(void)
{
	struct linger lg;
	socklen_t len = sizeof(lg);
	uint16_t port = 0;
	int fd = ut_socket(AF_INET), l, c, s, v, rmax;

	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_PROTOCOL), IPPROTO_TCP);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_ERROR), 0);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_ACCEPTCONN), 0);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_REUSEADDR), 0);
	setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_REUSEADDR), 1);
	setint(fd, SOL_SOCKET, SO_REUSEADDR, 0);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_REUSEADDR), 0);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_REUSEPORT), 0);
	setint(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_REUSEPORT), 1);
	setint(fd, SOL_SOCKET, SO_REUSEPORT, 0);
	/* SO_LINGER */
	SYS(getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len));
	CHECK(len == sizeof(lg) && lg.l_onoff == 0 && lg.l_linger == 0, "default linger {%d,%d}",
	      lg.l_onoff, lg.l_linger);
	lg = (struct linger){ 1, 5 };
	SYS(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	memset(&lg, 0, sizeof(lg));
	SYS(getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len));
	CHECK(lg.l_onoff == 1 && lg.l_linger == 5, "linger {%d,%d}, expected {1,5}", lg.l_onoff,
	      lg.l_linger);
	/* SO_RCVBUF / SO_SNDBUF: the kernel doubles the value. */
	rmax = read_proc_int("/proc/sys/net/core/rmem_max");
	v = rmax > 0 && rmax / 2 < 65536 ? rmax / 2 : 65536;
	setint(fd, SOL_SOCKET, SO_RCVBUF, v);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_RCVBUF), 2 * v);
	rmax = read_proc_int("/proc/sys/net/core/wmem_max");
	v = rmax > 0 && rmax / 2 < 65536 ? rmax / 2 : 65536;
	setint(fd, SOL_SOCKET, SO_SNDBUF, v);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_SNDBUF), 2 * v);
	/* Tiny values are raised to the minimum (same as a fresh TCP socket's). */
	{
		int ref = tcp_socket(AF_INET), want;

		setint(ref, SOL_SOCKET, SO_RCVBUF, 1);
		want = getint(ref, SOL_SOCKET, SO_RCVBUF);
		setint(fd, SOL_SOCKET, SO_RCVBUF, 1);
		EXPECT_EQ(getint(fd, SOL_SOCKET, SO_RCVBUF), want);
		close(ref);
	}
	close(fd);
	/* SO_ACCEPTCONN: 1 on a listener only. */
	l = ut_listener(AF_INET, &port, 16);
	EXPECT_EQ(getint(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_ACCEPTCONN), 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ACCEPTCONN), 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PROTOCOL), IPPROTO_TCP);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
	close(c);
	close(s);
	close(l);
}

/*
 * Timeout opt (SO_RCVTIMEO, SO_SNDTIMEO) is the same on s as on its listener l, whole
 * seconds secs: compared as the listener reports it (in jiffies, 1.252 s where HZ is 250).
 */
static void same_timeout(int l, int s, int opt, long secs)
{
	struct timeval got, want;
	socklen_t len = sizeof(got);

	SYS(getsockopt(l, SOL_SOCKET, opt, &want, &len));
	SYS(getsockopt(s, SOL_SOCKET, opt, &got, &len));
	CHECK(got.tv_sec == want.tv_sec && got.tv_usec == want.tv_usec && want.tv_sec == secs,
	      "%s %ld.%06ld, the listener's %ld.%06ld",
	      opt == SO_RCVTIMEO ? "SO_RCVTIMEO" : "SO_SNDTIMEO", (long)got.tv_sec,
	      (long)got.tv_usec, (long)want.tv_sec, (long)want.tv_usec);
}

/*
 * An accepted socket has its listener's options, as TCP copies the listener's sock: the
 * socket level's (timeouts, SO_RCVLOWAT, SO_LINGER, SO_KEEPALIVE, SO_OOBINLINE, buffer
 * sizes set by hand, SO_TIMESTAMPNS, SO_REUSEADDR, SO_BROADCAST, SO_DONTROUTE; not
 * SO_PRIORITY), IP_TOS and IP_TTL (IPv6's twins) and TCP's (TCP_NODELAY, the keepalive
 * timing, TCP_USER_TIMEOUT, TCP_NOTSENT_LOWAT), and its calls follow them; over IPv4 and
 * IPv6. Servers set them once, on the listener: an accepted socket that lost its receive
 * timeout would leave a server blocked for good.
 */
static void accept_inherits(int af)
{
	struct timeval tv = { 1, 250000 };
	struct linger lg = { 1, 7 };
	struct timespec t0, t1;
	uint16_t port = 0;
	int l = ut_listener(af, &port, 4), c, s;
	int ip = af == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
	int tos = af == AF_INET6 ? IPV6_TCLASS : IP_TOS;
	int ttl = af == AF_INET6 ? IPV6_UNICAST_HOPS : IP_TTL;
	socklen_t len;
	double waited;
	char buf[4];

	SYS(setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	tv.tv_sec = 2;
	SYS(setsockopt(l, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	SYS(setsockopt(l, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	setint(l, SOL_SOCKET, SO_RCVLOWAT, 3);
	setint(l, SOL_SOCKET, SO_KEEPALIVE, 1);
	setint(l, SOL_SOCKET, SO_OOBINLINE, 1);
	setint(l, SOL_SOCKET, SO_PRIORITY, 5);
	setint(l, SOL_SOCKET, SO_RCVBUF, 32768);
	setint(l, SOL_SOCKET, SO_SNDBUF, 32768);
	setint(l, SOL_SOCKET, SO_TIMESTAMPNS, 1);
	setint(l, SOL_SOCKET, SO_REUSEADDR, 1);
	setint(l, SOL_SOCKET, SO_BROADCAST, 1);
	setint(l, SOL_SOCKET, SO_DONTROUTE, 1);
	setint(l, IPPROTO_TCP, TCP_NODELAY, 1);
	setint(l, IPPROTO_TCP, TCP_KEEPIDLE, 77);
	setint(l, IPPROTO_TCP, TCP_KEEPINTVL, 11);
	setint(l, IPPROTO_TCP, TCP_KEEPCNT, 3);
	setint(l, IPPROTO_TCP, TCP_USER_TIMEOUT, 4321);
	setint(l, ip, tos, 0x28);
	setint(l, ip, ttl, 33);
	setint(l, IPPROTO_TCP, TCP_NOTSENT_LOWAT, 12345);
	c = ut_connect(af, port);
	s = ut_accept(l, af);

	same_timeout(l, s, SO_RCVTIMEO, 1);
	same_timeout(l, s, SO_SNDTIMEO, 2);
	memset(&lg, 0, sizeof(lg));
	len = sizeof(lg);
	SYS(getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len));
	CHECK(lg.l_onoff == 1 && lg.l_linger == 7, "SO_LINGER {%d,%d}, expected {1,7}", lg.l_onoff,
	      lg.l_linger);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_RCVLOWAT), 3);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_KEEPALIVE), 1);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_OOBINLINE), 1);
	/* Not SO_PRIORITY: TCP's accepted socket starts at 0. */
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_PRIORITY), 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_RCVBUF), getint(l, SOL_SOCKET, SO_RCVBUF));
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_SNDBUF), getint(l, SOL_SOCKET, SO_SNDBUF));
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_TIMESTAMPNS), 1);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_REUSEADDR), 1);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_BROADCAST), 1);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_DONTROUTE), 1);
	EXPECT_EQ(getint(s, IPPROTO_TCP, TCP_NODELAY), 1);
	EXPECT_EQ(getint(s, IPPROTO_TCP, TCP_KEEPIDLE), 77);
	EXPECT_EQ(getint(s, IPPROTO_TCP, TCP_KEEPINTVL), 11);
	EXPECT_EQ(getint(s, IPPROTO_TCP, TCP_KEEPCNT), 3);
	EXPECT_EQ(getint(s, IPPROTO_TCP, TCP_USER_TIMEOUT), 4321);
	EXPECT_EQ(getint(s, ip, tos), 0x28);
	EXPECT_EQ(getint(s, ip, ttl), 33);
	EXPECT_EQ(getint(s, IPPROTO_TCP, TCP_NOTSENT_LOWAT), 12345);
	close(l);

	/* The receive timeout holds: a read with nothing to read ends with EAGAIN after it. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	waited = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECK(waited >= 1.2, "recv gave up after %.3f s, before the listener's 1.25 s", waited);
	close(c);
	close(s);
}

void t_accept_inherits_options(void)
{
	accept_inherits(AF_INET);
	accept_inherits(AF_INET6);
}
