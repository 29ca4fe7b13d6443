// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: datagram sockets. Every assertion states what Linux UDP does, so
 * with --family inet these run against UDP itself; with --family sci the sockets
 * under test are AF_SCI datagram sockets, and through the preload (SCI_DGRAM=1) the
 * program's UDP sockets are. Peers that are not under test are plain UDP sockets made
 * with the raw system call (udp_plain), which no preload can rewrite.
 */
#include "harness.h"
#include "tests.h"
#include "dgram.h"
#include <netinet/udp.h>

/* A plain UDP socket, never rewritten. */
static int udp_plain(int af)
{
	int fd = (int)syscall(SYS_socket, af, SOCK_DGRAM, 0);

	if (fd < 0)
		FAIL("SYS_socket(%d, SOCK_DGRAM): %s", af, ename(errno));
	return fd;
}

/* Binds fd to the loopback address of af, port 0; returns the address it got. */
static void bind_any_port(int fd, int af, struct sockaddr_storage *ss)
{
	socklen_t len = mkaddr(af, 0, ss);

	if (bind(fd, (struct sockaddr *)ss, len) < 0)
		FAIL("bind(%s port 0): %s", afname(af), ename(errno));
	get_name(fd, false, ss, af);
	CHECK(ss_port(ss) != 0, "bind to port 0 left port 0");
}

static socklen_t ss_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static void send_to(int fd, const void *buf, size_t len, const struct sockaddr_storage *to)
{
	ssize_t n = sendto(fd, buf, len, 0, (const struct sockaddr *)to, ss_len(to));

	if (n < 0)
		FAIL("sendto(%zu bytes to %s): %s", len, ss_str(to), ename(errno));
	EXPECT_EQ(n, len);
}

/* Receives one datagram (waiting up to 10 s for it); returns its length. */
static ssize_t recv_one(int fd, void *buf, size_t len, int flags, struct sockaddr_storage *from)
{
	socklen_t alen = sizeof(*from);
	ssize_t n;

	wait_for(fd, POLLIN);
	if (from)
		memset(from, 0, sizeof(*from));
	n = recvfrom(fd, buf, len, flags, (struct sockaddr *)from, from ? &alen : NULL);
	if (n < 0)
		FAIL("recvfrom(%zu): %s", len, ename(errno));
	return n;
}

void dgram_pair(int af, int *a, struct sockaddr_storage *aa, int *b,
		       struct sockaddr_storage *ba)
{
	*a = ut_dgram(af);
	*b = ut_dgram(af);
	bind_any_port(*a, af, aa);
	bind_any_port(*b, af, ba);
}

static void echo(int af)
{
	struct sockaddr_storage aa, ba, from;
	char out[512], in[600];
	int a, b;

	dgram_pair(af, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 17);
	send_to(a, out, sizeof(out), &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, &from), sizeof(out));
	CHECK(!memcmp(in, out, sizeof(out)), "payload differs");
	CHECK(from.ss_family == af && ss_port(&from) == ss_port(&aa),
	      "source %s, expected %s", ss_str(&from), ss_str(&aa));
	/* And back, to the address it came from. */
	send_to(b, in, 100, &from);
	EXPECT_EQ(recv_one(a, out, sizeof(out), 0, NULL), 100);
	close(a);
	close(b);
}

void t_dgram_echo_v4(void) { echo(AF_INET); }
void t_dgram_echo_v6(void) { echo(AF_INET6); }

void t_dgram_boundaries(void)
{
	static const size_t sizes[] = { 1, 100, 1000, 1472, 4000, 7 };
	struct sockaddr_storage aa, ba;
	char buf[8192];
	int a, b;
	size_t i;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill_pattern(buf, sizes[i], (unsigned)i);
		send_to(a, buf, sizes[i], &ba);
	}
	/* One receive per datagram, each exactly its size, in order. */
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char want[8192];

		fill_pattern(want, sizes[i], (unsigned)i);
		EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), sizes[i]);
		CHECK(!memcmp(buf, want, sizes[i]), "datagram %zu differs", i);
	}
	EXPECT_ERR(recv(b, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	close(a);
	close(b);
}

void t_dgram_trunc(void)
{
	struct sockaddr_storage aa, ba;
	char out[300], in[300];
	struct iovec iov = { in, 10 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 3);
	send_to(a, out, 100, &ba);
	send_to(a, out, 200, &ba);
	wait_for(b, POLLIN);
	/* A short buffer gets its size; the rest of the datagram is gone (MSG_TRUNC). */
	EXPECT_EQ(SYS(recvmsg(b, &mh, 0)), 10);
	CHECK(mh.msg_flags & MSG_TRUNC, "msg_flags %#x without MSG_TRUNC", mh.msg_flags);
	CHECK(!memcmp(in, out, 10), "truncated payload differs");
	/* With MSG_TRUNC the real length comes back. */
	EXPECT_EQ(recv_one(b, in, 10, MSG_TRUNC, NULL), 200);
	EXPECT_ERR(recv(b, in, sizeof(in), MSG_DONTWAIT), EAGAIN);
	close(a);
	close(b);
}

void t_dgram_peek(void)
{
	struct sockaddr_storage aa, ba, from;
	char out[64], in[64];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 5);
	send_to(a, out, 40, &ba);
	send_to(a, out + 1, 30, &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), MSG_PEEK, &from), 40);
	EXPECT_EQ(ss_port(&from), ss_port(&aa));
	EXPECT_EQ(recv_one(b, in, sizeof(in), MSG_PEEK, NULL), 40);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), 40);
	CHECK(!memcmp(in, out, 40), "payload differs");
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), 30);
	close(a);
	close(b);
}

void t_dgram_dontwait(void)
{
	struct sockaddr_storage ss;
	char buf[16];
	int fd = ut_dgram(AF_INET), nb = ut_dgram_flags(AF_INET, SOCK_NONBLOCK);

	bind_any_port(fd, AF_INET, &ss);
	bind_any_port(nb, AF_INET, &ss);
	EXPECT_ERR(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	EXPECT_ERR(recv(nb, buf, sizeof(buf), 0), EAGAIN);
	EXPECT_ERR(recvfrom(nb, buf, sizeof(buf), 0, NULL, NULL), EAGAIN);
	close(fd);
	close(nb);
}

void t_dgram_rcvtimeo(void)
{
	struct timeval tv = { 0, 200000 };
	struct sockaddr_storage ss;
	char buf[16];
	int fd = ut_dgram(AF_INET);
	struct moment t0;
	char took[96];

	bind_any_port(fd, AF_INET, &ss);
	SYS(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	t0 = moment_now();
	EXPECT_ERR(recv(fd, buf, sizeof(buf), 0), EAGAIN);
	CHECK(timeo_honoured(t0, 0.2, took, sizeof(took)), "SO_RCVTIMEO of 200 ms returned after %s",
	      took);
	close(fd);
}

void t_dgram_connected(void)
{
	struct sockaddr_storage aa, ba, ca;
	char buf[64];
	int a, b, c = udp_plain(AF_INET);

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	bind_any_port(c, AF_INET, &ca);
	SYS(connect(a, (struct sockaddr *)&ba, ss_len(&ba)));
	/* A connected socket takes datagrams from its peer only. */
	send_to(c, "stranger", 8, &aa);
	send_to(b, "peer", 4, &aa);
	EXPECT_EQ(recv_one(a, buf, sizeof(buf), 0, NULL), 4);
	CHECK(!memcmp(buf, "peer", 4), "got the stranger's datagram");
	EXPECT_ERR(recv(a, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	/* send() without an address goes to the peer. */
	EXPECT_EQ(SYS(send(a, "hello", 5, 0)), 5);
	EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 5);
	/* And sendto() with another address still goes there (UDP allows it). */
	EXPECT_EQ(SYS(sendto(a, "x", 1, 0, (struct sockaddr *)&ca, ss_len(&ca))), 1);
	EXPECT_EQ(recv_one(c, buf, sizeof(buf), 0, NULL), 1);
	close(a);
	close(b);
	close(c);
}

void t_dgram_disconnect(void)
{
	struct sockaddr_storage aa, ba, peer;
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	socklen_t len = sizeof(peer);
	int a, b;

	a = ut_dgram(AF_INET);
	b = ut_dgram(AF_INET);
	/* A port chosen by the program (not by port 0) stays through a disconnect. */
	bind_lo(a, AF_INET, fixed_port(0));
	get_name(a, false, &aa, AF_INET);
	bind_any_port(b, AF_INET, &ba);
	SYS(connect(a, (struct sockaddr *)&ba, ss_len(&ba)));
	get_name(a, true, &peer, AF_INET);
	EXPECT_EQ(ss_port(&peer), ss_port(&ba));
	SYS(connect(a, &unspec, sizeof(unspec)));
	EXPECT_ERR(getpeername(a, (struct sockaddr *)&peer, &len), ENOTCONN);
	EXPECT_ERR(send(a, "x", 1, 0), EDESTADDRREQ);
	/* It keeps its port. */
	get_name(a, false, &peer, AF_INET);
	EXPECT_EQ(ss_port(&peer), ss_port(&aa));
	close(a);
	close(b);
}

void t_dgram_unconnected_send(void)
{
	int fd = ut_dgram(AF_INET);

	EXPECT_ERR(send(fd, "x", 1, 0), EDESTADDRREQ);
	EXPECT_ERR(write(fd, "x", 1), EDESTADDRREQ);
	close(fd);
}

void t_dgram_refused(void)
{
	struct sockaddr_storage ss, me;
	socklen_t len = sizeof(int);
	char buf[8];
	int err = 0;
	int gone = udp_plain(AF_INET), fd = ut_dgram(AF_INET);

	/* A port nothing is bound to any more. */
	bind_any_port(gone, AF_INET, &ss);
	close(gone);
	bind_any_port(fd, AF_INET, &me);
	SYS(connect(fd, (struct sockaddr *)&ss, ss_len(&ss)));
	SYS(send(fd, "ping", 4, 0));
	/* The port unreachable comes back as an error on the connected socket. */
	wait_for(fd, POLLERR);
	EXPECT_ERR(recv(fd, buf, sizeof(buf), 0), ECONNREFUSED);
	/* Reported once: SO_ERROR is clear after the receive took it. */
	SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
	EXPECT_EQ(err, 0);
	/* Again, this time taken by SO_ERROR: the next receive does not see it. */
	SYS(send(fd, "ping", 4, 0));
	wait_for(fd, POLLERR);
	SYS(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len));
	EXPECT_EQ(err, ECONNREFUSED);
	EXPECT_ERR(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	EXPECT_EQ(poll1(fd, POLLIN, 0) & POLLERR, 0);
	close(fd);
}

void t_dgram_zero_len(void)
{
	struct sockaddr_storage aa, ba;
	char buf[8];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	send_to(a, "", 0, &ba);
	/* An empty datagram is one: readable, and received as 0 bytes. */
	EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 0);
	EXPECT_ERR(recv(b, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	close(a);
	close(b);
}

static void largest(int af, size_t max)
{
	struct sockaddr_storage aa, ba;
	char *out = malloc(max + 1), *in = malloc(max + 1);
	int a, b;

	CHECK(out && in, "malloc");
	dgram_pair(af, &a, &aa, &b, &ba);
	fill_pattern(out, max + 1, 9);
	EXPECT_ERR(sendto(a, out, max + 1, 0, (struct sockaddr *)&ba, ss_len(&ba)), EMSGSIZE);
	send_to(a, out, max, &ba);
	EXPECT_EQ(recv_one(b, in, max + 1, 0, NULL), max);
	CHECK(!memcmp(in, out, max), "largest datagram differs");
	free(out);
	free(in);
	close(a);
	close(b);
}

void t_dgram_largest_v4(void) { largest(AF_INET, 65507); }
void t_dgram_largest_v6(void) { largest(AF_INET6, 65527); }

void t_dgram_mmsg(void)
{
	enum { N = 8 };
	struct sockaddr_storage aa, ba;
	struct mmsghdr out[N], in[N];
	struct iovec oiov[N], iiov[N];
	char obuf[N][256], ibuf[N][256];
	int a, b, i, got = 0;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	memset(out, 0, sizeof(out));
	memset(in, 0, sizeof(in));
	for (i = 0; i < N; i++) {
		fill_pattern(obuf[i], sizeof(obuf[i]), (unsigned)i + 40);
		oiov[i] = (struct iovec){ obuf[i], (size_t)(10 + 20 * i) };
		out[i].msg_hdr.msg_iov = &oiov[i];
		out[i].msg_hdr.msg_iovlen = 1;
		out[i].msg_hdr.msg_name = &ba;
		out[i].msg_hdr.msg_namelen = ss_len(&ba);
		iiov[i] = (struct iovec){ ibuf[i], sizeof(ibuf[i]) };
		in[i].msg_hdr.msg_iov = &iiov[i];
		in[i].msg_hdr.msg_iovlen = 1;
	}
	EXPECT_EQ(SYS(sendmmsg(a, out, N, 0)), N);
	while (got < N) {
		int n;

		wait_for(b, POLLIN);
		n = (int)SYS(recvmmsg(b, in + got, N - got, MSG_DONTWAIT, NULL));
		got += n;
	}
	for (i = 0; i < N; i++) {
		EXPECT_EQ(in[i].msg_len, 10 + 20 * i);
		CHECK(!memcmp(ibuf[i], obuf[i], in[i].msg_len), "message %d differs", i);
	}
	close(a);
	close(b);
}

void t_dgram_fionread(void)
{
	struct sockaddr_storage aa, ba;
	char buf[512];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	EXPECT_EQ(inq(b), 0);
	send_to(a, buf, 100, &ba);
	send_to(a, buf, 300, &ba);
	wait_for(b, POLLIN);
	/* UDP's FIONREAD is the size of the next datagram, not of the queue. */
	EXPECT_EQ(inq(b), 100);
	EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 100);
	EXPECT_EQ(inq(b), 300);
	close(a);
	close(b);
}

/* The first control message of level/type in mh, or NULL. */
static struct cmsghdr *find_cmsg(struct msghdr *mh, int level, int type)
{
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == level && c->cmsg_type == type)
			return c;
	return NULL;
}

/* Receives one datagram with room for control messages into cbuf. */
static ssize_t recv_cmsg(int fd, struct msghdr *mh, char *cbuf, size_t clen)
{
	static char data[2048];
	static struct iovec iov;
	ssize_t n;

	iov = (struct iovec){ data, sizeof(data) };
	memset(mh, 0, sizeof(*mh));
	mh->msg_iov = &iov;
	mh->msg_iovlen = 1;
	mh->msg_control = cbuf;
	mh->msg_controllen = clen;
	wait_for(fd, POLLIN);
	n = recvmsg(fd, mh, 0);
	if (n < 0)
		FAIL("recvmsg: %s", ename(errno));
	return n;
}

void t_dgram_pktinfo_v4(void)
{
	struct sockaddr_storage aa, ba;
	char cbuf[256];
	struct msghdr mh;
	struct cmsghdr *c;
	struct in_pktinfo pi;
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	setint(b, IPPROTO_IP, IP_PKTINFO, 1);
	send_to(a, "pkt", 3, &ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 3);
	c = find_cmsg(&mh, IPPROTO_IP, IP_PKTINFO);
	CHECK(c, "no IP_PKTINFO control message");
	memcpy(&pi, CMSG_DATA(c), sizeof(pi));
	EXPECT_EQ(ntohl(pi.ipi_addr.s_addr), INADDR_LOOPBACK);
	close(a);
	close(b);
}

void t_dgram_pktinfo_v6(void)
{
	struct sockaddr_storage aa, ba;
	char cbuf[256];
	struct msghdr mh;
	struct cmsghdr *c;
	struct in6_pktinfo pi;
	int a, b;

	dgram_pair(AF_INET6, &a, &aa, &b, &ba);
	setint(b, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
	send_to(a, "pkt6", 4, &ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 4);
	c = find_cmsg(&mh, IPPROTO_IPV6, IPV6_PKTINFO);
	CHECK(c, "no IPV6_PKTINFO control message");
	memcpy(&pi, CMSG_DATA(c), sizeof(pi));
	CHECK(IN6_IS_ADDR_LOOPBACK(&pi.ipi6_addr), "IPV6_PKTINFO address is not ::1");
	close(a);
	close(b);
}

void t_dgram_timestamp(void)
{
	struct sockaddr_storage aa, ba;
	char cbuf[256];
	struct msghdr mh;
	struct cmsghdr *c;
	struct timeval tv, t0;
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	setint(b, SOL_SOCKET, SO_TIMESTAMP, 1);
	EXPECT_EQ(getint(b, SOL_SOCKET, SO_TIMESTAMP), 1);
	gettimeofday(&t0, NULL);
	send_to(a, "ts", 2, &ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 2);
	c = find_cmsg(&mh, SOL_SOCKET, SCM_TIMESTAMP);
	CHECK(c, "no SCM_TIMESTAMP control message");
	memcpy(&tv, CMSG_DATA(c), sizeof(tv));
	CHECK(tv.tv_sec >= t0.tv_sec - 1 && tv.tv_sec <= t0.tv_sec + 60,
	      "timestamp %ld, sent at %ld", (long)tv.tv_sec, (long)t0.tv_sec);
	close(a);
	close(b);
}

/*
 * Sends one more datagram from a to b, which must report (SO_RXQ_OVFL) every one of the
 * `dropped` datagrams not received: the count at its queueing (UDP) or its reading (SCI).
 */
static void next_reports_drops(int a, int b, const struct sockaddr_storage *ba, int dropped)
{
	char cbuf[256];
	struct msghdr mh;
	struct cmsghdr *c;
	uint32_t drops = 0;

	send_to(a, "next", 4, ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 4);
	c = find_cmsg(&mh, SOL_SOCKET, SO_RXQ_OVFL);
	CHECK(c, "no SO_RXQ_OVFL control message after %d drops", dropped);
	memcpy(&drops, CMSG_DATA(c), sizeof(drops));
	EXPECT_EQ(drops, dropped);
}

void t_dgram_rcvbuf_drops(void)
{
	enum { N = 64, SIZE = 1000 };
	struct sockaddr_storage aa, ba;
	char buf[SIZE];
	int a, b, i, got = 0;
	ssize_t n;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	setint(b, SOL_SOCKET, SO_RCVBUF, 4096);
	setint(b, SOL_SOCKET, SO_RXQ_OVFL, 1);
	/* The sender never blocks; what does not fit is dropped at the receiver. */
	memset(buf, 'd', sizeof(buf));
	for (i = 0; i < N; i++)
		send_to(a, buf, SIZE, &ba);
	while ((n = recv(b, buf, sizeof(buf), MSG_DONTWAIT)) >= 0) {
		EXPECT_EQ(n, SIZE);
		got++;
	}
	CHECK(errno == EAGAIN, "recv: %s", ename(errno));
	CHECK(got > 0 && got < N, "received %d of %d datagrams through a 4 KiB buffer", got, N);
	/*
	 * SO_RXQ_OVFL reports the drops counted when a datagram was queued: the next one
	 * says that every datagram not received was counted as dropped.
	 */
	next_reports_drops(a, b, &ba, N - got);
	close(a);
	close(b);
}

void t_dgram_poll(void)
{
	struct sockaddr_storage aa, ba;
	char buf[8];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	EXPECT_EQ(poll1(b, POLLIN | POLLOUT, 0), POLLOUT);
	send_to(a, "x", 1, &ba);
	wait_for(b, POLLIN);
	EXPECT_EQ(poll1(b, POLLIN | POLLOUT, 0), POLLIN | POLLOUT);
	EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 1);
	EXPECT_EQ(poll1(b, POLLIN, 0), 0);
	close(a);
	close(b);
}

static void epoll_case(bool edge)
{
	struct sockaddr_storage aa, ba;
	struct epoll_event ev = { .events = EPOLLIN | (edge ? EPOLLET : 0) }, got[4];
	char buf[8];
	int a, b, ep = (int)SYS(epoll_create1(0)), i;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	ev.data.fd = b;
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev));
	EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
	for (i = 0; i < 3; i++) {
		send_to(a, "e", 1, &ba);
		EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 10000)), 1);
		CHECK(got[0].events & EPOLLIN, "events %#x", got[0].events);
		/* Nothing read: level-triggered reports it again, edge-triggered not. */
		EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), edge ? 0 : 1);
	}
	for (i = 0; i < 3; i++)
		EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 1);
	EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
	close(ep);
	close(a);
	close(b);
}

void t_dgram_epoll_level(void) { epoll_case(false); }
void t_dgram_epoll_edge(void) { epoll_case(true); }

void t_dgram_names(void)
{
	struct sockaddr_storage ss, ba;
	socklen_t len = sizeof(ss);
	int a = ut_dgram(AF_INET), b = ut_dgram(AF_INET);
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

	/* Unbound: the wildcard address and port 0. */
	get_name(a, false, &ss, AF_INET);
	EXPECT_EQ(sin->sin_addr.s_addr, htonl(INADDR_ANY));
	EXPECT_EQ(ss_port(&ss), 0);
	EXPECT_ERR(getpeername(a, (struct sockaddr *)&ss, &len), ENOTCONN);
	/* A send binds it to a port. */
	bind_any_port(b, AF_INET, &ba);
	send_to(a, "n", 1, &ba);
	get_name(a, false, &ss, AF_INET);
	CHECK(ss_port(&ss) != 0, "no port after a send");
	close(a);
	close(b);
}

void t_dgram_bind_inuse(void)
{
	struct sockaddr_storage ss;
	int a = ut_dgram(AF_INET), b = ut_dgram(AF_INET), c = ut_dgram(AF_INET),
	    d = ut_dgram(AF_INET);

	bind_any_port(a, AF_INET, &ss);
	EXPECT_ERR(bind(b, (struct sockaddr *)&ss, ss_len(&ss)), EADDRINUSE);
	/* SO_REUSEADDR on both lets UDP share a port. */
	setint(c, SOL_SOCKET, SO_REUSEADDR, 1);
	setint(d, SOL_SOCKET, SO_REUSEADDR, 1);
	bind_any_port(c, AF_INET, &ss);
	SYS(bind(d, (struct sockaddr *)&ss, ss_len(&ss)));
	close(a);
	close(b);
	close(c);
	close(d);
}

void t_dgram_v6_dualstack(void)
{
	struct sockaddr_storage ss, from, to;
	char buf[8];
	int six = ut_dgram(AF_INET6), four = ut_dgram(AF_INET);
	struct sockaddr_in6 *any = (struct sockaddr_in6 *)&ss;

	memset(&ss, 0, sizeof(ss));
	any->sin6_family = AF_INET6;
	any->sin6_addr = in6addr_any;
	setint(six, IPPROTO_IPV6, IPV6_V6ONLY, 0);
	SYS(bind(six, (struct sockaddr *)&ss, sizeof(*any)));
	mkaddr(AF_INET, local_port(six), &to);
	send_to(four, "46", 2, &to);
	EXPECT_EQ(recv_one(six, buf, sizeof(buf), 0, &from), 2);
	CHECK(from.ss_family == AF_INET6 &&
	      IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&from)->sin6_addr),
	      "source %s is not v4-mapped", ss_str(&from));
	close(six);
	close(four);
}

void t_dgram_no_listen_accept(void)
{
	int fd = ut_dgram(AF_INET);

	EXPECT_ERR(listen(fd, 5), EOPNOTSUPP);
	EXPECT_ERR(accept(fd, NULL, NULL), EOPNOTSUPP);
	close(fd);
}

void t_dgram_shutdown(void)
{
	struct sockaddr_storage aa, ba;
	char buf[8];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	EXPECT_ERR(shutdown(a, SHUT_RDWR), ENOTCONN);
	SYS(connect(a, (struct sockaddr *)&ba, ss_len(&ba)));
	SYS(shutdown(a, SHUT_RD));
	/* A blocking receive after SHUT_RD returns at once, with 0. */
	EXPECT_EQ(SYS(recv(a, buf, sizeof(buf), 0)), 0);
	EXPECT_ERR(shutdown(a, 7), EINVAL);
	close(a);
	close(b);
}

void t_dgram_sockopts(void)
{
	int fd = ut_dgram(AF_INET), six = ut_dgram(AF_INET6);

	setint(fd, IPPROTO_IP, IP_TTL, 7);
	EXPECT_EQ(getint(fd, IPPROTO_IP, IP_TTL), 7);
	setint(six, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 9);
	EXPECT_EQ(getint(six, IPPROTO_IPV6, IPV6_UNICAST_HOPS), 9);
	setint(fd, SOL_SOCKET, SO_RCVBUF, 10000);
	/* The kernel doubles it, as for every socket. */
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_RCVBUF), 20000);
	setint(fd, SOL_SOCKET, SO_BROADCAST, 1);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_BROADCAST), 1);
	setint(fd, IPPROTO_UDP, UDP_CORK, 1);
	EXPECT_EQ(getint(fd, IPPROTO_UDP, UDP_CORK), 1);
	close(fd);
	close(six);
}

void t_dgram_broadcast_eacces(void)
{
	struct sockaddr_in bc = { .sin_family = AF_INET, .sin_port = htons(9) };
	int fd = ut_dgram(AF_INET);

	/* The broadcast address of lo's 127.0.0.0/8 (the guests have no other interface). */
	bc.sin_addr.s_addr = htonl(0x7fffffff);
	EXPECT_ERR(sendto(fd, "b", 1, 0, (struct sockaddr *)&bc, sizeof(bc)), EACCES);
	close(fd);
}

void t_dgram_bad_input(void)
{
	struct sockaddr_storage aa, ba;
	void *bad = unmapped_page();
	char buf[8];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	EXPECT_ERR(sendto(a, "x", 1, 0, (struct sockaddr *)&ba, 3), EINVAL);
	EXPECT_ERR(sendto(a, bad, 16, 0, (struct sockaddr *)&ba, ss_len(&ba)), EFAULT);
	EXPECT_ERR(sendto(a, "x", 1, 0, bad, ss_len(&ba)), EFAULT);
	EXPECT_ERR(bind(a, (struct sockaddr *)&ba, 8), EINVAL);
	send_to(a, "payload", 7, &ba);
	wait_for(b, POLLIN);
	EXPECT_ERR(recv(b, bad, 16, 0), EFAULT);
	EXPECT_ERR(setsockopt(a, SOL_SOCKET, SO_RCVBUF, bad, sizeof(int)), EFAULT);
	EXPECT_ERR(getsockopt(a, IPPROTO_IP, IP_TTL, buf, bad), EFAULT);
	close(a);
	close(b);
}

void t_dgram_fork(void)
{
	struct sockaddr_storage aa, ba;
	char buf[16];
	int a, b, st;
	pid_t pid;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", ename(errno));
	if (pid == 0) {
		_exit(sendto(a, "child", 5, 0, (struct sockaddr *)&ba, ss_len(&ba)) == 5 ? 0 : 1);
	}
	SYS(waitpid(pid, &st, 0));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's send failed");
	EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 5);
	close(a);
	close(b);
}

void t_dgram_plain_peer(void)
{
	struct sockaddr_storage ua, pa, from;
	char buf[32];
	int ut = ut_dgram(AF_INET), plain = udp_plain(AF_INET);

	bind_any_port(ut, AF_INET, &ua);
	bind_any_port(plain, AF_INET, &pa);
	/* A socket under test and a plain UDP socket talk both ways. */
	send_to(ut, "to plain", 8, &pa);
	EXPECT_EQ(recv_one(plain, buf, sizeof(buf), 0, &from), 8);
	EXPECT_EQ(ss_port(&from), ss_port(&ua));
	send_to(plain, "to ut", 5, &ua);
	EXPECT_EQ(recv_one(ut, buf, sizeof(buf), 0, &from), 5);
	EXPECT_EQ(ss_port(&from), ss_port(&pa));
	close(ut);
	close(plain);
}

void t_dgram_many(void)
{
	enum { N = 100 };
	struct sockaddr_storage sa, ca[N], from;
	int srv = ut_dgram(AF_INET), c[N], i, k;
	char buf[64];

	bind_any_port(srv, AF_INET, &sa);
	for (i = 0; i < N; i++) {
		c[i] = ut_dgram(AF_INET);
		bind_any_port(c[i], AF_INET, &ca[i]);
		snprintf(buf, sizeof(buf), "client %d", i);
		send_to(c[i], buf, strlen(buf), &sa);
	}
	/* The server answers each datagram to its source with its number doubled. */
	for (k = 0; k < N; k++) {
		ssize_t n = recv_one(srv, buf, sizeof(buf) - 1, 0, &from);

		buf[n] = 0;
		CHECK(sscanf(buf, "client %d", &i) == 1 && i >= 0 && i < N, "bad request %s", buf);
		EXPECT_EQ(ss_port(&from), ss_port(&ca[i]));
		snprintf(buf, sizeof(buf), "%d", 2 * i);
		send_to(srv, buf, strlen(buf), &from);
	}
	for (i = 0; i < N; i++) {
		ssize_t n = recv_one(c[i], buf, sizeof(buf) - 1, 0, NULL);

		buf[n] = 0;
		EXPECT_EQ(atoi(buf), 2 * i);
		close(c[i]);
	}
	close(srv);
}

void t_dgram_peek_off(void)
{
	struct sockaddr_storage aa, ba;
	char out[32], in[32];
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	setint(b, SOL_SOCKET, SO_PEEK_OFF, 0);
	EXPECT_EQ(getint(b, SOL_SOCKET, SO_PEEK_OFF), 0);
	fill_pattern(out, sizeof(out), 11);
	send_to(a, out, 20, &ba);
	/* With SO_PEEK_OFF, successive peeks walk through the datagram. */
	EXPECT_EQ(recv_one(b, in, 8, MSG_PEEK, NULL), 8);
	CHECK(!memcmp(in, out, 8), "first peek differs");
	EXPECT_EQ(recv_one(b, in, 8, MSG_PEEK, NULL), 8);
	CHECK(!memcmp(in, out + 8, 8), "second peek differs");
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), 20);
	close(a);
	close(b);
}

/*
 * The fabric path (implicit SCI connections). Over UDP these cases check what any
 * datagram socket must do; when the SCI path is expected (--family sci or the preload,
 * --expect-mode sci), they first wait until the destination's implicit connection is up
 * and then assert that the datagrams took it.
 */

bool sci_path_expected(void)
{
	return g_expect_sci && g_expect_mode == SCI_MODE_SCI;
}

/* How many lines of fd's fdinfo start with `prefix`. */
static int fdinfo_lines(int fd, const char *prefix)
{
	char line[256];
	int n = 0;
	FILE *f = open_fdinfo(fd);

	while (fgets(line, sizeof(line), f))
		n += !strncmp(line, prefix, strlen(prefix));
	fclose(f);
	return n;
}

void await_fabric(int a, int b, const struct sockaddr_storage *aa)
{
	double end = now() + 20;
	char buf[16];
	int sent = 0;

	do {
		send_to(b, "ping", 4, aa);
		EXPECT_EQ(recv_one(a, buf, sizeof(buf), 0, NULL), 4);
		sent++;
		if (!sci_path_expected())
			return;
		if (sci_mode_of(a) == SCI_MODE_SCI && sci_mode_of(b) == SCI_MODE_SCI)
			return;
	} while (now() < end);
	FAIL("no implicit SCI connection after %d datagrams in 20 s (modes %d, %d)", sent,
	     sci_mode_of(a), sci_mode_of(b));
}

/*
 * Sends datagrams from a to b (each received before the next) until one went over SCI
 * (a's count of datagrams sent over SCI grew), when the SCI path is expected: a's own
 * implicit connection to b is up then, where await_fabric(b, a, ...) would stop at once
 * if a already had one from b. At most 20 s; otherwise one datagram.
 */
static void await_sent_over_sci(int a, int b, const struct sockaddr_storage *ba)
{
	double end = now() + 20;
	long sent0 = fdinfo_field(a, "sci-datagrams", "sent");
	char buf[16];
	int n = 0;

	do {
		send_to(a, "ping", 4, ba);
		EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, NULL), 4);
		n++;
		if (!sci_path_expected() || fdinfo_field(a, "sci-datagrams", "sent") > sent0)
			return;
	} while (now() < end);
	FAIL("none of %d datagrams went over SCI in 20 s", n);
}

struct sci_counts sci_counts_of(int b, int a)
{
	struct sci_counts c = { 0, 0 };

	if (sci_path_expected()) {
		c.sent = fdinfo_field(b, "sci-datagrams", "sent");
		c.received = fdinfo_field(a, "sci-datagrams", "received");
	}
	return c;
}

void check_over_sci(int b, int a, struct sci_counts before, long n)
{
	struct sci_counts now = sci_counts_of(b, a);

	if (sci_path_expected())
		CHECK(now.sent - before.sent == n && now.received - before.received == n,
		      "over SCI: %ld sent, %ld received, of %ld", now.sent - before.sent,
		      now.received - before.received, n);
}

size_t nth_len(unsigned i)
{
	return 1 + (i * 97) % 700;
}

void t_dgram_fabric_path(void)
{
	enum { N = 64 };
	struct sockaddr_storage aa, ba, from;
	char out[1024], in[1024];
	struct sci_counts before;
	unsigned i;
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	before = sci_counts_of(b, a);
	/* A burst, then every datagram whole, in order, from b. */
	for (i = 0; i < N; i++) {
		fill_pattern(out, nth_len(i), i);
		send_to(b, out, nth_len(i), &aa);
	}
	for (i = 0; i < N; i++) {
		fill_pattern(out, nth_len(i), i);
		EXPECT_EQ(recv_one(a, in, sizeof(in), 0, &from), nth_len(i));
		CHECK(!memcmp(in, out, nth_len(i)), "datagram %u differs", i);
		CHECK(ss_port(&from) == ss_port(&ba), "datagram %u from %s, expected %s", i,
		      ss_str(&from), ss_str(&ba));
	}
	check_over_sci(b, a, before, N);
	/* And back: a's answers to b take their own implicit connection. */
	await_fabric(b, a, &ba);
	for (i = 0; i < N; i++) {
		fill_pattern(out, nth_len(i), 1000 + i);
		send_to(a, out, nth_len(i), &ba);
		EXPECT_EQ(recv_one(b, in, sizeof(in), 0, &from), nth_len(i));
		CHECK(!memcmp(in, out, nth_len(i)), "answer %u differs", i);
		CHECK(ss_port(&from) == ss_port(&aa), "answer %u from %s", i, ss_str(&from));
	}
	close(a);
	close(b);
}

void t_dgram_fabric_unread(void)
{
	enum { N = 2000, LEN = 1000 };
	struct sockaddr_storage aa, ba;
	char buf[LEN];
	unsigned i, ok = 0, got = 0;
	long last = -1;
	int a, b;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	/* A receiver that does not read: the sender never waits; what finds no room drops. */
	for (i = 0; i < N; i++) {
		ssize_t n;

		memset(buf, 0, sizeof(buf));
		memcpy(buf, &i, sizeof(i));
		n = sendto(b, buf, LEN, MSG_DONTWAIT, (struct sockaddr *)&aa, ss_len(&aa));
		if (n == LEN)
			ok++;
		else if (sci_path_expected() || (errno != EAGAIN && errno != ENOBUFS))
			FAIL("send %u: %zd (%s)", i, n, n < 0 ? ename(errno) : "short");
	}
	if (sci_path_expected()) {
		CHECK(ok == N, "%u of %d sends took", ok, N);
		CHECK(fdinfo_field(b, "sci-datagrams", "dropped") > 0,
		      "a full ring dropped nothing (counted: %ld)",
		      fdinfo_field(b, "sci-datagrams", "dropped"));
	}
	/* What waits is whole datagrams, in the order sent. */
	while (recv(a, buf, sizeof(buf), MSG_DONTWAIT) == LEN) {
		unsigned seq;

		memcpy(&seq, buf, sizeof(seq));
		CHECK((long)seq > last && seq < N, "datagram %u after %ld", seq, last);
		last = seq;
		got++;
	}
	CHECK(got > 0 && got < N, "%u of %d datagrams waited for a reader that did not read",
	      got, N);
	/* Read, the receiver has room again. */
	send_to(b, "again", 5, &aa);
	EXPECT_EQ(recv_one(a, buf, sizeof(buf), 0, NULL), 5);
	close(a);
	close(b);
}

void t_dgram_fabric_rebind(void)
{
	struct sockaddr_storage aa, ba, from;
	char buf[64];
	int a, b, i;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	/* The receiver goes; a new socket takes its port: b's datagrams reach the new one. */
	close(a);
	a = ut_dgram(AF_INET);
	SYS(bind(a, (struct sockaddr *)&aa, ss_len(&aa)));
	for (i = 0; i < 20; i++) {
		snprintf(buf, sizeof(buf), "after %d", i);
		send_to(b, buf, strlen(buf), &aa);
		EXPECT_EQ(recv_one(a, buf, sizeof(buf), 0, &from), strlen(buf));
		CHECK(ss_port(&from) == ss_port(&ba), "from %s", ss_str(&from));
	}
	await_fabric(a, b, &aa);
	close(a);
	close(b);
}

void t_dgram_fabric_blocking(void)
{
	enum { N = 300 };
	struct sockaddr_storage aa, ba, from;
	struct timeval tv = { 10, 0 };
	char buf[64];
	pid_t pid;
	int a, b, i, status;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	/*
	 * An echo server that only ever blocks in recvfrom (no poll): a datagram that comes
	 * over an implicit connection set up while it sleeps there must wake it.
	 */
	pid = SYS(fork());
	if (pid == 0) {
		for (i = 0; i < N; i++) {
			socklen_t alen = sizeof(from);
			ssize_t n = recvfrom(a, buf, sizeof(buf), 0, (struct sockaddr *)&from, &alen);

			if (n <= 0 || sendto(a, buf, n, 0, (struct sockaddr *)&from, alen) != n)
				_exit(1);
		}
		_exit(0);
	}
	close(a);
	SYS(setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	for (i = 0; i < N; i++) {
		ssize_t n;

		snprintf(buf, sizeof(buf), "round %d", i);
		send_to(b, buf, strlen(buf), &aa);
		n = recvfrom(b, buf, sizeof(buf) - 1, 0, NULL, NULL);
		if (n < 0)
			FAIL("round %d: no echo in 10 s: %s", i, ename(errno));
		buf[n] = 0;
		CHECK(atoi(buf + 6) == i, "round %d echoed %s", i, buf);
	}
	SYS(waitpid(pid, &status, 0));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "echo server status %d", status);
	if (sci_path_expected())
		CHECK(fdinfo_field(b, "sci-datagrams", "sent") > 0,
		      "no round went over SCI (sci-datagrams sent %ld)",
		      fdinfo_field(b, "sci-datagrams", "sent"));
	close(b);
}

/*
 * An edge-triggered epoll sees one edge per datagram, whichever path it took, and none
 * when an implicit connection is set up while a datagram waits unread: a wake then is an
 * edge UDP never reports (the CI run of 4b144f1 caught one by chance). The rounds after
 * that send, wait for the edge, check there is no second one and read, until five
 * datagrams went over SCI; every datagram comes in the order sent.
 */
void t_dgram_fabric_epoll_edge(void)
{
	struct sockaddr_storage aa, ba;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET }, got[4];
	double end = now() + 20;
	char buf[16];
	int a, b, ep = (int)SYS(epoll_create1(0)), i;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	ev.data.fd = b;
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev));
	for (i = 0;; i++) {
		ssize_t n;

		snprintf(buf, sizeof(buf), "%d", i);
		send_to(a, buf, strlen(buf), &ba);
		EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 10000)), 1);
		if (i == 0 && sci_path_expected()) {
			/* b takes its end of the implicit connection in the background. */
			while (sci_mode_of(b) != SCI_MODE_SCI && now() < end)
				sched_yield();
			CHECK(sci_mode_of(b) == SCI_MODE_SCI, "no implicit connection in 20 s");
		}
		EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
		n = recv_one(b, buf, sizeof(buf) - 1, MSG_DONTWAIT, NULL);
		buf[n > 0 ? n : 0] = 0;
		CHECK(n > 0 && atoi(buf) == i, "datagram %d: %s", i, buf);
		EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
		if (!sci_path_expected() || fdinfo_field(a, "sci-datagrams", "sent") >= 5)
			break;
		CHECK(now() < end, "%ld of %d datagrams over SCI in 20 s",
		      fdinfo_field(a, "sci-datagrams", "sent"), i + 1);
	}
	close(ep);
	close(a);
	close(b);
}

/*
 * An implicit connection that ends gives an edge-triggered epoll no edge: nothing new
 * arrived (UDP reports none when a sender closes). a takes datagrams over SCI from b and
 * from c; one of c's waits unread, its edge reported; then b closes, which ends b's
 * connection to a (a doorbell on a's end). Once a let that end go, there must still be no
 * second edge, and c's datagram must be there.
 */
void t_dgram_fabric_epoll_end(void)
{
	struct sockaddr_storage aa, ba, ca;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET }, got[4];
	double end;
	long in;
	char buf[16];
	int a, b, c, ep = (int)SYS(epoll_create1(0));

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	c = ut_dgram(AF_INET);
	bind_any_port(c, AF_INET, &ca);
	await_fabric(a, b, &aa);
	await_fabric(a, c, &aa);
	in = fdinfo_field(a, "sci-implicit", "in");
	if (sci_path_expected()) {
		CHECK(in == 2, "a has %ld implicit connections in, expected 2 (from b and c)", in);
		/* fdinfo names each connection's ends. */
		EXPECT_EQ(fdinfo_lines(a, "sci-implicit-conn:\tin node "), 2);
		EXPECT_EQ(fdinfo_lines(b, "sci-implicit-conn:\tout node "), 1);
		EXPECT_EQ(fdinfo_lines(b, "sci-implicit-conn:\tin "), 0);
	}
	ev.data.fd = a;
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev));
	EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
	send_to(c, "unread", 6, &aa);
	EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 10000)), 1);
	EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
	close(b);
	if (sci_path_expected()) {
		/* a's listener lets b's end go once it is over (its sweep). */
		for (end = now() + 20; now() < end; msleep(20))
			if (fdinfo_field(a, "sci-implicit", "in") < in)
				break;
		CHECK(fdinfo_field(a, "sci-implicit", "in") == in - 1,
		      "b's implicit connection to a not ended 20 s after b closed (in %ld)",
		      fdinfo_field(a, "sci-implicit", "in"));
	}
	EXPECT_EQ(SYS(epoll_wait(ep, got, 4, 0)), 0);
	EXPECT_EQ(recv_one(a, buf, sizeof(buf), MSG_DONTWAIT, NULL), 6);
	CHECK(!memcmp(buf, "unread", 6), "c's datagram differs");
	close(ep);
	close(a);
	close(c);
}

/*
 * A receiver that asks for control messages once its implicit connection is up
 * (SO_TIMESTAMP here) gets them with every datagram from then on: datagrams over SCI carry
 * none but the packet information, so its connections end at the setsockopt and its
 * peer's datagrams go on over UDP.
 */
void t_dgram_fabric_cmsg_later(void)
{
	struct sockaddr_storage aa, ba;
	char cbuf[256], buf[16];
	struct msghdr mh;
	int a, b, i;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	setint(a, SOL_SOCKET, SO_TIMESTAMP, 1);
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a, "sci-implicit", "in"), 0);
	for (i = 0; i < 20; i++) {
		snprintf(buf, sizeof(buf), "%d", i);
		send_to(b, buf, strlen(buf), &aa);
		EXPECT_EQ(recv_cmsg(a, &mh, cbuf, sizeof(cbuf)), (ssize_t)strlen(buf));
		CHECK(find_cmsg(&mh, SOL_SOCKET, SCM_TIMESTAMP),
		      "datagram %d after SO_TIMESTAMP came with no SCM_TIMESTAMP", i);
	}
	close(a);
	close(b);
}

/* Packet information of either family, as a receiver gets it and a sender gives it. */
union pktinfo {
	struct in_pktinfo v4;
	struct in6_pktinfo v6;
};

static const char *pktinfo_str(int af, const union pktinfo *pi)
{
	static char s[160];
	char a[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];

	if (af == AF_INET) {
		inet_ntop(AF_INET, &pi->v4.ipi_addr, a, sizeof(a));
		inet_ntop(AF_INET, &pi->v4.ipi_spec_dst, d, sizeof(d));
		snprintf(s, sizeof(s), "addr %s spec_dst %s ifindex %d", a, d, pi->v4.ipi_ifindex);
	} else {
		inet_ntop(AF_INET6, &pi->v6.ipi6_addr, a, sizeof(a));
		snprintf(s, sizeof(s), "addr %s ifindex %d", a, pi->v6.ipi6_ifindex);
	}
	return s;
}

/* Receives one datagram on fd with its packet information (the test fails without). */
static ssize_t recv_pktinfo(int fd, int af, union pktinfo *pi)
{
	char cbuf[256];
	struct msghdr mh;
	struct cmsghdr *c;
	ssize_t n = recv_cmsg(fd, &mh, cbuf, sizeof(cbuf));

	c = find_cmsg(&mh, af == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		      af == AF_INET ? IP_PKTINFO : IPV6_PKTINFO);
	CHECK(c, "a datagram came with no packet information");
	memset(pi, 0, sizeof(*pi));
	memcpy(pi, CMSG_DATA(c), af == AF_INET ? sizeof(pi->v4) : sizeof(pi->v6));
	return n;
}

/*
 * Sends len bytes of buf from fd to `to` with one control message (level, type) of dlen
 * bytes of data (at most an in6_pktinfo's); returns what sendmsg returned (-1 with errno
 * set).
 */
static ssize_t send_cmsg(int fd, const void *buf, size_t len, const struct sockaddr_storage *to,
			 int level, int type, const void *data, size_t dlen)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = {
		.msg_name = (void *)to, .msg_namelen = ss_len(to), .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = CMSG_SPACE(dlen),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	CHECK(CMSG_SPACE(dlen) <= sizeof(ctl), "a control message of %zu bytes", dlen);
	memset(&ctl, 0, sizeof(ctl));
	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(dlen);
	memcpy(CMSG_DATA(c), data, dlen);
	return sendmsg(fd, &mh, 0);
}

/* Asks fd (of family af) for the packet information of what it receives. */
static void ask_pktinfo(int fd, int af)
{
	if (af == AF_INET)
		setint(fd, IPPROTO_IP, IP_PKTINFO, 1);
	else
		setint(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
}

/* Sends buf from fd to `to` with the packet information pi (IP_PKTINFO, IPV6_PKTINFO). */
static void send_pktinfo(int fd, int af, const void *buf, size_t len,
			 const struct sockaddr_storage *to, const union pktinfo *pi)
{
	ssize_t n = af == AF_INET
		? send_cmsg(fd, buf, len, to, IPPROTO_IP, IP_PKTINFO, pi, sizeof(pi->v4))
		: send_cmsg(fd, buf, len, to, IPPROTO_IPV6, IPV6_PKTINFO, pi, sizeof(pi->v6));

	if (n < 0)
		FAIL("sendmsg with %s: %s", pktinfo_str(af, pi), ename(errno));
	EXPECT_EQ(n, len);
}

/*
 * The packet information over the fabric, as a DNS server uses it. A receiver that asks
 * for it (IP_PKTINFO, IPV6_RECVPKTINFO) before its implicit connection is up keeps the
 * connection, and every datagram over SCI comes with what UDP gave with the first one,
 * which went over UDP (the address it was sent to, the interface, the address a reply
 * goes from). Its replies that name that address (and for IPv6 that interface) with
 * IP_PKTINFO/IPV6_PKTINFO take their own implicit connection; one that names another
 * address of the machine (127.0.0.2) goes over UDP, from that address, as UDP sends it.
 */
static void fabric_pktinfo(int af)
{
	enum { N = 20 };
	struct sockaddr_storage aa, ba, from;
	union pktinfo ref, pi, reply;
	char buf[64];
	long got0 = 0, sent0 = 0;
	int a, b, i;

	dgram_pair(af, &a, &aa, &b, &ba);
	ask_pktinfo(a, af);
	send_to(b, "first", 5, &aa);
	EXPECT_EQ(recv_pktinfo(a, af, &ref), 5);
	note("UDP's packet information: %s", pktinfo_str(af, &ref));
	await_fabric(a, b, &aa);
	if (sci_path_expected())
		got0 = fdinfo_field(a, "sci-datagrams", "received");
	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "datagram %d", i);
		send_to(b, buf, strlen(buf), &aa);
		EXPECT_EQ(recv_pktinfo(a, af, &pi), (ssize_t)strlen(buf));
		CHECK(!memcmp(&pi, &ref, sizeof(pi)), "datagram %d: %s, where UDP said %s", i,
		      pktinfo_str(af, &pi), pktinfo_str(af, &ref));
	}
	if (sci_path_expected()) {
		long got = fdinfo_field(a, "sci-datagrams", "received") - got0;

		CHECK(got == N, "%ld of %d datagrams with packet information came over SCI", got, N);
	}

	/* Replies as a DNS server sends them: from the address the datagram came to. */
	memset(&reply, 0, sizeof(reply));
	if (af == AF_INET) {
		reply.v4.ipi_spec_dst = ref.v4.ipi_spec_dst;
	} else {
		reply.v6.ipi6_addr = ref.v6.ipi6_addr;
		reply.v6.ipi6_ifindex = ref.v6.ipi6_ifindex;
	}
	await_sent_over_sci(a, b, &ba);
	if (sci_path_expected())
		sent0 = fdinfo_field(a, "sci-datagrams", "sent");
	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "reply %d", i);
		send_pktinfo(a, af, buf, strlen(buf), &ba, &reply);
		EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, &from), (ssize_t)strlen(buf));
		CHECK(ss_port(&from) == ss_port(&aa) && !strcmp(ss_str(&from), ss_str(&aa)),
		      "reply %d from %s, expected %s", i, ss_str(&from), ss_str(&aa));
	}
	if (sci_path_expected()) {
		long sent = fdinfo_field(a, "sci-datagrams", "sent") - sent0;

		CHECK(sent == N, "%ld of %d replies with IP_PKTINFO went over SCI", sent, N);
	}
	if (af == AF_INET) {
		struct sockaddr_in *f = (struct sockaddr_in *)&from;

		sent0 = fdinfo_field(a, "sci-datagrams", "sent");
		reply.v4.ipi_spec_dst.s_addr = htonl(0x7f000002);
		send_pktinfo(a, af, "elsewhere", 9, &ba, &reply);
		EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, &from), 9);
		CHECK(ntohl(f->sin_addr.s_addr) == 0x7f000002 && ss_port(&from) == ss_port(&aa),
		      "a reply from 127.0.0.2 came from %s", ss_str(&from));
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent"), sent0);
	}
	close(a);
	close(b);
}

void t_dgram_fabric_pktinfo_v4(void) { fabric_pktinfo(AF_INET); }
void t_dgram_fabric_pktinfo_v6(void) { fabric_pktinfo(AF_INET6); }

/*
 * IPv4 datagrams to a dual-stack IPv6 socket that asks for both IPV6_RECVPKTINFO and
 * IP_PKTINFO: UDP gives both (IPV6_PKTINFO with the IPv4-mapped address, then
 * IP_PKTINFO); over SCI every datagram's control messages are, byte for byte, what UDP
 * gave with the first, which went over UDP.
 */
void t_dgram_fabric_pktinfo_mapped(void)
{
	enum { N = 20 };
	struct sockaddr_storage ss, to;
	struct sockaddr_in6 *any = (struct sockaddr_in6 *)&ss;
	char ref[256], cbuf[256], buf[64];
	size_t reflen;
	struct msghdr mh;
	long got0 = 0;
	int six = ut_dgram(AF_INET6), four = ut_dgram(AF_INET), i;

	memset(&ss, 0, sizeof(ss));
	any->sin6_family = AF_INET6;
	any->sin6_addr = in6addr_any;
	setint(six, IPPROTO_IPV6, IPV6_V6ONLY, 0);
	setint(six, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
	setint(six, IPPROTO_IP, IP_PKTINFO, 1);
	SYS(bind(six, (struct sockaddr *)&ss, sizeof(*any)));
	mkaddr(AF_INET, local_port(six), &to);
	send_to(four, "first", 5, &to);
	/* (Zeroed: the kernel leaves a message's alignment padding as it finds it.) */
	memset(ref, 0, sizeof(ref));
	EXPECT_EQ(recv_cmsg(six, &mh, ref, sizeof(ref)), 5);
	reflen = mh.msg_controllen;
	CHECK(find_cmsg(&mh, IPPROTO_IPV6, IPV6_PKTINFO) && find_cmsg(&mh, IPPROTO_IP, IP_PKTINFO),
	      "UDP did not give both IPV6_PKTINFO and IP_PKTINFO (%zu bytes of control)", reflen);
	await_fabric(six, four, &to);
	if (sci_path_expected())
		got0 = fdinfo_field(six, "sci-datagrams", "received");
	for (i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "datagram %d", i);
		send_to(four, buf, strlen(buf), &to);
		memset(cbuf, 0, sizeof(cbuf));
		EXPECT_EQ(recv_cmsg(six, &mh, cbuf, sizeof(cbuf)), (ssize_t)strlen(buf));
		CHECK(mh.msg_controllen == reflen && !memcmp(cbuf, ref, reflen),
		      "datagram %d: %zu bytes of control messages that differ from UDP's %zu", i,
		      (size_t)mh.msg_controllen, reflen);
	}
	if (sci_path_expected()) {
		long got = fdinfo_field(six, "sci-datagrams", "received") - got0;

		CHECK(got == N, "%ld of %d datagrams came over SCI", got, N);
	}
	close(six);
	close(four);
}

/* Reads (and with `set`, first writes) the module parameter dgram_idle_ms; -1 if absent. */
static long idle_param(long set)
{
	const char *path = "/sys/module/af_sci/parameters/dgram_idle_ms";
	long v = -1;
	FILE *f;

	if (set >= 0) {
		f = fopen(path, "w");
		if (!f)
			return -1;
		fprintf(f, "%ld\n", set);
		if (fclose(f))
			return -1;
	}
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Waits (at most 10 s) until neither end holds an implicit connection; true if so. */
static bool await_idle_end(int a, int b)
{
	double end = now() + 10;

	while (now() < end) {
		if (fdinfo_field(b, "sci-implicit", "out") == 0 &&
		    fdinfo_field(a, "sci-implicit", "in") == 0)
			return true;
		msleep(20);
	}
	return false;
}

void t_sci_dgram_idle(void)
{
	struct sockaddr_storage aa, ba;
	long old = idle_param(-1);
	bool ended;
	int a, b;

	if (old < 0 || idle_param(300) != 300)
		SKIP("cannot set af_sci's dgram_idle_ms (not root?)");
	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	/* Idle for the parameter's time: the sender ends it, the receiver lets it go. */
	ended = await_idle_end(a, b);
	idle_param(old);
	CHECK(ended, "an implicit connection idle 10 s with dgram_idle_ms 300 is still open "
	      "(out %ld, in %ld)", fdinfo_field(b, "sci-implicit", "out"),
	      fdinfo_field(a, "sci-implicit", "in"));
	if (sci_path_expected())
		EXPECT_EQ(sci_mode_of(b), SCI_MODE_NATIVE);
	/* The next datagram goes over UDP and sets one up again. */
	await_fabric(a, b, &aa);
	close(a);
	close(b);
}

void t_sci_dgram_opt_out(void)
{
	struct sockaddr_storage aa, ba;
	struct sci_info info;
	socklen_t len = sizeof(info);
	char buf[16];
	int a, b, i, v = 2;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	EXPECT_ERR(setsockopt(b, SOL_SCI, SCI_FABRIC, &v, sizeof(v)), EINVAL);
	EXPECT_EQ(getint(b, SOL_SCI, SCI_FABRIC), 1);
	/* SCI_FABRIC 0: its datagrams stay UDP, however many go. */
	setint(b, SOL_SCI, SCI_FABRIC, 0);
	EXPECT_EQ(getint(b, SOL_SCI, SCI_FABRIC), 0);
	for (i = 0; i < 200; i++) {
		send_to(b, "x", 1, &aa);
		EXPECT_EQ(recv_one(a, buf, sizeof(buf), 0, NULL), 1);
	}
	EXPECT_EQ(fdinfo_field(b, "sci-datagrams", "sent"), 0);
	SYS(getsockopt(b, SOL_SCI, SCI_INFO, &info, &len));
	CHECK(info.mode == SCI_MODE_NATIVE && info.fallback_reason == SCI_FALLBACK_OPTED_OUT,
	      "SCI_INFO mode %u reason %u after SCI_FABRIC 0", info.mode, info.fallback_reason);
	/* Back to 1: the fabric again. */
	setint(b, SOL_SCI, SCI_FABRIC, 1);
	await_fabric(a, b, &aa);
	close(a);
	close(b);
}

/*
 * SO_RCVBUF and SO_RXQ_OVFL on the SCI path, both set once the implicit connection is
 * up (the connection stays: a datagram over SCI carries the drop count): a burst that
 * does not fit in the receive buffer is dropped at the sender, none of the datagrams
 * that wait reports a drop (they came before the drops), and the next one reports every
 * drop, as t_dgram_rcvbuf_drops checks over UDP.
 */
void t_dgram_fabric_rcvbuf_drops(void)
{
	enum { N = 64, SIZE = 1000 };
	struct sockaddr_storage aa, ba;
	char cbuf[256], buf[SIZE];
	struct msghdr mh;
	long sent0 = 0, dropped0 = 0;
	int a, b, i, got = 0, rcvbuf;
	socklen_t len = sizeof(rcvbuf);

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(b, a, &ba);
	setint(b, SOL_SOCKET, SO_RCVBUF, 4096);
	setint(b, SOL_SOCKET, SO_RXQ_OVFL, 1);
	CHECK(!getsockopt(b, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len), "SO_RCVBUF: %s",
	      ename(errno));
	if (sci_path_expected()) {
		EXPECT_EQ(sci_mode_of(b), SCI_MODE_SCI);
		sent0 = fdinfo_field(a, "sci-datagrams", "sent");
		dropped0 = fdinfo_field(a, "sci-datagrams", "dropped");
	}
	memset(buf, 'r', sizeof(buf));
	for (i = 0; i < N; i++)
		send_to(a, buf, SIZE, &ba);
	for (;;) {
		ssize_t n;

		memset(cbuf, 0, sizeof(cbuf));
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &(struct iovec){ buf, sizeof(buf) };
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		n = recvmsg(b, &mh, MSG_DONTWAIT);
		if (n < 0)
			break;
		EXPECT_EQ(n, SIZE);
		CHECK(!find_cmsg(&mh, SOL_SOCKET, SO_RXQ_OVFL),
		      "datagram %d, queued before any drop, reports drops", got);
		got++;
	}
	CHECK(errno == EAGAIN, "recv: %s", ename(errno));
	/* UDP takes a datagram while what waits is within the buffer: */
	CHECK(got > 0 && got <= rcvbuf / SIZE + 1,
	      "received %d of %d datagrams through a %d-byte buffer", got, N, rcvbuf);
	if (sci_path_expected()) {
		long sent = fdinfo_field(a, "sci-datagrams", "sent") - sent0;
		long dropped = fdinfo_field(a, "sci-datagrams", "dropped") - dropped0;

		CHECK(sent == got && dropped == N - got,
		      "over SCI: %ld sent, %ld dropped, %d received of %d", sent, dropped, got, N);
	}
	next_reports_drops(a, b, &ba, N - got);
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent") - sent0, got + 1);
	close(a);
	close(b);
}

/*
 * A receiver with implicit connections from two peers connects to one of them: what the
 * other queued before the connect is still delivered, as UDP delivers it, and nothing it
 * sends after.
 */
void t_dgram_fabric_connect_queued(void)
{
	enum { N = 8 };
	struct sockaddr_storage a1a, a2a, ba, from;
	long sent0 = 0;
	char buf[16];
	int a1, a2, b, i, from1 = 0, from2 = 0;

	dgram_pair(AF_INET, &a1, &a1a, &b, &ba);
	a2 = ut_dgram(AF_INET);
	bind_any_port(a2, AF_INET, &a2a);
	await_sent_over_sci(a1, b, &ba);
	await_sent_over_sci(a2, b, &ba);
	if (sci_path_expected())
		sent0 = fdinfo_field(a2, "sci-datagrams", "sent");
	for (i = 0; i < N; i++) {
		send_to(a1, "1", 1, &ba);
		send_to(a2, "2", 1, &ba);
	}
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a2, "sci-datagrams", "sent") - sent0, N);
	SYS(connect(b, (struct sockaddr *)&a1a, ss_len(&a1a)));
	for (i = 0; i < 2 * N; i++) {
		EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, &from), 1);
		if (ss_port(&from) == ss_port(&a1a) && buf[0] == '1')
			from1++;
		else if (ss_port(&from) == ss_port(&a2a) && buf[0] == '2')
			from2++;
		else
			FAIL("datagram '%c' from %s", buf[0], ss_str(&from));
	}
	CHECK(from1 == N && from2 == N,
	      "connected to the first peer: %d of its %d datagrams, %d of the other's %d", from1,
	      N, from2, N);
	/* After the connect only the peer's. */
	send_to(a2, "x", 1, &ba);
	send_to(a1, "y", 1, &ba);
	EXPECT_EQ(recv_one(b, buf, sizeof(buf), 0, &from), 1);
	CHECK(buf[0] == 'y' && ss_port(&from) == ss_port(&a1a), "'%c' from %s after the connect",
	      buf[0], ss_str(&from));
	EXPECT_ERR(recv(b, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	close(a1);
	close(a2);
	close(b);
}

/*
 * Datagrams waiting in a ring when the reader asks for a control message a datagram over
 * SCI cannot carry (SO_TIMESTAMP): the connection ends at that setsockopt and they are
 * counted as dropped (SO_RXQ_OVFL on the next one); UDP keeps and delivers them.
 */
void t_dgram_fabric_cmsg_later_drops(void)
{
	struct sockaddr_storage aa, ba;
	char cbuf[256];
	struct msghdr mh;
	struct cmsghdr *c;
	uint32_t drops = 0;
	int a, b, i;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	await_fabric(a, b, &aa);
	setint(a, SOL_SOCKET, SO_RXQ_OVFL, 1);
	for (i = 0; i < 3; i++)
		send_to(b, "q", 1, &aa);
	wait_for(a, POLLIN);
	setint(a, SOL_SOCKET, SO_TIMESTAMP, 1);
	send_to(b, "after", 5, &aa);
	if (!sci_path_expected()) {
		for (i = 0; i < 3; i++)
			EXPECT_EQ(recv_cmsg(a, &mh, cbuf, sizeof(cbuf)), 1);
	}
	memset(cbuf, 0, sizeof(cbuf));
	EXPECT_EQ(recv_cmsg(a, &mh, cbuf, sizeof(cbuf)), 5);
	CHECK(find_cmsg(&mh, SOL_SOCKET, SCM_TIMESTAMP), "no SCM_TIMESTAMP after SO_TIMESTAMP");
	c = find_cmsg(&mh, SOL_SOCKET, SO_RXQ_OVFL);
	if (sci_path_expected()) {
		CHECK(c, "3 datagrams went with their connection, and no drop was counted");
		memcpy(&drops, CMSG_DATA(c), sizeof(drops));
		EXPECT_EQ(drops, 3);
	} else {
		CHECK(!c, "UDP dropped nothing, yet reports drops");
	}
	close(a);
	close(b);
}

/* Sends with the traffic class tos in a control message: IP_TOS (an int or, with `byte`,
 * one byte) to an IPv4 destination, IPV6_TCLASS (an int) to an IPv6 one. */
static void send_tos(int fd, const void *buf, size_t len, const struct sockaddr_storage *to,
		     int tos, bool byte)
{
	unsigned char b = (unsigned char)tos;
	ssize_t n;

	if (to->ss_family == AF_INET)
		n = byte ? send_cmsg(fd, buf, len, to, IPPROTO_IP, IP_TOS, &b, 1)
			 : send_cmsg(fd, buf, len, to, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	else
		n = send_cmsg(fd, buf, len, to, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
	if (n < 0)
		FAIL("sendmsg with traffic class %#x: %s", tos, ename(errno));
	EXPECT_EQ(n, len);
}

/* The traffic class a received datagram came with (IP_TOS, one byte; IPV6_TCLASS, an int);
 * -1 when it came with none. */
static int cmsg_tos(struct msghdr *mh, int af)
{
	struct cmsghdr *c = af == AF_INET ? find_cmsg(mh, IPPROTO_IP, IP_TOS)
					  : find_cmsg(mh, IPPROTO_IPV6, IPV6_TCLASS);
	int tclass;

	if (!c)
		return -1;
	if (af == AF_INET) {
		EXPECT_EQ(c->cmsg_len, CMSG_LEN(1));
		return *CMSG_DATA(c);
	}
	EXPECT_EQ(c->cmsg_len, CMSG_LEN(sizeof(int)));
	memcpy(&tclass, CMSG_DATA(c), sizeof(tclass));
	return tclass;
}

/* Asks fd (of family af) for the traffic class of what it receives. */
static void ask_tos(int fd, int af)
{
	if (af == AF_INET)
		setint(fd, IPPROTO_IP, IP_RECVTOS, 1);
	else
		setint(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
}

/* Sets fd's own traffic class (IP_TOS, IPV6_TCLASS). */
static void set_tos(int fd, int af, int tos)
{
	if (af == AF_INET)
		setint(fd, IPPROTO_IP, IP_TOS, tos);
	else
		setint(fd, IPPROTO_IPV6, IPV6_TCLASS, tos);
}

/*
 * A receiver that asks for the traffic class (IP_RECVTOS, IPV6_RECVTCLASS) gets with each
 * datagram the byte its sender's UDP put in the IP header: the sender's option, or its
 * message's control message (an int or, for IP_TOS, a byte), ECN bits included.
 */
static void traffic_class(int af)
{
	struct sockaddr_storage aa, ba;
	char cbuf[256];
	struct msghdr mh;
	int a, b;

	dgram_pair(af, &a, &aa, &b, &ba);
	ask_tos(b, af);
	send_to(a, "plain", 5, &ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 5);
	EXPECT_EQ(cmsg_tos(&mh, af), 0);
	set_tos(a, af, 0x02);
	send_to(a, "ect0", 4, &ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 4);
	EXPECT_EQ(cmsg_tos(&mh, af), 0x02);
	send_tos(a, "ce", 2, &ba, 0xbb, false);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 2);
	EXPECT_EQ(cmsg_tos(&mh, af), 0xbb);
	if (af == AF_INET) {
		send_tos(a, "byte", 4, &ba, 0x01, true);
		EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 4);
		EXPECT_EQ(cmsg_tos(&mh, af), 0x01);
	}
	/* A control message marks its own datagram only. */
	send_to(a, "again", 5, &ba);
	EXPECT_EQ(recv_cmsg(b, &mh, cbuf, sizeof(cbuf)), 5);
	EXPECT_EQ(cmsg_tos(&mh, af), 0x02);
	close(a);
	close(b);
}

void t_dgram_tos_v4(void) { traffic_class(AF_INET); }
void t_dgram_tclass_v6(void) { traffic_class(AF_INET6); }

/* Sends len bytes of buf from fd to `to` in segments of `segment` bytes (UDP_SEGMENT as a
 * control message); returns what sendmsg returned. */
static ssize_t send_segmented(int fd, const void *buf, size_t len,
			      const struct sockaddr_storage *to, uint16_t segment)
{
	return send_cmsg(fd, buf, len, to, SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment));
}

/* Receives the datagrams a segmented send of len bytes of `sent` made: one per segment
 * of `segment` bytes (the last one shorter), each with its slice of the bytes. */
static void recv_segments(int fd, const char *sent, size_t len, size_t segment)
{
	static char in[4096];
	size_t off;

	for (off = 0; off < len; off += segment) {
		size_t want = len - off < segment ? len - off : segment;

		EXPECT_EQ(recv_one(fd, in, sizeof(in), 0, NULL), want);
		CHECK(!memcmp(in, sent + off, want), "segment at %zu differs", off);
	}
	EXPECT_ERR(recv(fd, in, sizeof(in), MSG_DONTWAIT), EAGAIN);
}

/*
 * UDP_SEGMENT (as a control message, as QUIC stacks send, and as an option): one send,
 * one datagram per segment at the receiver; more than 128 segments is EINVAL, nothing
 * sent; a segment size of 0 is one datagram.
 */
static void segments(int af)
{
	static char out[8192];
	struct sockaddr_storage aa, ba;
	int a, b;

	dgram_pair(af, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 29);
	EXPECT_EQ(send_segmented(a, out, 5000, &ba, 1200), 5000);
	recv_segments(b, out, 5000, 1200);
	setint(a, SOL_UDP, UDP_SEGMENT, 1000);
	EXPECT_EQ(getint(a, SOL_UDP, UDP_SEGMENT), 1000);
	send_to(a, out, 2500, &ba);
	recv_segments(b, out, 2500, 1000);
	/* The message's own size rules over the option's. */
	EXPECT_EQ(send_segmented(a, out, 1000, &ba, 400), 1000);
	recv_segments(b, out, 1000, 400);
	EXPECT_EQ(send_segmented(a, out, 700, &ba, 0), 700);
	recv_segments(b, out, 700, 700);
	EXPECT_ERR(send_segmented(a, out, 129 * 10, &ba, 10), EINVAL);
	EXPECT_ERR(recv(b, out, sizeof(out), MSG_DONTWAIT), EAGAIN);
	close(a);
	close(b);
}

void t_dgram_segment_v4(void) { segments(AF_INET); }
void t_dgram_segment_v6(void) { segments(AF_INET6); }

/*
 * The traffic class over the fabric, as a QUIC stack uses it (ngtcp2 asks for IP_PKTINFO
 * and IP_RECVTOS and marks its datagrams ECT(0) with IP_TOS): a receiver that asks for it
 * keeps its implicit connections, and every datagram over SCI comes with the control
 * messages UDP gave, byte for byte, whether the mark came from the sender's option or its
 * message's control message.
 */
static void fabric_traffic_class(int af)
{
	enum { N = 20 };
	struct sockaddr_storage aa, ba;
	char ref[256], cbuf[256], buf[64];
	size_t reflen;
	struct msghdr mh;
	long got0 = 0;
	int a, b, i;

	dgram_pair(af, &a, &aa, &b, &ba);
	ask_tos(a, af);
	ask_pktinfo(a, af);
	set_tos(b, af, 0x02);
	send_to(b, "first", 5, &aa);
	/* (Zeroed: the kernel leaves a message's alignment padding as it finds it.) */
	memset(ref, 0, sizeof(ref));
	EXPECT_EQ(recv_cmsg(a, &mh, ref, sizeof(ref)), 5);
	reflen = mh.msg_controllen;
	EXPECT_EQ(cmsg_tos(&mh, af), 0x02);
	await_fabric(a, b, &aa);
	if (sci_path_expected())
		got0 = fdinfo_field(a, "sci-datagrams", "received");
	for (i = 0; i < N; i++) {
		int mark = i % 4;	/* Not-ECT, ECT(1), ECT(0), CE */

		snprintf(buf, sizeof(buf), "datagram %d", i);
		if (i % 2)
			send_tos(b, buf, strlen(buf), &aa, mark, false);
		else
			send_to(b, buf, strlen(buf), &aa);
		memset(cbuf, 0, sizeof(cbuf));
		EXPECT_EQ(recv_cmsg(a, &mh, cbuf, sizeof(cbuf)), (ssize_t)strlen(buf));
		EXPECT_EQ(mh.msg_controllen, reflen);
		EXPECT_EQ(cmsg_tos(&mh, af), i % 2 ? mark : 0x02);
		if (!(i % 2))
			CHECK(!memcmp(cbuf, ref, reflen),
			      "datagram %d: control messages that differ from UDP's", i);
	}
	if (sci_path_expected()) {
		long got = fdinfo_field(a, "sci-datagrams", "received") - got0;

		CHECK(got == N, "%ld of %d datagrams with a traffic class came over SCI", got, N);
	}
	close(a);
	close(b);
}

void t_dgram_fabric_tos_v4(void) { fabric_traffic_class(AF_INET); }
void t_dgram_fabric_tclass_v6(void) { fabric_traffic_class(AF_INET6); }

/*
 * UDP_SEGMENT over the fabric: each segment is a datagram over SCI, in order. A segment
 * whose packet would be longer than 1500 bytes (Ethernet's MTU) is left to UDP, which
 * holds it to the route's MTU (loopback's takes it).
 */
static void fabric_segments(int af)
{
	static char out[9000];
	struct sockaddr_storage aa, ba;
	long sent0 = 0;
	int a, b;

	dgram_pair(af, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 31);
	await_sent_over_sci(a, b, &ba);
	if (sci_path_expected())
		sent0 = fdinfo_field(a, "sci-datagrams", "sent");
	EXPECT_EQ(send_segmented(a, out, 5000, &ba, 1200), 5000);
	recv_segments(b, out, 5000, 1200);
	setint(a, SOL_UDP, UDP_SEGMENT, 1000);
	send_to(a, out, 3000, &ba);
	recv_segments(b, out, 3000, 1000);
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent") - sent0, 5 + 3);
	EXPECT_EQ(send_segmented(a, out, 9000, &ba, 3000), 9000);
	recv_segments(b, out, 9000, 3000);
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent") - sent0, 5 + 3);
	close(a);
	close(b);
}

void t_dgram_fabric_segment_v4(void) { fabric_segments(AF_INET); }
void t_dgram_fabric_segment_v6(void) { fabric_segments(AF_INET6); }

/* Makes fd hold its datagrams to the route's MTU (DF kept: EMSGSIZE beyond it), or not. */
static void keep_df(int fd, int af, bool on)
{
	if (af == AF_INET)
		setint(fd, IPPROTO_IP, IP_MTU_DISCOVER, on ? IP_PMTUDISC_DO : IP_PMTUDISC_DONT);
	else
		setint(fd, IPPROTO_IPV6, IPV6_DONTFRAG, on);
}

/*
 * A datagram with DF kept (IP_PMTUDISC_DO, IPV6_DONTFRAG) is held to the route's MTU:
 * loopback's 64 KiB takes 2000 bytes, as does a socket that lets UDP fragment.
 */
static void dontfrag(int af)
{
	static char out[4000], in[4000];
	struct sockaddr_storage aa, ba;
	int a, b;

	dgram_pair(af, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 37);
	keep_df(a, af, true);
	send_to(a, out, 2000, &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), 2000);
	CHECK(!memcmp(in, out, 2000), "payload differs");
	keep_df(a, af, false);
	send_to(a, out, 3000, &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), 3000);
	close(a);
	close(b);
}

void t_dgram_dontfrag_v4(void) { dontfrag(AF_INET); }
void t_dgram_dontfrag_v6(void) { dontfrag(AF_INET6); }

/*
 * DF over the fabric: a datagram with DF kept whose packet fits in 1500 bytes goes over
 * SCI; a longer one is left to UDP, which holds it to the route's MTU (loopback's takes
 * it; between machines of Ethernet's MTU UDP refuses it, EMSGSIZE, as pair-tests --sci
 * checks); without DF it goes over SCI whatever its length.
 */
static void fabric_dontfrag(int af)
{
	static char out[4000], in[4000];
	size_t fits = af == AF_INET ? 1500 - 28 : 1500 - 48;
	struct sockaddr_storage aa, ba;
	long sent0 = 0;
	int a, b;

	dgram_pair(af, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 41);
	await_sent_over_sci(a, b, &ba);
	if (sci_path_expected())
		sent0 = fdinfo_field(a, "sci-datagrams", "sent");
	keep_df(a, af, true);
	send_to(a, out, fits, &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), fits);
	send_to(a, out, fits + 1, &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), fits + 1);
	CHECK(!memcmp(in, out, fits + 1), "payload differs");
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent") - sent0, 1);
	keep_df(a, af, false);
	send_to(a, out, 3000, &ba);
	EXPECT_EQ(recv_one(b, in, sizeof(in), 0, NULL), 3000);
	if (sci_path_expected())
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent") - sent0, 2);
	close(a);
	close(b);
}

void t_dgram_fabric_dontfrag_v4(void) { fabric_dontfrag(AF_INET); }
void t_dgram_fabric_dontfrag_v6(void) { fabric_dontfrag(AF_INET6); }

/*
 * Reads from fd, which asked for UDP_GRO, until the len bytes of a send in segments of
 * `segment` bytes came: a read is one segment or, with a UDP_GRO message (UDP coalesced
 * them: on loopback it hands a segmented send over whole), several of that size. Returns
 * how many reads came coalesced.
 */
static int recv_gro(int fd, const char *sent, size_t len, size_t segment)
{
	static char in[70000];
	char cbuf[256];
	int coalesced = 0;
	size_t off = 0;

	while (off < len) {
		struct iovec iov = { in, sizeof(in) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c;
		ssize_t n;
		int size;

		wait_for(fd, POLLIN);
		n = recvmsg(fd, &mh, 0);
		if (n < 0)
			FAIL("recvmsg: %s", ename(errno));
		c = find_cmsg(&mh, SOL_UDP, UDP_GRO);
		if (c) {
			memcpy(&size, CMSG_DATA(c), sizeof(size));
			EXPECT_EQ(size, segment);
			coalesced++;
		} else {
			EXPECT_EQ(n, len - off < segment ? len - off : segment);
		}
		CHECK(off + n <= len && !memcmp(in, sent + off, n), "the bytes at %zu differ", off);
		off += n;
	}
	return coalesced;
}

/*
 * A receiver that asked for UDP_GRO (as QUIC stacks do) keeps its implicit connections:
 * each datagram over SCI is read alone, with no UDP_GRO message, as UDP gives one it did
 * not coalesce; over UDP a segmented send may come whole, with the segment size.
 */
void t_dgram_fabric_gro(void)
{
	static char out[8000];
	struct sockaddr_storage aa, ba;
	long sent0 = 0;
	int a, b, coalesced;

	dgram_pair(AF_INET, &a, &aa, &b, &ba);
	fill_pattern(out, sizeof(out), 43);
	setint(b, SOL_UDP, UDP_GRO, 1);
	await_sent_over_sci(a, b, &ba);
	if (sci_path_expected())
		sent0 = fdinfo_field(a, "sci-datagrams", "sent");
	EXPECT_EQ(send_segmented(a, out, 5000, &ba, 1200), 5000);
	coalesced = recv_gro(b, out, 5000, 1200);
	send_to(a, out, 700, &ba);
	EXPECT_EQ(recv_gro(b, out, 700, 700), 0);
	if (sci_path_expected()) {
		EXPECT_EQ(fdinfo_field(a, "sci-datagrams", "sent") - sent0, 5 + 1);
		EXPECT_EQ(coalesced, 0);
	} else {
		note("UDP coalesced %d of the reads", coalesced);
	}
	close(a);
	close(b);
}
