// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: processes and descriptors (fork, dup, many concurrent
 * connections), and sockets under test mixed with plain TCP.
 */
#include "harness.h"
#include "tests.h"

void t_fork_inherit(void)
{
	char buf[32];
	int c, s, st;
	pid_t pid;

	ut_pair(AF_INET, &c, &s);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", ename(errno));
	if (pid == 0) {
		char b[8];

		if (send(s, "from child", 10, MSG_NOSIGNAL) != 10)
			_exit(1);
		if (recv(s, b, 8, MSG_WAITALL) != 8 || memcmp(b, "toChild!", 8))
			_exit(2);
		_exit(0);
	}
	read_exact(c, buf, 10);
	CHECK(!memcmp(buf, "from child", 10), "data from child differs");
	write_all(c, "toChild!", 8);
	SYS(waitpid(pid, &st, 0));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed (status %#x)", st);
	/* The parent's copy still works after the child exited. */
	echo_check(c, s, 500, 31);
	/* Closing one copy does not close the connection. */
	pid = fork();
	CHECK(pid >= 0, "fork: %s", ename(errno));
	if (pid == 0) {
		close(s);
		_exit(0);
	}
	SYS(waitpid(pid, &st, 0));
	echo_check(c, s, 10, 32);
	close(c);
	close(s);
}

void t_dup(void)
{
	int c, s, d, d2;

	ut_pair(AF_INET, &c, &s);
	d = SYS(dup(c));
	SYS(close(c));
	check_sock(d, AF_INET, TCP_ESTABLISHED, AF_INET);
	echo_check(d, s, 1000, 41);
	d2 = SYS(fcntl(d, F_DUPFD_CLOEXEC, 100));
	CHECK(d2 >= 100, "F_DUPFD_CLOEXEC gave %d", d2);
	SYS(close(d));
	echo_check(d2, s, 1000, 42);
	d = SYS(dup2(d2, 90));
	SYS(close(d2));
	echo_check(s, d, 1000, 43);
	close(d);
	close(s);
}

#define NCONC 128
#define CONC_MSG 512

struct conn {
	int fd;
	int state;	/* 0 connecting, 1 sending, 2 receiving, 3 done */
	size_t off;
	char buf[CONC_MSG];
};

struct srvconn {
	int fd;
	size_t have, sent;
	char buf[CONC_MSG];
};

void t_many_concurrent(void)
{
	static struct conn cl[NCONC];
	static struct srvconn sv[NCONC];
	struct pollfd pf[1 + 2 * NCONC];
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, NCONC * 2), i, nsv = 0, done = 0;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2 * NCONC + 32) {
		rl.rlim_cur = rl.rlim_max < 2 * NCONC + 32 ? rl.rlim_max : 2 * NCONC + 32;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	set_nonblock(l, true);
	for (i = 0; i < NCONC; i++) {
		struct sockaddr_storage ss;
		socklen_t len = mkaddr(AF_INET, port, &ss);

		cl[i].fd = ut_socket(AF_INET);
		set_nonblock(cl[i].fd, true);
		if (connect(cl[i].fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
			FAIL("connect %d: %s", i, ename(errno));
	}
	while (done < NCONC) {
		int n = 0, r;

		pf[n++] = (struct pollfd){ .fd = nsv < NCONC ? l : -1, .events = POLLIN };
		for (i = 0; i < NCONC; i++)
			pf[n++] = (struct pollfd){
				.fd = cl[i].state == 3 ? -1 : cl[i].fd,
				.events = cl[i].state == 2 ? POLLIN : POLLOUT };
		for (i = 0; i < nsv; i++)
			pf[n++] = (struct pollfd){ .fd = sv[i].fd,
				.events = sv[i].sent < sv[i].have ? POLLOUT : POLLIN };
		r = poll(pf, n, 10000);
		if (r < 0 && errno == EINTR)
			continue;
		CHECK(r > 0, "poll: %s (%d of %d connections done)", r ? ename(errno) : "timeout",
		      done, NCONC);
		if (pf[0].revents & POLLIN) {
			for (;;) {
				int fd = accept(l, NULL, NULL);

				if (fd < 0) {
					CHECK(errno == EAGAIN, "accept: %s", ename(errno));
					break;
				}
				CHECK(nsv < NCONC, "more connections than clients");
				check_sock(fd, AF_INET, -1, AF_INET);
				set_nonblock(fd, true);
				sv[nsv++] = (struct srvconn){ .fd = fd };
			}
		}
		for (i = 0; i < NCONC; i++) {
			struct conn *k = &cl[i];
			int rev = pf[1 + i].revents;
			ssize_t m;

			if (!rev)
				continue;
			if (k->state == 0) {
				int e = getint(k->fd, SOL_SOCKET, SO_ERROR);

				CHECK(e == 0, "client %d: connect: %s", i, ename(e));
				check_sock(k->fd, AF_INET, TCP_ESTABLISHED, AF_INET);
				fill_pattern(k->buf, CONC_MSG, i);
				k->state = 1;
			}
			if (k->state == 1) {
				m = send(k->fd, k->buf + k->off, CONC_MSG - k->off, MSG_NOSIGNAL);
				if (m < 0 && errno == EAGAIN)
					continue;
				CHECK(m > 0, "client %d: send: %s", i, ename(errno));
				k->off += m;
				if (k->off == CONC_MSG) {
					k->state = 2;
					k->off = 0;
				}
			} else if (k->state == 2) {
				char in[CONC_MSG];

				m = recv(k->fd, in, CONC_MSG - k->off, 0);
				if (m < 0 && errno == EAGAIN)
					continue;
				CHECK(m > 0, "client %d: recv: %s", i, m ? ename(errno) : "EOF");
				CHECK(!memcmp(in, k->buf + k->off, m), "client %d: echo differs", i);
				k->off += m;
				if (k->off == CONC_MSG) {
					k->state = 3;
					close(k->fd);
					done++;
				}
			}
		}
		for (i = 0; i < nsv; i++) {
			struct srvconn *v = &sv[i];
			int rev = pf[1 + NCONC + i].revents;
			ssize_t m;

			if (!rev || v->fd < 0)
				continue;
			if (v->sent < v->have) {
				m = send(v->fd, v->buf + v->sent, v->have - v->sent, MSG_NOSIGNAL);
				if (m < 0 && errno == EAGAIN)
					continue;
				CHECK(m > 0, "server %d: send: %s", i, ename(errno));
				v->sent += m;
				if (v->sent == v->have)
					v->sent = v->have = 0;
			} else {
				m = recv(v->fd, v->buf, sizeof(v->buf), 0);
				if (m < 0 && errno == EAGAIN)
					continue;
				CHECK(m >= 0, "server %d: recv: %s", i, ename(errno));
				if (m == 0) {
					close(v->fd);
					v->fd = -1;
					continue;
				}
				v->have = m;
				v->sent = 0;
			}
		}
	}
	EXPECT_EQ(nsv, NCONC);
	close(l);
}

/* ------------------------------------------------------------------------- */
/* Tests: mixed with plain TCP                                                */

void t_mixed_tcp_client(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s;

	c = tcp_socket(AF_INET);
	connect_lo(c, AF_INET, port);
	s = accept(l, NULL, NULL);
	CHECK(s >= 0, "accept: %s", ename(errno));
	/* A connection to a plain TCP peer can only be carried natively. */
	if (g_expect_mode != MODE_ANY)
		g_mode_override = SCI_MODE_NATIVE;
	check_sock(s, AF_INET, TCP_ESTABLISHED, AF_INET);
	echo_check(c, s, 1, 51);
	echo_check(c, s, 50000, 52);
	echo_check(s, c, 50000, 53);
	SYS(shutdown(c, SHUT_WR));
	{
		char b;

		EXPECT_EQ(recv(s, &b, 1, 0), 0);
	}
	close(c);
	close(s);
	close(l);
}

void t_mixed_tcp_server(void)
{
	int l = tcp_socket(AF_INET6), c, s;
	struct sockaddr_storage cn, sp;
	uint16_t port;

	bind_lo(l, AF_INET6, 0);
	SYS(listen(l, 16));
	port = local_port(l);
	c = ut_socket(AF_INET6);
	connect_lo(c, AF_INET6, port);
	if (g_expect_mode != MODE_ANY)
		g_mode_override = SCI_MODE_NATIVE;
	check_sock(c, AF_INET6, TCP_ESTABLISHED, AF_INET6);
	s = SYS(accept(l, NULL, NULL));
	get_name(c, false, &cn, AF_INET6);
	get_name(s, true, &sp, AF_INET6);
	EXPECT_EQ(ss_port(&cn), ss_port(&sp));
	echo_check(c, s, 1, 54);
	echo_check(c, s, 50000, 55);
	echo_check(s, c, 50000, 56);
	SYS(shutdown(s, SHUT_WR));
	{
		char b;

		EXPECT_EQ(recv(c, &b, 1, 0), 0);
	}
	close(c);
	close(s);
	close(l);
}
