// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: stream-socket semantics suite for AF_SCI.
 *
 * Every assertion states what Linux TCP does; run with --family inet on a plain
 * kernel to see them all pass against TCP itself.  With --family sci the sockets
 * under test are AF_SCI sockets (family number read from AF_SCI_FAMILY_PATH);
 * with --family inet under an LD_PRELOAD shim that rewrites AF_INET stream
 * sockets, set SCI_EXPECT_SCI=1 so that every socket is checked to really be
 * AF_SCI.
 *
 * Each test runs in its own forked child (own process group) with an alarm()
 * timeout.  Output is TAP-like: "ok N - name", "not ok N - name: reason".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/af_sci.h>

/* ------------------------------------------------------------------------- */
/* Configuration                                                              */

enum { FAM_INET, FAM_SCI };
enum { MODE_ANY = -1 };

static int g_family = FAM_INET;		/* --family */
static int g_sci_family = -1;		/* AF_SCI family number, if known */
static bool g_expect_sci;		/* sockets under test must be AF_SCI */
static int g_expect_mode = MODE_ANY;	/* --expect-mode */
static int g_mode_override = -2;	/* per-check override (mixed tests) */
static int g_port_base = 20000;
static int g_verbose;
static int g_test_index;		/* index in the test table: fixed ports */
static char *g_msg;			/* shared with the parent: failure reason */

#define MSG_SIZE 4096
#define SKIP_EXIT 77

/* ------------------------------------------------------------------------- */
/* Errno / poll names                                                         */

static const char *ename(int e)
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

static const char *pollnames(int ev)
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

static void __attribute__((noreturn, format(printf, 3, 4)))
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

#define FAIL(...) finish(1, __LINE__, __VA_ARGS__)
#define SKIP(...) finish(SKIP_EXIT, 0, __VA_ARGS__)
#define CHECK(c, ...) do { if (!(c)) FAIL(__VA_ARGS__); } while (0)

/* Run a call that must succeed; evaluates to its (long) result. */
#define SYS(expr) ({							\
	long _r = (long)(expr);						\
	if (_r < 0)							\
		FAIL("%s: %s", #expr, ename(errno));			\
	_r; })

/* Run a call that must fail with errno `err`. */
#define EXPECT_ERR(expr, err) do {					\
	errno = 0;							\
	long _r = (long)(expr);						\
	int _e = errno;							\
	if (_r != -1)							\
		FAIL("%s: expected %s, got success (%ld)", #expr,	\
		     ename(err), _r);					\
	if (_e != (err))						\
		FAIL("%s: expected %s, got %s", #expr, ename(err),	\
		     ename(_e));					\
} while (0)

#define EXPECT_EQ(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a != _b)							\
		FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b); \
} while (0)

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
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

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static const char *afname(int af)
{
	return af == AF_INET ? "v4" : af == AF_INET6 ? "v6" : "?";
}

static socklen_t mkaddr(int af, uint16_t port, struct sockaddr_storage *ss)
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

static uint16_t ss_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static const char *ss_str(const struct sockaddr_storage *ss)
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

static uint16_t local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	SYS(getsockname(fd, (struct sockaddr *)&ss, &len));
	return ss_port(&ss);
}

/* A port reserved for this test: --port-base + 4 * table index + k. */
static uint16_t fixed_port(int k)
{
	return (uint16_t)(g_port_base + g_test_index * 4 + k);
}

/* ------------------------------------------------------------------------- */
/* Sockets under test                                                         */

static int getint(int fd, int level, int opt)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, opt, &v, &len) < 0)
		FAIL("getsockopt(%d, %d): %s", level, opt, ename(errno));
	CHECK(len == sizeof(v), "getsockopt(%d, %d) len %u", level, opt, len);
	return v;
}

static void setint(int fd, int level, int opt, int v)
{
	if (setsockopt(fd, level, opt, &v, sizeof(v)) < 0)
		FAIL("setsockopt(%d, %d, %d): %s", level, opt, v, ename(errno));
}

/*
 * Assert that fd is a socket under test of the expected domain.  When AF_SCI
 * is expected, SCI_INFO must work and report the expected mode; native_af
 * (if non-zero) and state (if >= 0) are checked too.
 */
static void check_sock_at(int line, int fd, int af, int state, int native_af)
{
	int want = g_expect_sci ? g_sci_family : af;
	int dom = getint(fd, SOL_SOCKET, SO_DOMAIN);
	struct sci_info info;
	socklen_t len = sizeof(info);
	int mode = g_mode_override != -2 ? g_mode_override : g_expect_mode;

	if (dom != want)
		finish(1, line, "socket under test has SO_DOMAIN %d, expected %d (%s)",
		       dom, want, g_expect_sci ? "sci" : "inet");
	if (getint(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM)
		finish(1, line, "SO_TYPE is not SOCK_STREAM");
	if (!g_expect_sci)
		return;
	memset(&info, 0xa5, sizeof(info));
	if (getsockopt(fd, SOL_SCI, SCI_INFO, &info, &len) < 0)
		finish(1, line, "getsockopt(SOL_SCI, SCI_INFO): %s", ename(errno));
	if (len != sizeof(info))
		finish(1, line, "SCI_INFO len %u, expected %zu", len, sizeof(info));
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
#define check_sock(fd, af, state, native) check_sock_at(__LINE__, fd, af, state, native)

/* The one place where sockets under test are created. */
static int ut_socket_flags(int af, int flags)
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

static int ut_socket(int af)
{
	return ut_socket_flags(af, 0);
}

/* Plain TCP sockets that an LD_PRELOAD shim cannot rewrite. */
static int tcp_socket(int af)
{
	int fd = (int)syscall(SYS_socket, af, SOCK_STREAM, 0);

	if (fd < 0)
		FAIL("SYS_socket(%d, SOCK_STREAM): %s", af, ename(errno));
	CHECK(getint(fd, SOL_SOCKET, SO_DOMAIN) == af, "plain TCP socket has wrong SO_DOMAIN");
	return fd;
}

static void bind_lo(int fd, int af, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(af, port, &ss);

	if (bind(fd, (struct sockaddr *)&ss, len) < 0)
		FAIL("bind(%s port %u): %s", afname(af), port, ename(errno));
}

static void connect_lo(int fd, int af, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(af, port, &ss);

	if (connect(fd, (struct sockaddr *)&ss, len) < 0)
		FAIL("connect(%s port %u): %s", afname(af), port, ename(errno));
}

/* Listening socket under test on loopback; port 0 picks one. */
static int ut_listener(int af, uint16_t *port, int backlog)
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

static int ut_connect(int af, uint16_t port)
{
	int fd = ut_socket(af);

	connect_lo(fd, af, port);
	check_sock(fd, af, TCP_ESTABLISHED, af);
	return fd;
}

static int ut_accept(int lfd, int af)
{
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		FAIL("accept: %s", ename(errno));
	check_sock(fd, af, -1, af);
	return fd;
}

/* A connected pair of sockets under test (client, server). */
static void ut_pair(int af, int *c, int *s)
{
	uint16_t port = 0;
	int l = ut_listener(af, &port, 16);

	*c = ut_connect(af, port);
	*s = ut_accept(l, af);
	close(l);
}

/* ------------------------------------------------------------------------- */
/* I/O helpers                                                                */

static void write_all(int fd, const void *buf, size_t len)
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

static void read_exact(int fd, void *buf, size_t len)
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

/* Every event poll can report for a stream socket (so exact masks can be checked). */
#define ALLEV (POLLIN | POLLRDNORM | POLLRDBAND | POLLPRI | POLLOUT | POLLWRNORM | POLLWRBAND | POLLRDHUP)

static int poll1(int fd, short events, int timeout_ms)
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
static int wait_for(int fd, short events)
{
	int rev = poll1(fd, events, 10000);

	if (!(rev & events))
		FAIL("poll: %s never reported (revents %s)", pollnames(events), pollnames(rev));
	return rev;
}

static int inq(int fd)
{
	int v = -1;

	SYS(ioctl(fd, FIONREAD, &v));
	return v;
}

static int outq(int fd)
{
	int v = -1;

	SYS(ioctl(fd, SIOCOUTQ, &v));
	return v;
}

/* Wait (up to 10 s) until FIONREAD reaches n. */
static void wait_inq(int fd, int n)
{
	double end = now() + 10;

	while (inq(fd) < n) {
		if (now() > end)
			FAIL("FIONREAD stays at %d, waiting for %d", inq(fd), n);
		poll1(fd, POLLIN, 10);
		msleep(1);
	}
}

static void set_nonblock(int fd, bool on)
{
	int fl = SYS(fcntl(fd, F_GETFL));

	SYS(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK));
}

static void fill_pattern(char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

/* Round trip: a -> b then b -> a, `len` bytes each way. */
static void echo_check(int a, int b, size_t len, unsigned seed)
{
	char *out = malloc(len), *in = malloc(len);

	CHECK(out && in, "malloc");
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

static void *unmapped_page(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap: %s", ename(errno));
	return p;
}

static volatile sig_atomic_t g_sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	g_sigpipes++;
}

static void catch_sigpipe(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigpipe;
	sigaction(SIGPIPE, &sa, NULL);
	g_sigpipes = 0;
}

static void hard_close(int fd)
{
	struct linger lg = { 1, 0 };

	SYS(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	SYS(close(fd));
}

/* A loopback port with nothing listening: reserved by a bound plain TCP socket. */
static int reserve_port(int af, uint16_t *port)
{
	int fd = tcp_socket(af);

	bind_lo(fd, af, 0);
	*port = local_port(fd);
	return fd;
}

/* ------------------------------------------------------------------------- */
/* Tests: connection basics                                                   */

static void echo_test(int af)
{
	uint16_t port = fixed_port(0);
	int l = ut_listener(af, &port, 16);
	int c = ut_connect(af, port);
	int s = ut_accept(l, af);

	CHECK(port == fixed_port(0), "listener port %u", port);
	echo_check(c, s, 1, 1);
	echo_check(c, s, 1000, 2);
	echo_check(c, s, 60000, 3);
	echo_check(s, c, 7, 4);
	/* A second connection through the same listener. */
	{
		int c2 = ut_connect(af, port), s2 = ut_accept(l, af);

		echo_check(c2, s2, 4096, 5);
		close(c2);
		close(s2);
	}
	close(c);
	close(s);
	close(l);
}

static void t_echo_v4(void) { echo_test(AF_INET); }
static void t_echo_v6(void) { echo_test(AF_INET6); }

/* Large transfer in both directions at once, FNV-1a checked at both ends. */
struct xfer {
	int fd;
	size_t total;
	uint64_t seed;
	uint32_t hash;
	size_t done;
	int err;
	const char *what;
};

static uint64_t xs64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static uint32_t fnv1a(uint32_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

#define XFER_CHUNK (256 * 1024)

static void *xfer_writer(void *arg)
{
	struct xfer *x = arg;
	uint64_t *buf = malloc(XFER_CHUNK);
	uint64_t rs = x->seed, ds = x->seed ^ 0x9e3779b97f4a7c15ull;

	x->hash = 2166136261u;
	if (!buf) {
		x->err = ENOMEM;
		return NULL;
	}
	while (x->done < x->total) {
		size_t n = xs64(&rs) % XFER_CHUNK + 1, off = 0;

		if (n > x->total - x->done)
			n = x->total - x->done;
		for (size_t i = 0; i < (n + 7) / 8; i++)
			buf[i] = xs64(&ds);
		x->hash = fnv1a(x->hash, (unsigned char *)buf, n);
		while (off < n) {
			ssize_t r = send(x->fd, (char *)buf + off, n - off, MSG_NOSIGNAL);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				x->err = r < 0 ? errno : EIO;
				x->what = "send";
				goto out;
			}
			off += r;
			x->done += r;
		}
	}
	if (shutdown(x->fd, SHUT_WR) < 0) {
		x->err = errno;
		x->what = "shutdown";
	}
out:
	free(buf);
	return NULL;
}

static void *xfer_reader(void *arg)
{
	struct xfer *x = arg;
	unsigned char *buf = malloc(XFER_CHUNK);
	uint64_t rs = x->seed;

	x->hash = 2166136261u;
	if (!buf) {
		x->err = ENOMEM;
		return NULL;
	}
	for (;;) {
		size_t want = xs64(&rs) % XFER_CHUNK + 1;
		ssize_t r = recv(x->fd, buf, want, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			x->err = errno;
			x->what = "recv";
			break;
		}
		if (r == 0)
			break;
		x->hash = fnv1a(x->hash, buf, r);
		x->done += r;
	}
	free(buf);
	return NULL;
}

static void t_large_transfer(void)
{
	const size_t total = 32u << 20;
	struct xfer x[4];
	pthread_t th[4];
	int c, s, i;

	ut_pair(AF_INET, &c, &s);
	memset(x, 0, sizeof(x));
	x[0] = (struct xfer){ .fd = c, .total = total, .seed = 0x1234567 };	/* c -> s */
	x[1] = (struct xfer){ .fd = s, .seed = 0x7654321 };			/* reads c -> s */
	x[2] = (struct xfer){ .fd = s, .total = total, .seed = 0xabcdef1 };	/* s -> c */
	x[3] = (struct xfer){ .fd = c, .seed = 0x1fedcba };			/* reads s -> c */
	for (i = 0; i < 4; i++)
		CHECK(!pthread_create(&th[i], NULL, i % 2 ? xfer_reader : xfer_writer, &x[i]),
		      "pthread_create");
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 4; i++)
		CHECK(!x[i].err, "thread %d: %s: %s", i, x[i].what ? x[i].what : "?",
		      ename(x[i].err));
	CHECK(x[1].done == total, "c->s: received %zu of %zu bytes", x[1].done, total);
	CHECK(x[3].done == total, "s->c: received %zu of %zu bytes", x[3].done, total);
	CHECK(x[0].hash == x[1].hash, "c->s checksum mismatch %08x != %08x", x[0].hash, x[1].hash);
	CHECK(x[2].hash == x[3].hash, "s->c checksum mismatch %08x != %08x", x[2].hash, x[3].hash);
	note("fnv c->s %08x s->c %08x", x[0].hash, x[2].hash);
	close(c);
	close(s);
}

static void t_nonblock_connect(void)
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

static void t_nonblock_connect_refused(void)
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

static void t_connect_refused(void)
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

static void t_connect_twice(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: readiness                                                           */

static void t_poll_readiness(void)
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

static void t_poll_listen(void)
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

static void t_epoll_level(void)
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

static void t_epoll_edge(void)
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

static void t_epoll_rdhup(void)
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

static void t_select(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: shutdown                                                            */

static void t_shutdown_wr(void)
{
	const size_t len = 100000;
	char *out = malloc(len), *in = malloc(len + 1);
	int c, s;

	CHECK(out && in, "malloc");
	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, len, 3);
	write_all(c, out, len);
	SYS(shutdown(c, SHUT_WR));
	SYS(shutdown(c, SHUT_WR));	/* again: allowed */
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	read_exact(s, in, len);
	CHECK(!memcmp(in, out, len), "data mismatch before EOF");
	EXPECT_EQ(recv(s, in, len, 0), 0);
	EXPECT_EQ(recv(s, in, len, 0), 0);
	/* The reverse direction still works. */
	write_all(s, "reply", 5);
	read_exact(c, in, 5);
	CHECK(!memcmp(in, "reply", 5), "reverse data mismatch");
	SYS(shutdown(s, SHUT_WR));
	EXPECT_EQ(recv(c, in, 10, 0), 0);
	/* Both directions closed: c is in TIME_WAIT, i.e. closed: ENOTCONN. */
	EXPECT_ERR(shutdown(c, SHUT_WR), ENOTCONN);
	EXPECT_ERR(shutdown(s, SHUT_RDWR), ENOTCONN);
	free(out);
	free(in);
	close(c);
	close(s);
}

static void t_shutdown_rd(void)
{
	int c, s, rev;
	char buf[16];

	ut_pair(AF_INET, &c, &s);
	SYS(shutdown(s, SHUT_RD));
	/* Reads return EOF at once, even when non-blocking. */
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	EXPECT_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 0);
	rev = poll1(s, ALLEV, 0);
	CHECK(rev == (POLLIN | POLLRDNORM | POLLRDHUP | POLLOUT | POLLWRNORM),
	      "after SHUT_RD: revents %s", pollnames(rev));
	/* The peer can still send; Linux TCP still queues and delivers the data. */
	write_all(c, "late", 4);
	wait_inq(s, 4);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 4);
	CHECK(!memcmp(buf, "late", 4), "data mismatch");
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	/* Our direction is unaffected. */
	write_all(s, "out", 3);
	read_exact(c, buf, 3);
	close(c);
	close(s);
}

/* ------------------------------------------------------------------------- */
/* Tests: recv flags, non-blocking, timeouts                                  */

static void t_msg_peek(void)
{
	char out[100], a[200], b[200];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, sizeof(out), 11);
	write_all(c, out, sizeof(out));
	wait_inq(s, 100);
	EXPECT_EQ(recv(s, a, sizeof(a), MSG_PEEK), 100);
	EXPECT_EQ(recv(s, a, 10, MSG_PEEK), 10);
	EXPECT_EQ(inq(s), 100);
	EXPECT_EQ(recv(s, b, sizeof(b), 0), 100);
	CHECK(!memcmp(a, out, 10) && !memcmp(b, out, 100), "peeked/read bytes differ");
	EXPECT_ERR(recv(s, a, sizeof(a), MSG_PEEK | MSG_DONTWAIT), EAGAIN);
	/* Peek then partial read then peek again. */
	write_all(c, out, sizeof(out));
	wait_inq(s, 100);
	EXPECT_EQ(recv(s, b, 30, 0), 30);
	EXPECT_EQ(recv(s, a, sizeof(a), MSG_PEEK), 70);
	CHECK(!memcmp(a, out + 30, 70), "peek after partial read differs");
	EXPECT_EQ(recv(s, b, sizeof(b), 0), 70);
	close(c);
	close(s);
}

struct slow_sender {
	int fd, pieces, size, delay_ms;
	bool shut;
};

static void *slow_send(void *arg)
{
	struct slow_sender *ss = arg;
	char *buf = malloc(ss->size);

	for (int i = 0; i < ss->pieces; i++) {
		fill_pattern(buf, ss->size, i);
		msleep(ss->delay_ms);
		if (send(ss->fd, buf, ss->size, MSG_NOSIGNAL) != ss->size)
			break;
	}
	if (ss->shut)
		shutdown(ss->fd, SHUT_WR);
	free(buf);
	return NULL;
}

static void t_msg_waitall(void)
{
	struct slow_sender snd = { .pieces = 4, .size = 1000, .delay_ms = 30 };
	char buf[5000], want[1000];
	pthread_t th;
	int c, s;

	ut_pair(AF_INET, &c, &s);
	snd.fd = c;
	CHECK(!pthread_create(&th, NULL, slow_send, &snd), "pthread_create");
	EXPECT_EQ(recv(s, buf, 4000, MSG_WAITALL), 4000);
	pthread_join(th, NULL);
	for (int i = 0; i < 4; i++) {
		fill_pattern(want, 1000, i);
		CHECK(!memcmp(buf + i * 1000, want, 1000), "piece %d differs", i);
	}
	/* MSG_WAITALL stops short at EOF. */
	snd.pieces = 1;
	snd.size = 100;
	snd.shut = true;
	CHECK(!pthread_create(&th, NULL, slow_send, &snd), "pthread_create");
	EXPECT_EQ(recv(s, buf, 1000, MSG_WAITALL), 100);
	pthread_join(th, NULL);
	EXPECT_EQ(recv(s, buf, 1000, MSG_WAITALL), 0);
	close(c);
	close(s);
}

static void t_msg_dontwait(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	EXPECT_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	CHECK(!(fcntl(s, F_GETFL) & O_NONBLOCK), "MSG_DONTWAIT changed the file flags");
	EXPECT_EQ(send(c, "hi", 2, MSG_DONTWAIT), 2);
	wait_inq(s, 2);
	EXPECT_EQ(recv(s, buf, sizeof(buf), MSG_DONTWAIT), 2);
	EXPECT_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	close(c);
	close(s);
}

static void t_nonblock_recv_accept(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s, fd;
	char buf[8];

	set_nonblock(l, true);
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	EXPECT_ERR(accept4(l, NULL, NULL, SOCK_NONBLOCK), EAGAIN);
	c = ut_connect(AF_INET, port);
	wait_for(l, POLLIN);
	s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(s >= 0, "accept4: %s", ename(errno));
	check_sock(s, AF_INET, TCP_ESTABLISHED, AF_INET);
	CHECK(fcntl(s, F_GETFL) & O_NONBLOCK, "accept4(SOCK_NONBLOCK): no O_NONBLOCK");
	CHECK(fcntl(s, F_GETFD) & FD_CLOEXEC, "accept4(SOCK_CLOEXEC): no FD_CLOEXEC");
	/* The accepted socket does not inherit the listener's O_NONBLOCK. */
	fd = ut_connect(AF_INET, port);
	wait_for(l, POLLIN);
	{
		int s2 = ut_accept(l, AF_INET);

		CHECK(!(fcntl(s2, F_GETFL) & O_NONBLOCK), "accepted socket inherited O_NONBLOCK");
		close(s2);
	}
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	EXPECT_ERR(read(s, buf, sizeof(buf)), EAGAIN);
	set_nonblock(c, true);
	EXPECT_ERR(recv(c, buf, sizeof(buf), 0), EAGAIN);
	write_all(c, "z", 1);
	wait_for(s, POLLIN);
	EXPECT_EQ(read(s, buf, sizeof(buf)), 1);
	close(fd);
	close(c);
	close(s);
	/* SOCK_NONBLOCK | SOCK_CLOEXEC at creation. */
	fd = ut_socket_flags(AF_INET, SOCK_NONBLOCK | SOCK_CLOEXEC);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK, "socket(SOCK_NONBLOCK): no O_NONBLOCK");
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "socket(SOCK_CLOEXEC): no FD_CLOEXEC");
	close(fd);
	close(l);
}

static void set_timeo(int fd, int opt, long usec)
{
	struct timeval tv = { usec / 1000000, usec % 1000000 };

	SYS(setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)));
}

static long get_timeo(int fd, int opt)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	SYS(getsockopt(fd, SOL_SOCKET, opt, &tv, &len));
	EXPECT_EQ(len, sizeof(tv));
	return tv.tv_sec * 1000000L + tv.tv_usec;
}

static void t_so_rcvtimeo(void)
{
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s;
	char buf[8];
	double t0, dt;

	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	EXPECT_EQ(get_timeo(s, SO_RCVTIMEO), 0);
	set_timeo(s, SO_RCVTIMEO, 300000);
	EXPECT_EQ(get_timeo(s, SO_RCVTIMEO), 300000);
	t0 = now();
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	dt = now() - t0;
	CHECK(dt >= 0.28 && dt < 10, "recv timed out after %.3f s, expected 0.3 s", dt);
	/* Data before the timeout is returned normally. */
	write_all(c, "x", 1);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 1);
	/* accept() honours SO_RCVTIMEO of the listener. */
	set_timeo(l, SO_RCVTIMEO, 200000);
	t0 = now();
	EXPECT_ERR(accept(l, NULL, NULL), EAGAIN);
	dt = now() - t0;
	CHECK(dt >= 0.18 && dt < 10, "accept timed out after %.3f s, expected 0.2 s", dt);
	/* Clearing it. */
	set_timeo(s, SO_RCVTIMEO, 0);
	EXPECT_EQ(get_timeo(s, SO_RCVTIMEO), 0);
	close(c);
	close(s);
	close(l);
}

static void t_so_sndtimeo(void)
{
	static char buf[65536];
	int c, s, i;
	double t0 = 0, dt = 0;
	ssize_t n = 0;

	ut_pair(AF_INET, &c, &s);
	EXPECT_EQ(get_timeo(c, SO_SNDTIMEO), 0);
	set_timeo(c, SO_SNDTIMEO, 1500000);
	EXPECT_EQ(get_timeo(c, SO_SNDTIMEO), 1500000);
	/* Multiples of 20 ms are exact in jiffies for HZ 100, 250, 300 and 1000. */
	set_timeo(c, SO_SNDTIMEO, 200000);
	EXPECT_EQ(get_timeo(c, SO_SNDTIMEO), 200000);
	/* Small buffers so that the pipe fills quickly; the peer never reads. */
	setint(c, SOL_SOCKET, SO_SNDBUF, 32768);
	setint(s, SOL_SOCKET, SO_RCVBUF, 32768);
	for (i = 0; i < 1000; i++) {
		t0 = now();
		n = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
		dt = now() - t0;
		if (n < 0)
			break;
	}
	CHECK(n < 0, "send never blocked (%d sends)", i);
	CHECK(errno == EAGAIN, "blocked send failed with %s, expected EAGAIN", ename(errno));
	CHECK(dt >= 0.18 && dt < 10, "send timed out after %.3f s, expected 0.2 s", dt);
	close(c);
	close(s);
}

/* ------------------------------------------------------------------------- */
/* Tests: peer close / reset, SIGPIPE                                         */

/* Send single bytes until one fails; returns its errno. */
static int send_until_error(int fd, int flags, int *sent)
{
	*sent = 0;
	for (int i = 0; i < 1000; i++) {
		if (send(fd, "x", 1, flags) < 0)
			return errno;
		++*sent;
		msleep(2);
	}
	FAIL("send kept succeeding after the peer closed");
}

static void t_sigpipe_after_close(void)
{
	int c, s, e, sent;
	char buf[4];

	catch_sigpipe();
	ut_pair(AF_INET, &c, &s);
	SYS(close(s));
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	/* The first write goes out (the peer answers with RST), later ones fail. */
	e = send_until_error(c, 0, &sent);
	CHECK(sent >= 1, "the first send after the peer's FIN failed (%s)", ename(e));
	CHECK(e == EPIPE, "send failed with %s, expected EPIPE", ename(e));
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_ERR(send(c, "x", 1, 0), EPIPE);
	EXPECT_EQ(g_sigpipes, 2);
	EXPECT_ERR(write(c, "x", 1), EPIPE);
	EXPECT_EQ(g_sigpipes, 3);
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_EQ(g_sigpipes, 3);
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	close(c);
}

static void t_sigpipe_after_reset(void)
{
	int c, s, rev;
	char buf[4];

	catch_sigpipe();
	ut_pair(AF_INET, &c, &s);
	hard_close(s);
	wait_for(c, POLLERR);
	rev = poll1(c, ALLEV, 0);
	CHECK(rev == (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLERR | POLLHUP | POLLRDHUP),
	      "after peer reset: revents %s", pollnames(rev));
	/* The pending error is reported first (no signal), then EPIPE with SIGPIPE. */
	EXPECT_ERR(send(c, "x", 1, 0), ECONNRESET);
	EXPECT_EQ(g_sigpipes, 0);
	EXPECT_ERR(send(c, "x", 1, 0), EPIPE);
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	EXPECT_EQ(g_sigpipes, 1);
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	close(c);
}

static void t_msg_nosignal(void)
{
	int c, s, e, sent;
	char buf[4];

	/* Default disposition: a SIGPIPE would kill the test. */
	signal(SIGPIPE, SIG_DFL);
	ut_pair(AF_INET, &c, &s);
	SYS(close(s));
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	e = send_until_error(c, MSG_NOSIGNAL, &sent);
	CHECK(e == EPIPE, "send failed with %s, expected EPIPE", ename(e));
	EXPECT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	close(c);
}

static void t_fionread_siocoutq(void)
{
	static char buf[65536];
	uint16_t port = 0;
	int l = ut_listener(AF_INET, &port, 16), c, s, v, i;
	double end;

	c = ut_connect(AF_INET, port);
	s = ut_accept(l, AF_INET);
	EXPECT_EQ(inq(s), 0);
	EXPECT_EQ(outq(c), 0);
	/* On a listener both are EINVAL. */
	EXPECT_ERR(ioctl(l, FIONREAD, &v), EINVAL);
	EXPECT_ERR(ioctl(l, SIOCOUTQ, &v), EINVAL);
	write_all(c, buf, 1234);
	wait_inq(s, 1234);
	EXPECT_EQ(inq(s), 1234);
	EXPECT_EQ(recv(s, buf, 234, 0), 234);
	EXPECT_EQ(inq(s), 1000);
	for (end = now() + 10; outq(c) != 0 && now() < end; msleep(1))
		;
	EXPECT_EQ(outq(c), 0);
	/* Fill the path: unacknowledged data shows in SIOCOUTQ. */
	setint(s, SOL_SOCKET, SO_RCVBUF, 32768);
	set_nonblock(c, true);
	for (i = 0; i < 10000 && send(c, buf, sizeof(buf), 0) > 0; i++)
		;
	CHECK(errno == EAGAIN, "filling: %s", ename(errno));
	v = outq(c);
	CHECK(v > 0, "SIOCOUTQ %d with a full pipe", v);
	/* Drain everything: SIOCOUTQ returns to 0. */
	set_nonblock(s, true);
	for (end = now() + 10; now() < end;) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);

		if (n < 0 && errno != EAGAIN)
			FAIL("drain: %s", ename(errno));
		if (n < 0 && outq(c) == 0 && inq(s) == 0)
			break;
		if (n < 0)
			poll1(s, POLLIN, 10);
	}
	EXPECT_EQ(outq(c), 0);
	EXPECT_EQ(inq(s), 0);
	/* FIN does not count in FIONREAD. */
	set_nonblock(c, false);
	write_all(c, "12345", 5);
	SYS(shutdown(c, SHUT_WR));
	wait_for(s, POLLRDHUP);
	EXPECT_EQ(inq(s), 5);
	close(c);
	close(s);
	close(l);
}

static void t_peer_close_eof(void)
{
	char out[100], in[200];
	int c, s;

	ut_pair(AF_INET, &c, &s);
	fill_pattern(out, sizeof(out), 5);
	write_all(c, out, sizeof(out));
	SYS(close(c));
	read_exact(s, in, sizeof(out));
	CHECK(!memcmp(in, out, sizeof(out)), "data mismatch");
	EXPECT_EQ(recv(s, in, sizeof(in), 0), 0);
	EXPECT_EQ(recv(s, in, sizeof(in), 0), 0);
	EXPECT_EQ(read(s, in, sizeof(in)), 0);
	close(s);
}

static void t_peer_reset(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	hard_close(c);
	wait_for(s, POLLERR);
	EXPECT_ERR(recv(s, buf, sizeof(buf), 0), ECONNRESET);
	/* The error is reported once; then the socket reads as closed. */
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ERROR), 0);
	close(s);
	/* SO_ERROR reports (and clears) the reset too. */
	ut_pair(AF_INET, &c, &s);
	hard_close(c);
	wait_for(s, POLLERR);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ERROR), ECONNRESET);
	EXPECT_EQ(getint(s, SOL_SOCKET, SO_ERROR), 0);
	EXPECT_EQ(recv(s, buf, sizeof(buf), 0), 0);
	close(s);
}

static void t_close_unread_rst(void)
{
	int c, s;
	char buf[8];

	ut_pair(AF_INET, &c, &s);
	write_all(c, "unread data", 11);
	wait_inq(s, 11);
	SYS(close(s));		/* unread data: RST instead of FIN */
	wait_for(c, POLLERR);
	EXPECT_ERR(recv(c, buf, sizeof(buf), 0), ECONNRESET);
	EXPECT_EQ(recv(c, buf, sizeof(buf), 0), 0);
	close(c);
}

/* ------------------------------------------------------------------------- */
/* Tests: addresses                                                           */

static void get_name(int fd, bool peer, struct sockaddr_storage *ss, int af)
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

static void t_names_v4(void)
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

static void t_names_v6(void)
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

static void t_names_truncated(void)
{
	truncated_test(AF_INET);
	truncated_test(AF_INET6);
}

static void t_v6_dualstack(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: options                                                             */

static void t_sockopt_tcp(void)
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

static void t_sockopt_tcp_info(void)
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

static void t_sockopt_keepalive(void)
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

static void t_sockopt_socket(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: processes and descriptors                                           */

static void t_fork_inherit(void)
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

static void t_dup(void)
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

static void t_many_concurrent(void)
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

static void t_mixed_tcp_client(void)
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

static void t_mixed_tcp_server(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: binding and listening                                               */

static void t_reuseaddr_rebind(void)
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

static void t_bind_eaddrinuse(void)
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

static void t_listen_backlog_order(void)
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

static void t_listen_autobind(void)
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

static void t_shutdown_listener(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: bad input                                                           */

static void t_bad_addrlen_bind(void)
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

static void t_bad_addrlen_connect(void)
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

static void t_bad_family(void)
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

static void t_connect_af_unspec(void)
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

static void t_efault_send_recv(void)
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

static void t_efault_msg(void)
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

static void t_efault_addr(void)
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

static void t_bad_getsockopt(void)
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

static void t_bad_setsockopt(void)
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

static void t_accept_not_listening(void)
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

static void t_listen_connected(void)
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

static void t_send_recv_unconnected(void)
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

static void t_sendto_connected(void)
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

static void t_recv_oob_no_urgent(void)
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

static void t_shutdown_bad(void)
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

/* ------------------------------------------------------------------------- */
/* Tests: AF_SCI only                                                         */

static void t_sci_dgram(void)
{
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_DGRAM, 0), ESOCKTNOSUPPORT);
	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_SEQPACKET, 0), ESOCKTNOSUPPORT);
}

static void t_sci_udp_proto(void)
{
	int fd;

	EXPECT_ERR(syscall(SYS_socket, g_sci_family, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
	fd = (int)syscall(SYS_socket, g_sci_family, SOCK_STREAM, IPPROTO_TCP);
	CHECK(fd >= 0, "socket(F, SOCK_STREAM, IPPROTO_TCP): %s", ename(errno));
	EXPECT_EQ(getint(fd, SOL_SOCKET, SO_PROTOCOL), IPPROTO_TCP);
	close(fd);
}

static void t_sci_info_short(void)
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

static void t_sci_info_set(void)
{
	struct sci_info info = { 0 };
	int fd = ut_socket(AF_INET);

	EXPECT_ERR(setsockopt(fd, SOL_SCI, SCI_INFO, &info, sizeof(info)), ENOPROTOOPT);
	close(fd);
}

/* ------------------------------------------------------------------------- */
/* Test table                                                                 */

struct test {
	const char *name;
	void (*fn)(void);
	int timeout;		/* seconds; 0: default */
	bool sci_only;		/* skipped unless AF_SCI is expected */
};

static const struct test tests[] = {
	{ "echo_v4", t_echo_v4, 0, false },
	{ "echo_v6", t_echo_v6, 0, false },
	{ "large_transfer_bidir", t_large_transfer, 240, false },
	{ "nonblock_connect", t_nonblock_connect, 0, false },
	{ "nonblock_connect_refused", t_nonblock_connect_refused, 0, false },
	{ "connect_refused", t_connect_refused, 0, false },
	{ "connect_twice_eisconn", t_connect_twice, 0, false },
	{ "poll_readiness", t_poll_readiness, 0, false },
	{ "poll_listen_pending", t_poll_listen, 0, false },
	{ "epoll_level", t_epoll_level, 0, false },
	{ "epoll_edge", t_epoll_edge, 0, false },
	{ "epoll_rdhup", t_epoll_rdhup, 0, false },
	{ "select_readiness", t_select, 0, false },
	{ "shutdown_wr", t_shutdown_wr, 0, false },
	{ "shutdown_rd", t_shutdown_rd, 0, false },
	{ "msg_peek", t_msg_peek, 0, false },
	{ "msg_waitall", t_msg_waitall, 0, false },
	{ "msg_dontwait", t_msg_dontwait, 0, false },
	{ "nonblock_recv_accept", t_nonblock_recv_accept, 0, false },
	{ "so_rcvtimeo", t_so_rcvtimeo, 0, false },
	{ "so_sndtimeo", t_so_sndtimeo, 0, false },
	{ "sigpipe_after_close", t_sigpipe_after_close, 0, false },
	{ "sigpipe_after_reset", t_sigpipe_after_reset, 0, false },
	{ "msg_nosignal", t_msg_nosignal, 0, false },
	{ "fionread_siocoutq", t_fionread_siocoutq, 0, false },
	{ "peer_close_eof", t_peer_close_eof, 0, false },
	{ "peer_reset_econnreset", t_peer_reset, 0, false },
	{ "close_unread_rst", t_close_unread_rst, 0, false },
	{ "names_v4", t_names_v4, 0, false },
	{ "names_v6", t_names_v6, 0, false },
	{ "names_truncated", t_names_truncated, 0, false },
	{ "v6_dualstack_v4_client", t_v6_dualstack, 0, false },
	{ "sockopt_tcp", t_sockopt_tcp, 0, false },
	{ "sockopt_tcp_info", t_sockopt_tcp_info, 0, false },
	{ "sockopt_keepalive", t_sockopt_keepalive, 0, false },
	{ "sockopt_socket", t_sockopt_socket, 0, false },
	{ "fork_inherit", t_fork_inherit, 0, false },
	{ "dup_after_close", t_dup, 0, false },
	{ "many_concurrent", t_many_concurrent, 60, false },
	{ "mixed_tcp_client", t_mixed_tcp_client, 0, false },
	{ "mixed_tcp_server", t_mixed_tcp_server, 0, false },
	{ "reuseaddr_rebind", t_reuseaddr_rebind, 0, false },
	{ "bind_eaddrinuse", t_bind_eaddrinuse, 0, false },
	{ "listen_backlog_order", t_listen_backlog_order, 0, false },
	{ "listen_autobind", t_listen_autobind, 0, false },
	{ "shutdown_listener", t_shutdown_listener, 0, false },
	{ "bad_addrlen_bind", t_bad_addrlen_bind, 0, false },
	{ "bad_addrlen_connect", t_bad_addrlen_connect, 0, false },
	{ "bad_family", t_bad_family, 0, false },
	{ "connect_af_unspec", t_connect_af_unspec, 0, false },
	{ "efault_send_recv", t_efault_send_recv, 0, false },
	{ "efault_sendmsg_recvmsg", t_efault_msg, 0, false },
	{ "efault_addr_ptrs", t_efault_addr, 0, false },
	{ "bad_getsockopt", t_bad_getsockopt, 0, false },
	{ "bad_setsockopt", t_bad_setsockopt, 0, false },
	{ "accept_not_listening", t_accept_not_listening, 0, false },
	{ "listen_connected", t_listen_connected, 0, false },
	{ "send_recv_unconnected", t_send_recv_unconnected, 0, false },
	{ "sendto_connected", t_sendto_connected, 0, false },
	{ "recv_oob_no_urgent", t_recv_oob_no_urgent, 0, false },
	{ "shutdown_bad", t_shutdown_bad, 0, false },
	{ "sci_dgram_unsupported", t_sci_dgram, 0, true },
	{ "sci_udp_proto_unsupported", t_sci_udp_proto, 0, true },
	{ "sci_info_short_optlen", t_sci_info_short, 0, true },
	{ "sci_info_set_enoprotoopt", t_sci_info_set, 0, true },
	/* TABLE-END */
};

#define NTESTS (int)(sizeof(tests) / sizeof(tests[0]))

/* ------------------------------------------------------------------------- */
/* Runner                                                                     */

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

static bool selected(const char *name, const char *only)
{
	char buf[256], *save = NULL, *tok;

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

int main(int argc, char **argv)
{
	const char *only = NULL, *fam = NULL, *env;
	bool list = false;
	int i, n = 0, passed = 0, failed = 0, skipped = 0;

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
		} else if (!strcmp(a, "--port-base") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 0);

			if (*end || v < 1024 || v > 65535 - 4 * NTESTS)
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
		for (i = 0; i < NTESTS; i++)
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
	for (i = 0; i < NTESTS; i++)
		if (selected(tests[i].name, only))
			n++;
	printf("1..%d\n", n);
	n = 0;
	for (i = 0; i < NTESTS; i++) {
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
