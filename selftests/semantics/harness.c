// SPDX-License-Identifier: GPL-2.0
/*
 * harness: the framework of the sock_semantics suite (see harness.h).
 */
#include "harness.h"

/* ------------------------------------------------------------------------- */
/* Configuration                                                              */

int g_family = FAM_INET;	/* --family */
int g_sci_family = -1;		/* AF_SCI family number, if known */
bool g_expect_sci;		/* sockets under test must be AF_SCI */
int g_expect_mode = MODE_ANY;	/* --expect-mode */
int g_mode_override = -2;	/* per-check override (mixed tests) */
int g_port_base = 20000;
int g_verbose;
int g_test_index;		/* index in the test table: fixed ports */
char *g_msg;			/* shared with the parent: failure reason */

/* ------------------------------------------------------------------------- */
/* Errno / poll names                                                         */

const char *ename(int e)
{
	static char buf[32];

	switch (e) {
#define E(x) case x: return #x
	E(EPERM); E(ENOENT); E(ESRCH); E(EINTR); E(EIO); E(ENXIO); E(E2BIG);
	E(EBADF); E(ECHILD); E(EAGAIN); E(ENOMEM); E(EACCES); E(EFAULT);
	E(EBUSY); E(EEXIST); E(ENODEV); E(ENOTDIR); E(EISDIR); E(EINVAL);
	E(ENFILE); E(EMFILE); E(ENOTTY); E(EFBIG); E(ENOSPC); E(ESPIPE);
	E(EROFS); E(EPIPE); E(EDOM); E(ERANGE); E(ENOSYS); E(ENOTSOCK);
	E(EDESTADDRREQ); E(EMSGSIZE); E(EPROTOTYPE); E(ENOPROTOOPT);
	E(EPROTONOSUPPORT); E(ESOCKTNOSUPPORT); E(EOPNOTSUPP); E(EPFNOSUPPORT);
	E(EAFNOSUPPORT); E(EADDRINUSE); E(EADDRNOTAVAIL); E(ENETDOWN);
	E(ENETUNREACH); E(ENETRESET); E(ECONNABORTED); E(ECONNRESET);
	E(ENOBUFS); E(EISCONN); E(ENOTCONN); E(ESHUTDOWN); E(ETIMEDOUT);
	E(ECONNREFUSED); E(EHOSTDOWN); E(EHOSTUNREACH); E(EALREADY);
	E(EINPROGRESS); E(EBADFD);
#undef E
	case 0: return "success";
	}
	snprintf(buf, sizeof(buf), "errno %d", e);
	return buf;
}

const char *pollnames(int ev)
{
	static char buf[256];
	static const struct { int bit; const char *n; } t[] = {
		{ POLLIN, "IN" }, { POLLPRI, "PRI" }, { POLLOUT, "OUT" },
		{ POLLERR, "ERR" }, { POLLHUP, "HUP" }, { POLLNVAL, "NVAL" },
		{ POLLRDNORM, "RDNORM" }, { POLLRDBAND, "RDBAND" },
		{ POLLWRNORM, "WRNORM" }, { POLLWRBAND, "WRBAND" },
		{ POLLRDHUP, "RDHUP" },
	};
	size_t i;

	buf[0] = 0;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (ev & t[i].bit) {
			if (buf[0])
				strcat(buf, "|");
			strcat(buf, t[i].n);
		}
	if (!buf[0])
		strcpy(buf, "0");
	return buf;
}

/* ------------------------------------------------------------------------- */
/* Failure reporting (child side)                                             */

void __attribute__((noreturn, format(printf, 3, 4)))
finish(int code, int line, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (line)
		n = snprintf(g_msg, MSG_SIZE, "line %d: ", line);
	va_start(ap, fmt);
	vsnprintf(g_msg + n, MSG_SIZE - n, fmt, ap);
	va_end(ap);
	_exit(code);
}

void note(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!g_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(1, "#   %s\n", buf);
}

/* ------------------------------------------------------------------------- */
/* Time, addresses                                                            */

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct moment moment_now(void)
{
	struct tms t;
	struct moment m = { .mono = now() };

	m.ticks = (double)times(&t) / sysconf(_SC_CLK_TCK);
	return m;
}

bool timeo_honoured(struct moment t0, double s, char *took, size_t len)
{
	struct moment t1 = moment_now();
	double tick = 1.0 / sysconf(_SC_CLK_TCK);

	snprintf(took, len, "%.3f s by CLOCK_MONOTONIC, %.2f s by jiffies", t1.mono - t0.mono,
		 t1.ticks - t0.ticks);
	return t1.ticks - t0.ticks >= s - tick - 1e-9 && t1.mono - t0.mono < 10;
}

void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

const char *afname(int af)
{
	return af == AF_INET ? "v4" : af == AF_INET6 ? "v6" : "?";
}

socklen_t mkaddr(int af, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (af == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		sin6->sin6_addr = in6addr_loopback;
		return sizeof(*sin6);
	}
}

uint16_t ss_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

const char *ss_str(const struct sockaddr_storage *ss)
{
	static char bufs[2][80];
	static int k;
	char a[INET6_ADDRSTRLEN] = "?";
	char *b = bufs[k++ & 1];

	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, a, sizeof(a));
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, a, sizeof(a));
	snprintf(b, 80, "fam %d [%s]:%u", ss->ss_family, a, ss_port(ss));
	return b;
}

uint16_t local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	SYS(getsockname(fd, (struct sockaddr *)&ss, &len));
	return ss_port(&ss);
}


/* A port reserved for this test: --port-base + 4 * table index + k. */
uint16_t fixed_port(int k)
{
	return (uint16_t)(g_port_base + g_test_index * 4 + k);
}

void get_name(int fd, bool peer, struct sockaddr_storage *ss, int af)
{
	socklen_t len = sizeof(*ss);
	socklen_t want = af == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);

	memset(ss, 0xa5, sizeof(*ss));
	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)ss, &len) < 0)
		FAIL("%s: %s", peer ? "getpeername" : "getsockname", ename(errno));
	CHECK(len == want, "%s: addrlen %u, expected %u", peer ? "getpeername" : "getsockname",
	      len, want);
	CHECK(ss->ss_family == af, "%s: family %d, expected %d",
	      peer ? "getpeername" : "getsockname", ss->ss_family, af);
}

/* ------------------------------------------------------------------------- */
/* Sockets under test                                                         */

int getint(int fd, int level, int opt)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, opt, &v, &len) < 0)
		FAIL("getsockopt(%d, %d): %s", level, opt, ename(errno));
	CHECK(len == sizeof(v), "getsockopt(%d, %d) len %u", level, opt, len);
	return v;
}

void setint(int fd, int level, int opt, int v)
{
	if (setsockopt(fd, level, opt, &v, sizeof(v)) < 0)
		FAIL("setsockopt(%d, %d, %d): %s", level, opt, v, ename(errno));
}

/*
 * Assert that fd is a socket under test of the expected domain.  When AF_SCI
 * is expected, SCI_INFO must work and report the expected mode; native_af
 * (if non-zero) and state (if >= 0) are checked too.
 */
void check_sock_at(int line, int fd, int af, int state, int native_af)
{
	int want = g_expect_sci ? g_sci_family : af;
	int dom = getint(fd, SOL_SOCKET, SO_DOMAIN);
	struct sci_info info;
	socklen_t len = sizeof(info);
	int mode = g_mode_override != -2 ? g_mode_override : g_expect_mode;

	if (getint(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM)
		finish(1, line, "SO_TYPE is not SOCK_STREAM");
	if (!g_expect_sci) {
		if (dom != want)
			finish(1, line, "socket under test has SO_DOMAIN %d, expected %d (inet)",
			       dom, want);
		return;
	}
	/* SCI_INFO answers only on AF_SCI sockets: a plain TCP socket says ENOPROTOOPT. */
	memset(&info, 0xa5, sizeof(info));
	if (getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len) < 0)
		finish(1, line, "getsockopt(SOL_SCI, SCI_INFO): %s (SO_DOMAIN %d)",
		       ename(errno), dom);
	if (len != sizeof(info))
		finish(1, line, "SCI_INFO len %u, expected %zu", len, sizeof(info));
	/*
	 * A connection that fell back hands its file to the native TCP socket, after
	 * which the socket layer answers SO_DOMAIN from that one (as on AF_SMC).
	 */
	if (dom != want && !(info.mode == SCI_MODE_NATIVE && dom == (int)info.native_family))
		finish(1, line, "socket under test has SO_DOMAIN %d, expected %d (sci)%s",
		       dom, want, info.mode == SCI_MODE_NATIVE ? " or its native family" : "");
	/*
	 * Only a connection can be carried over SCI: a fresh or listening socket is
	 * native by design, so "expect sci" applies to established ones.
	 */
	if (mode == SCI_MODE_SCI && state >= 0 && state != TCP_ESTABLISHED)
		mode = MODE_ANY;
	if (mode != MODE_ANY && info.mode != (unsigned)mode)
		finish(1, line, "SCI_INFO mode %u, expected %d", info.mode, mode);
	if (info.mode == SCI_MODE_SCI && info.fallback_reason != SCI_FALLBACK_NONE)
		finish(1, line, "SCI_INFO mode sci but fallback_reason %u",
		       info.fallback_reason);
	if (native_af && info.native_family != (unsigned)native_af)
		finish(1, line, "SCI_INFO native_family %u, expected %d",
		       info.native_family, native_af);
	if (state >= 0 && info.state != (unsigned)state)
		finish(1, line, "SCI_INFO state %u, expected %d", info.state, state);
}

/* The one place where sockets under test are created. */
int ut_socket_flags(int af, int flags)
{
	int dom = g_family == FAM_SCI ? g_sci_family : af;
	int fd = socket(dom, SOCK_STREAM | flags, 0);

	if (fd < 0)
		FAIL("socket(%d, SOCK_STREAM, 0) for %s: %s", dom, afname(af), ename(errno));
	/*
	 * socket() cannot tell AF_SCI which address family is wanted: settle it as the
	 * preload does for a program's socket(AF_INET6, ...).
	 */
	if (g_family == FAM_SCI && af == AF_INET6)
		setint(fd, SOL_SCI, SCI_NATIVE_FAMILY, AF_INET6);
	check_sock(fd, af, TCP_CLOSE, g_expect_sci ? af : 0);
	return fd;
}

int ut_socket(int af)
{
	return ut_socket_flags(af, 0);
}

/*
 * A datagram socket under test: UDP with --family inet (rewritten by the preload when
 * it runs with SCI_DGRAM=1), an AF_SCI datagram socket with --family sci. Its type and
 * protocol are UDP's; when AF_SCI is expected, SCI_INFO works and says its datagrams go
 * over its native UDP socket (mode native: implicit SCI connections are not built yet).
 */
int ut_dgram_flags(int af, int flags)
{
	int dom = g_family == FAM_SCI ? g_sci_family : af;
	int fd = socket(dom, SOCK_DGRAM | flags, 0);
	struct sci_info info;
	socklen_t len = sizeof(info);

	if (fd < 0)
		FAIL("socket(%d, SOCK_DGRAM, 0) for %s: %s", dom, afname(af), ename(errno));
	if (g_family == FAM_SCI && af == AF_INET6)
		setint(fd, SOL_SCI, SCI_NATIVE_FAMILY, AF_INET6);
	CHECK(getint(fd, SOL_SOCKET, SO_TYPE) == SOCK_DGRAM, "SO_TYPE is not SOCK_DGRAM");
	CHECK(getint(fd, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_UDP, "SO_PROTOCOL is not UDP");
	if (!g_expect_sci) {
		CHECK(getint(fd, SOL_SOCKET, SO_DOMAIN) == af, "SO_DOMAIN is not %s", afname(af));
		return fd;
	}
	CHECK(getint(fd, SOL_SOCKET, SO_DOMAIN) == g_sci_family,
	      "datagram socket under test has SO_DOMAIN %d, expected AF_SCI (%d)",
	      getint(fd, SOL_SOCKET, SO_DOMAIN), g_sci_family);
	if (getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len) < 0)
		FAIL("getsockopt(SOL_SCI, SCI_INFO) of a datagram socket: %s", ename(errno));
	CHECK(info.mode == SCI_MODE_NATIVE && info.native_family == (unsigned)af &&
	      info.state == TCP_CLOSE, "SCI_INFO mode %u family %u state %u", info.mode,
	      info.native_family, info.state);
	return fd;
}

int ut_dgram(int af)
{
	return ut_dgram_flags(af, 0);
}

/* Plain TCP sockets that an LD_PRELOAD shim cannot rewrite. */
int tcp_socket(int af)
{
	int fd = (int)syscall(SYS_socket, af, SOCK_STREAM, 0);

	if (fd < 0)
		FAIL("SYS_socket(%d, SOCK_STREAM): %s", af, ename(errno));
	CHECK(getint(fd, SOL_SOCKET, SO_DOMAIN) == af, "plain TCP socket has wrong SO_DOMAIN");
	return fd;
}

void bind_lo(int fd, int af, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(af, port, &ss);

	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		FAIL("bind(%s port %u): %s", afname(af), port, ename(errno));
}

void connect_lo(int fd, int af, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(af, port, &ss);

	if (connect(fd, (struct sockaddr *)&ss, len) < 0)
		FAIL("connect(%s port %u): %s", afname(af), port, ename(errno));
}

/* Listening socket under test on loopback; port 0 picks one. */
int ut_listener(int af, uint16_t *port, int backlog)
{
	int fd = ut_socket(af);

	/* Fixed ports: a rerun must not trip over TIME_WAIT left by the last run. */
	if (*port)
		setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	bind_lo(fd, af, *port);
	SYS(listen(fd, backlog));
	*port = local_port(fd);
	check_sock(fd, af, TCP_LISTEN, af);
	return fd;
}

int ut_connect(int af, uint16_t port)
{
	int fd = ut_socket(af);

	connect_lo(fd, af, port);
	check_sock(fd, af, TCP_ESTABLISHED, af);
	return fd;
}

int ut_accept(int lfd, int af)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		FAIL("accept: %s", ename(errno));
	check_sock(fd, af, -1, af);
	return fd;
}

/* A connected pair of sockets under test (client, server). */
void ut_pair(int af, int *c, int *s)
{
	uint16_t port = 0;
	int l = ut_listener(af, &port, 16);

	*c = ut_connect(af, port);
	*s = ut_accept(l, af);
	close(l);
}

/* ------------------------------------------------------------------------- */
/* I/O helpers                                                                */

void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			FAIL("send(%zu): %s", len, n < 0 ? ename(errno) : "returned 0");
		p += n;
		len -= n;
	}
}

void read_exact(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t want = len;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			FAIL("recv: %s", ename(errno));
		if (n == 0)
			FAIL("recv: unexpected EOF after %zu of %zu bytes", want - len, want);
		p += n;
		len -= n;
	}
}

int poll1(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		FAIL("poll: %s", ename(errno));
	return r ? p.revents : 0;
}

/* Wait (up to 10 s) until poll reports any of `events`; returns revents. */
int wait_for(int fd, short events)
{
	int rev = poll1(fd, events, 10000);

	if (!(rev & events))
		FAIL("poll: %s never reported (revents %s)", pollnames(events), pollnames(rev));
	return rev;
}

int inq(int fd)
{
	int v = -1;

	SYS(ioctl(fd, FIONREAD, &v));
	return v;
}

int outq(int fd)
{
	int v = -1;

	SYS(ioctl(fd, SIOCOUTQ, &v));
	return v;
}

/* Wait (up to 10 s) until FIONREAD reaches n. */
void wait_inq(int fd, int n)
{
	double end = now() + 10;

	while (inq(fd) < n) {
		if (now() > end)
			FAIL("FIONREAD stays at %d, waiting for %d", inq(fd), n);
		poll1(fd, POLLIN, 10);
		msleep(1);
	}
}

void set_nonblock(int fd, bool on)
{
	int fl = SYS(fcntl(fd, F_GETFL));

	SYS(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK));
}

void fill_pattern(char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

/* Round trip: a -> b then b -> a, `len` bytes each way. */
void echo_check(int a, int b, size_t len, unsigned seed)
{
	/*
	 * calloc, not malloc: GCC 12 sees fill_pattern() inlined and write_all() out of
	 * line, and calls "out" maybe uninitialized (-Wmaybe-uninitialized) for len 0.
	 */
	char *out = calloc(1, len), *in = calloc(1, len);

	CHECK(out && in, "calloc");
	fill_pattern(out, len, seed);
	write_all(a, out, len);
	read_exact(b, in, len);
	CHECK(!memcmp(in, out, len), "data mismatch a->b (%zu bytes)", len);
	fill_pattern(out, len, seed + 1);
	write_all(b, out, len);
	read_exact(a, in, len);
	CHECK(!memcmp(in, out, len), "data mismatch b->a (%zu bytes)", len);
	free(out);
	free(in);
}

void *unmapped_page(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap: %s", ename(errno));
	return p;
}

volatile sig_atomic_t g_sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	g_sigpipes++;
}

void catch_sigpipe(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigpipe;
	sigaction(SIGPIPE, &sa, NULL);
	g_sigpipes = 0;
}

void hard_close(int fd)
{
	struct linger lg = { 1, 0 };

	SYS(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	SYS(close(fd));
}

/* A loopback port with nothing listening: reserved by a bound plain TCP socket. */
int reserve_port(int af, uint16_t *port)
{
	int fd = tcp_socket(af);

	bind_lo(fd, af, 0);
	*port = local_port(fd);
	return fd;
}

/* ------------------------------------------------------------------------- */
/* Runner                                                                     */

static const struct test *tests;
static int ntests;

static int read_sci_family(void)
{
	FILE *f = fopen(AF_SCI_FAMILY_PATH, "r");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* --skip: exact test names that are not run (and not listed). */
static const char *g_skip;

static bool skipped(const char *name)
{
	char buf[1024], *save = NULL, *tok;

	if (!g_skip)
		return false;
	snprintf(buf, sizeof(buf), "%s", g_skip);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(name, tok))
			return true;
	return false;
}

static bool selected(const char *name, const char *only)
{
	char buf[256], *save = NULL, *tok;

	if (skipped(name))
		return false;
	if (!only)
		return true;
	snprintf(buf, sizeof(buf), "%s", only);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (strstr(name, tok))
			return true;
	return false;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s --family inet|sci [--expect-mode native|sci|any] [--only SUBSTR[,SUBSTR...]]\n"
		"          [--skip NAME[,NAME...]]\n"
		"          [--list] [--port-base N] [-v]\n"
		"  env SCI_EXPECT_SCI=1: with --family inet, expect the sockets to be AF_SCI\n"
		"  (an LD_PRELOAD shim rewrites them)\n", argv0);
	exit(2);
}

/* Run one test in a child; returns 0 pass, 1 fail, 2 skip.  Reason in g_msg. */
static int run_one(int idx)
{
	const struct test *t = &tests[idx];
	int timeout = t->timeout ? t->timeout : 20;
	int status;
	pid_t pid;

	g_msg[0] = 0;
	if (t->sci_only && !g_expect_sci) {
		snprintf(g_msg, MSG_SIZE, "AF_SCI-only check, sockets under test are not AF_SCI");
		return 2;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(g_msg, MSG_SIZE, "fork: %s", ename(errno));
		return 1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		signal(SIGPIPE, SIG_IGN);
		g_test_index = idx;
		alarm(timeout);
		t->fn();
		_exit(0);
	}
	setpgid(pid, pid);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(g_msg, MSG_SIZE, "waitpid: %s", ename(errno));
			return 1;
		}
	}
	/* Whatever the test left behind (forked helpers) goes too. */
	kill(-pid, SIGKILL);
	g_msg[MSG_SIZE - 1] = 0;
	if (WIFEXITED(status)) {
		if (WEXITSTATUS(status) == 0)
			return 0;
		if (WEXITSTATUS(status) == SKIP_EXIT)
			return 2;
		if (!g_msg[0])
			snprintf(g_msg, MSG_SIZE, "exited with status %d", WEXITSTATUS(status));
		return 1;
	}
	if (WIFSIGNALED(status)) {
		char tmp[MSG_SIZE / 2];

		snprintf(tmp, sizeof(tmp), "%s", g_msg);
		if (WTERMSIG(status) == SIGALRM)
			snprintf(g_msg, MSG_SIZE, "timeout after %d s%s%s", timeout,
				 tmp[0] ? "; " : "", tmp);
		else
			snprintf(g_msg, MSG_SIZE, "killed by signal %d (%s)", WTERMSIG(status),
				 strsignal(WTERMSIG(status)));
		return 1;
	}
	snprintf(g_msg, MSG_SIZE, "unexpected wait status %#x", status);
	return 1;
}

int harness_main(int argc, char **argv, const struct test *table, int count)
{
	const char *only = NULL, *fam = NULL, *env;
	bool list = false;
	int i, n = 0, passed = 0, failed = 0, skipped = 0;

	tests = table;
	ntests = count;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--family") && i + 1 < argc) {
			fam = argv[++i];
		} else if (!strcmp(a, "--expect-mode") && i + 1 < argc) {
			const char *m = argv[++i];

			if (!strcmp(m, "native"))
				g_expect_mode = SCI_MODE_NATIVE;
			else if (!strcmp(m, "sci"))
				g_expect_mode = SCI_MODE_SCI;
			else if (!strcmp(m, "any"))
				g_expect_mode = MODE_ANY;
			else
				usage(argv[0]);
		} else if (!strcmp(a, "--only") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(a, "--skip") && i + 1 < argc) {
			g_skip = argv[++i];
		} else if (!strcmp(a, "--port-base") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 0);

			if (*end || v < 1024 || v > 65535 - 4 * ntests)
				usage(argv[0]);
			g_port_base = (int)v;
		} else if (!strcmp(a, "--list")) {
			list = true;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			g_verbose = 1;
		} else {
			usage(argv[0]);
		}
	}
	if (list) {
		for (i = 0; i < ntests; i++)
			if (selected(tests[i].name, only))
				printf("%s\n", tests[i].name);
		return 0;
	}
	if (!fam)
		usage(argv[0]);
	if (!strcmp(fam, "inet")) {
		g_family = FAM_INET;
		env = getenv("SCI_EXPECT_SCI");
		g_expect_sci = env && !strcmp(env, "1");
	} else if (!strcmp(fam, "sci")) {
		g_family = FAM_SCI;
		g_expect_sci = true;
	} else {
		usage(argv[0]);
	}
	if (g_expect_sci) {
		g_sci_family = read_sci_family();
		if (g_sci_family < 0) {
			printf("Bail out! cannot read the AF_SCI family number from %s "
			       "(is af_sci loaded?)\n", AF_SCI_FAMILY_PATH);
			return 1;
		}
	}
	g_msg = mmap(NULL, MSG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_msg == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# sock_semantics: family %s, sockets under test %s", fam,
	       g_expect_sci ? "AF_SCI" : "AF_INET/AF_INET6");
	if (g_expect_sci)
		printf(" (family %d, expect mode %s)", g_sci_family,
		       g_expect_mode == MODE_ANY ? "any" :
		       g_expect_mode == SCI_MODE_SCI ? "sci" : "native");
	printf("\n");
	for (i = 0; i < ntests; i++)
		if (selected(tests[i].name, only))
			n++;
	printf("1..%d\n", n);
	n = 0;
	for (i = 0; i < ntests; i++) {
		double t0;
		int r;

		if (!selected(tests[i].name, only))
			continue;
		n++;
		t0 = now();
		r = run_one(i);
		if (r == 0) {
			passed++;
			printf("ok %d - %s\n", n, tests[i].name);
		} else if (r == 2) {
			skipped++;
			printf("ok %d - %s # SKIP %s\n", n, tests[i].name, g_msg);
		} else {
			failed++;
			printf("not ok %d - %s: %s\n", n, tests[i].name, g_msg);
		}
		if (g_verbose)
			printf("#   %.3f s\n", now() - t0);
	}
	if (skipped)
		printf("# %d skipped\n", skipped);
	printf("# %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* SCI_INFO mode of an AF_SCI socket (-1 for any other). */
int sci_mode_of(int fd)
{
	struct sci_info info;
	socklen_t len = sizeof(info);

	if (getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len) < 0)
		return -1;
	return (int)info.mode;
}

/* fd's /proc/self/fdinfo file, open for reading (the test fails if it cannot be). */
FILE *open_fdinfo(int fd)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		FAIL("%s: %s", path, ename(errno));
	return f;
}

/*
 * The number after `word` on fd's "/proc/self/fdinfo" line starting with `key`
 * ("sci-datagrams", "sent"): -1 when there is none.
 */
long fdinfo_field(int fd, const char *key, const char *word)
{
	char line[256];
	long v = -1;
	FILE *f = open_fdinfo(fd);

	while (fgets(line, sizeof(line), f)) {
		char *at;

		if (strncmp(line, key, strlen(key)) || line[strlen(key)] != ':')
			continue;
		at = strstr(line, word);
		if (at)
			v = strtol(at + strlen(word), NULL, 10);
	}
	fclose(f);
	return v;
}
