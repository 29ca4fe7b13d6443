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
	check_sock(fd, af, TCP_CLOSE, 0);
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
	printf("# %d passed, %d failed%s", passed, failed, skipped ? "" : "\n");
	if (skipped)
		printf(" (%d skipped)\n", skipped);
	return failed ? 1 : 0;
}
