// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: readiness (poll, epoll level/edge/RDHUP, edge after a partial
 * read, select).
 */
#include "harness.h"
#include "tests.h"

void t_poll_readiness(void)
{
	const int out = POLLOUT | POLLWRNORM, all = ALLEV;
	int c, s, rev;
	char buf[16];

	ut_pair(AF_INET, &c, &s);
	rev = poll1(s, all, 0);
	CHECK(rev == out, "idle connected: revents %s", pollnames(rev));
	rev = poll1(s, POLLIN, 0);
	CHECK(rev == 0, "idle, POLLIN only: revents %s", pollnames(rev));
	write_all(c, "0123456789", 10);
	rev = wait_for(s, POLLIN);
	CHECK(rev == POLLIN, "data, POLLIN only: revents %s", pollnames(rev));
	wait_inq(s, 10);
	rev = poll1(s, all, 0);
	CHECK(rev == (out | POLLIN | POLLRDNORM), "data: revents %s", pollnames(rev));
	read_exact(s, buf, 10);
	rev = poll1(s, all, 0);
	CHECK(rev == out, "drained: revents %s", pollnames(rev));
	SYS(shutdown(c, SHUT_WR));
	rev = wait_for(s, POLLRDHUP);
	rev = poll1(s, all, 0);
	CHECK(rev == (out | POLLIN | POLLRDNORM | POLLRDHUP), "peer SHUT_WR: revents %s",
	      pollnames(rev));
	rev = poll1(c, all, 0);
	CHECK(rev == out, "after own SHUT_WR: revents %s", pollnames(rev));
	SYS(shutdown(s, SHUT_WR));
	rev = poll1(s, all, 0);
	CHECK(rev == (out | POLLIN | POLLRDNORM | POLLRDHUP | POLLHUP),
	      "both directions shut: revents %s", pollnames(rev));
	rev = wait_for(c, POLLRDHUP);
	rev = poll1(c, all, 0);
	CHECK(rev == (out | POLLIN | POLLRDNORM | POLLRDHUP | POLLHUP),
	      "client, both directions shut: revents %s", pollnames(rev));
	close(c);
	close(s);
}

void t_poll_listen(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s, rev;

	rev = poll1(l, ALLEV, 0);
	CHECK(rev == 0, "empty listener: revents %s", pollnames(rev));
	c = ut_connect(AF_INET, port);
	rev = wait_for(l, POLLIN);
	rev = poll1(l, ALLEV, 0);
	CHECK(rev == (POLLIN | POLLRDNORM), "pending connection: revents %s", pollnames(rev));
	s = ut_accept(l, AF_INET);
	rev = poll1(l, ALLEV, 0);
	CHECK(rev == 0, "accepted: revents %s", pollnames(rev));
	close(c);
	close(s);
	close(l);
}

static int epwait(int ep, struct epoll_event *ev, int timeout)
{
	int n;

	do
		n = epoll_wait(ep, ev, 8, timeout);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		FAIL("epoll_wait: %s", ename(errno));
	return n;
}

void t_epoll_level(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[8];
	int c, s, n, ep = SYS(epoll_create1(0));
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	EXPECT_EQ(epwait(ep, out, 0), 0);
	write_all(c, "abc", 3);
	n = epwait(ep, out, 10000);
	CHECK(n == 1 && out[0].events == EPOLLIN && out[0].data.u32 == 1,
	      "data: %d events, events %#x", n, n > 0 ? out[0].events : 0);
	wait_inq(s, 3);
	/* Level-triggered: reported again while data is unread. */
	EXPECT_EQ(epwait(ep, out, 0), 1);
	EXPECT_EQ(epwait(ep, out, 0), 1);
	read_exact(s, buf, 2);
	EXPECT_EQ(epwait(ep, out, 0), 1);
	read_exact(s, buf, 1);
	EXPECT_EQ(epwait(ep, out, 0), 0);
	/* EPOLLOUT on a connected socket with room. */
	ev.events = EPOLLIN | EPOLLOUT;
	SYS(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
	n = epwait(ep, out, 0);
	CHECK(n == 1 && out[0].events == EPOLLOUT, "EPOLLOUT: %d events, events %#x", n,
	      n > 0 ? out[0].events : 0);
	close(ep);
	close(c);
	close(s);
}

void t_epoll_edge(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = 7 }, out[8];
	int c, s, n, ep = SYS(epoll_create1(0));
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	EXPECT_EQ(epwait(ep, out, 0), 0);
	for (int i = 1; i <= 3; i++) {
		write_all(c, "x", 1);
		n = epwait(ep, out, 10000);
		CHECK(n == 1 && out[0].events == EPOLLIN, "arrival %d: %d events (%#x)", i, n,
		      n > 0 ? out[0].events : 0);
		wait_inq(s, i);
		/* Edge-triggered: no new report without new data. */
		n = epwait(ep, out, 0);
		CHECK(n == 0, "arrival %d: re-reported without new data", i);
	}
	read_exact(s, buf, 3);
	EXPECT_EQ(epwait(ep, out, 0), 0);
	/* Peer shutdown is an edge too. */
	SYS(shutdown(c, SHUT_WR));
	n = epwait(ep, out, 10000);
	CHECK(n == 1 && out[0].events == EPOLLIN, "FIN: %d events (%#x)", n,
	      n > 0 ? out[0].events : 0);
	EXPECT_EQ(epwait(ep, out, 0), 0);
	/* EPOLLOUT edge: reported once on registration. */
	ev.events = EPOLLOUT | EPOLLET;
	ev.data.u32 = 8;
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	n = epwait(ep, out, 0);
	CHECK(n == 1 && out[0].data.u32 == 8 && out[0].events == EPOLLOUT,
	      "EPOLLOUT|EPOLLET: %d events (%#x)", n, n > 0 ? out[0].events : 0);
	EXPECT_EQ(epwait(ep, out, 0), 0);
	close(ep);
	close(c);
	close(s);
}

/*
 * Edge-triggered epoll with a reader that does not read to EAGAIN: TCP calls
 * sk_data_ready for every segment that arrives, so every arrival is a new edge
 * (ep_poll_callback queues the item again), whether or not older bytes are still
 * unread.  A reader that takes 10 of 1000 bytes and waits again must be woken by
 * the next 1000.
 */
#define EDGE_PARTIAL_ROUNDS 5
#define EDGE_PARTIAL_SIZE 1000
#define EDGE_PARTIAL_READ 10

void t_epoll_edge_partial(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = 9 }, out[8];
	/* got has room for more than was sent, so that extra bytes would show. */
	static char sent[EDGE_PARTIAL_ROUNDS * EDGE_PARTIAL_SIZE], got[sizeof(sent) + 64];
	size_t nsent = 0, nread = 0;
	int c, s, n, ep = SYS(epoll_create1(0));
	ssize_t r;

	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	EXPECT_EQ(epwait(ep, out, 0), 0);
	for (int i = 1; i <= EDGE_PARTIAL_ROUNDS; i++) {
		fill_pattern(sent + nsent, EDGE_PARTIAL_SIZE, 40 + i);
		write_all(c, sent + nsent, EDGE_PARTIAL_SIZE);
		nsent += EDGE_PARTIAL_SIZE;
		n = epwait(ep, out, 5000);
		CHECK(n == 1 && out[0].events == EPOLLIN && out[0].data.u32 == 9,
		      "arrival %d of %d B, with %zu B left unread by reads of %d B that "
		      "did not reach EAGAIN: %d events (%#x) in 5 s; TCP reports every "
		      "arrival as a new edge (FIONREAD %d)", i, EDGE_PARTIAL_SIZE,
		      nsent - EDGE_PARTIAL_SIZE - nread, EDGE_PARTIAL_READ, n,
		      n > 0 ? out[0].events : 0, inq(s));
		wait_inq(s, (int)(nsent - nread));
		/* One write of 1000 B is one arrival: nothing more to report. */
		n = epwait(ep, out, 0);
		CHECK(n == 0, "arrival %d re-reported without new data (%#x)", i, out[0].events);
		r = recv(s, got + nread, EDGE_PARTIAL_READ, 0);
		CHECK(r == EDGE_PARTIAL_READ, "partial read %d: %zd (%s)", i, r,
		      r < 0 ? ename(errno) : "short");
		nread += EDGE_PARTIAL_READ;
		/* A read is not an arrival. */
		n = epwait(ep, out, 0);
		CHECK(n == 0, "an edge after partial read %d without new data (%#x)", i,
		      out[0].events);
	}
	/* The rest, to EAGAIN: every byte once, in order. */
	set_nonblock(s, true);
	while ((r = recv(s, got + nread, sizeof(got) - nread, 0)) > 0)
		nread += r;
	CHECK(r < 0 && errno == EAGAIN, "reading the rest: %zd (%s) after %zu B", r,
	      r < 0 ? ename(errno) : "EOF", nread);
	EXPECT_EQ(nread, nsent);
	CHECK(!memcmp(got, sent, nsent), "the %zu B read differ from the %zu B sent", nread, nsent);
	close(ep);
	close(c);
	close(s);
}

/*
 * Space is not an arrival: a socket watched for EPOLLIN alone, edge-triggered, with bytes
 * left unread, fills its peer with a non-blocking send and the peer reads it all. TCP
 * wakes the writer for the space (sk_write_space, EPOLLOUT), which an EPOLLIN-only watch
 * does not hear: no new EPOLLIN edge.
 */
void t_epoll_edge_space(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET }, out[8];
	static char buf[1 << 16];
	size_t filled = 0, drained = 0;
	int c, s, n, ep = SYS(epoll_create1(0));
	ssize_t r;

	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	write_all(c, "unread", 6);
	n = epwait(ep, out, 5000);
	CHECK(n == 1 && out[0].events == EPOLLIN, "the arrival: %d events (%#x)", n,
	      n > 0 ? out[0].events : 0);
	set_nonblock(s, true);
	while ((r = send(s, buf, sizeof(buf), 0)) > 0)
		filled += r;
	CHECK(r < 0 && errno == EAGAIN, "filling the peer: %zd (%s) after %zu B", r,
	      r < 0 ? ename(errno) : "0", filled);
	n = epwait(ep, out, 0);
	CHECK(n == 0, "an EPOLLIN edge after a send without new data (%#x)", out[0].events);
	while (drained < filled) {
		r = recv(c, buf, sizeof(buf), 0);
		CHECK(r > 0, "draining: %zd (%s) after %zu of %zu B", r,
		      r < 0 ? ename(errno) : "EOF", drained, filled);
		drained += r;
	}
	/* The space is back (TCP's window update, the ring's cursor): s is writable. */
	wait_for(s, POLLOUT);
	n = epwait(ep, out, 0);
	CHECK(n == 0, "an EPOLLIN edge for space freed by the peer's reads, without new data "
	      "(%#x); TCP wakes an EPOLLIN watch only for an arrival", out[0].events);
	close(ep);
	close(c);
	close(s);
}

void t_epoll_rdhup(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP }, out[8];
	int c, s, n, ep = SYS(epoll_create1(0));

	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	EXPECT_EQ(epwait(ep, out, 0), 0);
	SYS(shutdown(c, SHUT_WR));
	n = epwait(ep, out, 10000);
	CHECK(n == 1 && out[0].events == (EPOLLIN | EPOLLRDHUP), "peer SHUT_WR: %d events (%#x)",
	      n, n > 0 ? out[0].events : 0);
	SYS(shutdown(s, SHUT_WR));
	n = epwait(ep, out, 0);
	CHECK(n == 1 && out[0].events == (EPOLLIN | EPOLLRDHUP | EPOLLHUP),
	      "both shut: %d events (%#x)", n, n > 0 ? out[0].events : 0);
	close(ep);
	close(c);
	close(s);
}

/*
 * Watches for the peer's hang-up alone, as a server does while it reads nothing more from
 * a connection: epoll reports only what a wake-up's events include (or a wake-up that
 * names none), so the peer's end of stream must wake a watch for EPOLLRDHUP, and its
 * reset a watch for nothing but EPOLLERR and EPOLLHUP (which every watch has). Over TCP
 * the FIN and the reset wake every waiter (sk_state_change).
 */
void t_epoll_hangup_only(void)
{
	struct epoll_event rdhup = { .events = EPOLLRDHUP }, none = { .events = 0 }, out[8];
	int c, s, n, ep = SYS(epoll_create1(0));

	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &rdhup));
	EXPECT_EQ(epwait(ep, out, 0), 0);
	SYS(shutdown(c, SHUT_WR));
	n = epwait(ep, out, 10000);
	CHECK(n == 1 && out[0].events == EPOLLRDHUP, "peer SHUT_WR, EPOLLRDHUP watched: %d events (%#x)",
	      n, n > 0 ? out[0].events : 0);
	close(c);
	close(s);
	close(ep);

	ep = SYS(epoll_create1(0));
	ut_pair(AF_INET, &c, &s);
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, s, &none));
	EXPECT_EQ(epwait(ep, out, 0), 0);
	hard_close(c);
	n = epwait(ep, out, 10000);
	CHECK(n == 1 && out[0].events == (EPOLLERR | EPOLLHUP),
	      "peer reset, nothing watched: %d events (%#x)", n, n > 0 ? out[0].events : 0);
	close(s);
	close(ep);
}

static int sel(int fd, bool *r, bool *w, int timeout_ms)
{
	fd_set rs, ws;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int n;

	CHECK(fd < FD_SETSIZE, "fd %d too large for select", fd);
	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_SET(fd, &rs);
	FD_SET(fd, &ws);
	n = select(fd + 1, &rs, w ? &ws : NULL, NULL, &tv);
	if (n < 0)
		FAIL("select: %s", ename(errno));
	*r = FD_ISSET(fd, &rs);
	if (w)
		*w = FD_ISSET(fd, &ws);
	return n;
}

void t_select(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s;
	bool r, w;
	char buf[4];

	CHECK(sel(l, &r, NULL, 0) == 0 && !r, "empty listener readable");
	c = ut_connect(AF_INET, port);
	CHECK(sel(l, &r, NULL, 10000) == 1 && r, "listener with pending connection not readable");
	s = ut_accept(l, AF_INET);
	sel(s, &r, &w, 0);
	CHECK(!r && w, "idle connected: readable %d writable %d", r, w);
	write_all(c, "ab", 2);
	sel(s, &r, NULL, 10000);
	CHECK(r, "not readable with data");
	read_exact(s, buf, 2);
	sel(s, &r, &w, 0);
	CHECK(!r && w, "drained: readable %d writable %d", r, w);
	SYS(shutdown(c, SHUT_WR));
	sel(s, &r, NULL, 10000);
	CHECK(r, "not readable after peer SHUT_WR");
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	close(c);
	close(s);
	close(l);
}
