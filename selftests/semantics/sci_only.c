// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: AF_SCI only (run only when the sockets under test are AF_SCI).
 */
#include "harness.h"
#include "tests.h"

void t_sci_types(void)
{
	int fd;

	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_SEQPACKET, 0), ESOCKTNOSUPPORT);
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_RAW, 0), ESOCKTNOSUPPORT);
	fd = (int)syscall(SYS_socket, g_sci_family, SOCK_DGRAM, IPPROTO_UDP);
	CHECK(fd >= 0, "socket(F, SOCK_DGRAM, IPPROTO_UDP): %s", ename(errno));
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_PROTOCOL), IPPROTO_UDP);
	/* SOL_SCI options of a stream socket that mean nothing for datagrams. */
	EXPECT_ERR(setsockopt(fd, SOL_SCI, SCI_SPIN_US, &fd, sizeof(fd)), ENOPROTOOPT);
	close(fd);
}

void t_sci_protocols(void)
{
	int fd;

	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_DGRAM, IPPROTO_TCP), EPROTONOSUPPORT);
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_DGRAM, IPPROTO_UDPLITE), EPROTONOSUPPORT);
	fd = (int)syscall(SYS_socket, g_sci_family, SOCK_STREAM, IPPROTO_TCP);
	CHECK(fd >= 0, "socket(F, SOCK_STREAM, IPPROTO_TCP): %s", ename(errno));
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_PROTOCOL), IPPROTO_TCP);
	close(fd);
}

void t_sci_info_short(void)
{
	struct sci_info info[2];
	socklen_t len = sizeof(info[0]) - 1;
	int fd = ut_socket(AF_INET);

	EXPECT_ERR(getsockopt(fd, SOL_SCI, SCI_INFO, info, &len), EINVAL);
	len = 0;
	EXPECT_ERR(getsockopt(fd, SOL_SCI, SCI_INFO, info, &len), EINVAL);
	/* A longer buffer gets exactly the structure. */
	len = sizeof(info);
	SYS(getsockopt(fd, SOL_SCI, SCI_INFO, info, &len));
	EXPECT_EQ(len, sizeof(info[0]));
	EXPECT_EQ(info[0].state, TCP_CLOSE);
	close(fd);
}

void t_sci_info_set(void)
{
	struct sci_info info = { 0 };
	int fd = ut_socket(AF_INET);

	EXPECT_ERR(setsockopt(fd, SOL_SCI, SCI_INFO, &info, sizeof(info)), ENOPROTOOPT);
	close(fd);
}

static struct sci_info sci_info_of(int fd)
{
	struct sci_info info;
	socklen_t len = sizeof(info);

	if (getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len) < 0)
		FAIL("getsockopt(SOL_SCI, SCI_INFO): %s", ename(errno));
	return info;
}

/* Whether /proc/self/fdinfo/FD has the line "sci-mode:\t<mode>". */
static bool fdinfo_mode(int fd, const char *mode)
{
	char path[64], line[256], want[64];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	snprintf(want, sizeof(want), "sci-mode:\t%s\n", mode);
	f = fopen(path, "r");
	CHECK(f, "%s: %s", path, ename(errno));
	while (fgets(line, sizeof(line), f))
		found |= !strcmp(line, want);
	fclose(f);
	return found;
}

static volatile sig_atomic_t g_sigios;
static void on_sigio(int sig) { (void)sig; g_sigios++; }

/* The AF_SCI end of a native connection: still AF_SCI to SCI_INFO, SCI_SPIN_US, fdinfo. */
static void check_handed_over(int fd, unsigned reason)
{
	struct sci_info info = sci_info_of(fd);

	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_DOMAIN), AF_INET);
	EXPECT_EQ(info.mode, SCI_MODE_NATIVE);
	if (reason != SCI_FALLBACK_NONE)
		EXPECT_EQ(info.fallback_reason, reason);
	CHECK(info.fallback_reason != SCI_FALLBACK_NONE, "native without a fallback reason");
	EXPECT_EQ(info.native_family, AF_INET);
	EXPECT_EQ(info.state, TCP_ESTABLISHED);
	setint(fd, SOL_SCI, SCI_SPIN_US, 7);
	EXPECT_EQ(getint(fd, SOL_SCI, SCI_SPIN_US), 7);
	EXPECT_EQ(getint(fd, SOL_SCI, SCI_NATIVE_FAMILY), AF_INET);
	CHECK(fdinfo_mode(fd, "native"), "fdinfo of a handed-over socket lacks sci-mode native");
}

/*
 * A connection that fell back hands its file to the native TCP socket (handover.rs), so
 * its calls cost what TCP's cost. SO_DOMAIN then reads AF_INET; SCI_INFO, SCI_SPIN_US and
 * fdinfo still answer; an epoll entry and O_ASYNC set up before the handover still fire.
 */
void t_sci_fallback_handover(void)
{
	struct sockaddr_storage ss;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	uint16_t port = 0;
	int tl = tcp_socket(AF_INET), c, s, ep, l, tc, as;
	socklen_t len;
	char b = 'x';

	/* An AF_SCI client of a plain TCP server: peer-rejected (or port-excluded). */
	bind_lo(tl, AF_INET, 0);
	SYS(listen(tl, 4));
	c = ut_socket(AF_INET);
	EXPECT_EQ(getint(c, SOL_SOCKET, SO_DOMAIN), g_sci_family);
	ep = SYS(epoll_create1(0));
	ev.data.fd = c;
	SYS(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	signal(SIGIO, on_sigio);
	SYS(fcntl(c, F_SETOWN, getpid()));
	SYS(fcntl(c, F_SETFL, O_ASYNC | O_NONBLOCK));
	len = mkaddr(AF_INET, local_port(tl), &ss);
	if (connect(c, (struct sockaddr *)&ss, len) < 0)
		CHECK(errno == EINPROGRESS, "connect: %s", ename(errno));
	wait_for(c, POLLOUT);
	s = SYS(accept(tl, NULL, NULL));
	/* The first send of the connected socket hands the file over. */
	EXPECT_EQ(send(c, &b, 1, 0), 1);
	check_handed_over(c, SCI_FALLBACK_NONE);
	EXPECT_EQ(recv(s, &b, 1, 0), 1);
	/* Registered on the AF_SCI socket before: still woken by the native socket. */
	while (epoll_wait(ep, &ev, 1, 0) > 0)
		;
	g_sigios = 0;
	EXPECT_EQ(send(s, &b, 1, 0), 1);
	EXPECT_EQ(epoll_wait(ep, &ev, 1, 5000), 1);
	EXPECT_EQ(ev.data.fd, c);
	CHECK(ev.events & EPOLLIN, "epoll reported %#x, not EPOLLIN", ev.events);
	for (int i = 0; i < 500 && !g_sigios; i++)
		msleep(10);
	CHECK(g_sigios > 0, "no SIGIO after the handover");
	EXPECT_EQ(recv(c, &b, 1, 0), 1);
	echo_check(c, s, 70000, 61);
	close(ep);

	/* A plain TCP client of an AF_SCI listener: the accepted socket is handed over. */
	l = ut_listener(AF_INET, &port, 4);
	tc = tcp_socket(AF_INET);
	connect_lo(tc, AF_INET, port);
	as = SYS(accept(l, NULL, NULL));
	check_handed_over(as, SCI_FALLBACK_PEER_TCP);
	echo_check(tc, as, 70000, 62);
	close(tc);
	EXPECT_EQ(recv(as, &b, 1, 0), 0);
	close(as);
	close(l);
	close(c);
	close(s);
	close(tl);
}

struct blocked_recv {
	int fd;
	pid_t tid;
	ssize_t got;
};

static void *blocking_recv(void *arg)
{
	struct blocked_recv *b = arg;
	char c;

	__atomic_store_n(&b->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	b->got = recv(b->fd, &c, 1, 0);
	return NULL;
}

/* The scheduler state of thread tid of this process ('R', 'S', ...). */
static char task_state(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0, "%s: %s", path, ename(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0, "%s: %s", path, ename(errno));
	buf[n] = 0;
	p = strrchr(buf, ')');
	CHECK(p && p[1] == ' ', "%s: %s", path, buf);
	return p[2];
}

/*
 * Whether thread tid of this process sleeps on a socket's wait queue: in state 'S', in
 * wait_woken() when the kernel names where (wchan; "0" without symbols).
 */
static bool asleep_on_socket(pid_t tid)
{
	char path[64], wchan[64] = "";
	ssize_t n;
	int fd;

	if (task_state(tid) != 'S')
		return false;
	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return true;
	n = read(fd, wchan, sizeof(wchan) - 1);
	close(fd);
	wchan[n > 0 ? n : 0] = 0;
	return !strcmp(wchan, "0") || !strcmp(wchan, "") || strstr(wchan, "wait_woken");
}

/*
 * Adaptive spinning weighs a spin against what a sleep costs here: a blocking recv that
 * slept and was woken by the data measures its wake-up latency, which fdinfo's sci-spin
 * line shows with the receive direction's budget (4 wake-ups, 100 us at least).
 */
void t_sci_spin_wakeup(void)
{
	struct blocked_recv b = { 0 };
	long wake, budget;
	pthread_t th;
	int c, s;

	ut_pair(AF_INET, &c, &s);
	if (sci_mode_of(s) != SCI_MODE_SCI) {
		close(c);
		close(s);
		return;
	}
	EXPECT_EQ(fdinfo_field(s, "sci-spin", "wake-up"), 0);
	b.fd = s;
	CHECK(!pthread_create(&th, NULL, blocking_recv, &b), "pthread_create");
	/* Asleep in recv (after any spin): the event to wait for, looked at until it came. */
	while (!__atomic_load_n(&b.tid, __ATOMIC_ACQUIRE) || !asleep_on_socket(b.tid))
		sched_yield();
	write_all(c, "w", 1);
	pthread_join(th, NULL);
	EXPECT_EQ(b.got, 1);
	wake = fdinfo_field(s, "sci-spin", "wake-up");
	budget = fdinfo_field(s, "sci-spin", "recv budget");
	note("a recv's wake-up took %ld us: its spin budget is %ld us", wake, budget);
	CHECK(wake > 0, "a recv woken by its data measured no wake-up (sci-spin wake-up %ld)", wake);
	CHECK(budget == (wake * 4 < 100 ? 100 : wake * 4 > 1000 ? 1000 : wake * 4),
	      "recv budget %ld us for a wake-up of %ld us", budget, wake);
	close(c);
	close(s);
}
