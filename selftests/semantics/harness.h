/* SPDX-License-Identifier: GPL-2.0 */
/*
 * harness: the framework of the sock_semantics suite.
 *
 * Configuration globals (set from the command line), failure reporting
 * (FAIL/SKIP/CHECK/SYS/EXPECT_*), the sockets under test (ut_*), plain TCP
 * sockets (tcp_socket), address and I/O helpers, and the TAP runner that forks
 * every test into its own process group with an alarm() timeout.
 *
 * Every .c file of the suite includes this header first.
 */
#ifndef SOCK_SEMANTICS_HARNESS_H
#define SOCK_SEMANTICS_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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
#include <sys/times.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/af_sci.h>

/* ------------------------------------------------------------------------- */
/* Configuration                                                              */

enum { FAM_INET, FAM_SCI };
enum { MODE_ANY = -1 };

extern int g_family;		/* --family */
extern int g_sci_family;	/* AF_SCI family number, if known */
extern bool g_expect_sci;	/* sockets under test must be AF_SCI */
extern int g_expect_mode;	/* --expect-mode */
extern int g_mode_override;	/* per-check override (mixed tests) */
extern int g_port_base;
extern int g_verbose;
extern int g_test_index;	/* index in the test table: fixed ports */
extern char *g_msg;		/* shared with the parent: failure reason */

#define MSG_SIZE 4096
#define SKIP_EXIT 77

/* ------------------------------------------------------------------------- */
/* Errno / poll names                                                         */

const char *ename(int e);
const char *pollnames(int ev);

/* ------------------------------------------------------------------------- */
/* Failure reporting (child side)                                             */

void __attribute__((noreturn, format(printf, 3, 4)))
finish(int code, int line, const char *fmt, ...);

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

void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------------- */
/* Time, addresses                                                            */

double now(void);
/*
 * A socket timeout (SO_RCVTIMEO, SO_SNDTIMEO) is judged by the kernel's own clock for
 * it: the kernel counts those timeouts in jiffies, and times(2) counts jiffies too (in
 * clock ticks). CLOCK_MONOTONIC alone would call an honoured timeout early on a TCG
 * guest whose jiffies lag: while the loaded host does not run the vCPU that advances
 * them, a timer set on the other vCPU is based on the stale count and fires early in
 * real time by the lag (seen: 57 ms and 114 ms of a 300 ms SO_RCVTIMEO, over plain TCP
 * after a fallback's handover and over SCI on the sanitizer kernel).
 */
struct moment {
	double mono;	/* CLOCK_MONOTONIC, s */
	double ticks;	/* times(2): jiffies, in s */
};
struct moment moment_now(void);
/*
 * Whether a call that began at `t0` and gave up on a timeout of `s` seconds honoured it:
 * at least `s` by jiffies (less one clock tick of rounding), and under 10 s by
 * CLOCK_MONOTONIC. `took` gets both elapsed times for the message.
 */
bool timeo_honoured(struct moment t0, double s, char *took, size_t len);
void msleep(int ms);
const char *afname(int af);
socklen_t mkaddr(int af, uint16_t port, struct sockaddr_storage *ss);
uint16_t ss_port(const struct sockaddr_storage *ss);
const char *ss_str(const struct sockaddr_storage *ss);
uint16_t local_port(int fd);
/* A port reserved for this test: --port-base + 4 * table index + k. */
uint16_t fixed_port(int k);
/* getsockname/getpeername into ss, checking length and family. */
void get_name(int fd, bool peer, struct sockaddr_storage *ss, int af);

/* ------------------------------------------------------------------------- */
/* Sockets under test                                                         */

int getint(int fd, int level, int opt);
void setint(int fd, int level, int opt, int v);
/*
 * Assert that fd is a socket under test of the expected domain.  When AF_SCI
 * is expected, SCI_INFO must work and report the expected mode; native_af
 * (if non-zero) and state (if >= 0) are checked too.
 */
void check_sock_at(int line, int fd, int af, int state, int native_af);
#define check_sock(fd, af, state, native) check_sock_at(__LINE__, fd, af, state, native)
/* The one place where sockets under test are created. */
int ut_socket_flags(int af, int flags);
int ut_socket(int af);
/* Datagram sockets under test (UDP, or AF_SCI SOCK_DGRAM), checked as ut_socket's. */
int ut_dgram_flags(int af, int flags);
int ut_dgram(int af);
/* Plain TCP sockets that an LD_PRELOAD shim cannot rewrite. */
int tcp_socket(int af);
void bind_lo(int fd, int af, uint16_t port);
void connect_lo(int fd, int af, uint16_t port);
/* Listening socket under test on loopback; port 0 picks one. */
int ut_listener(int af, uint16_t *port, int backlog);
int ut_connect(int af, uint16_t port);
int ut_accept(int lfd, int af);
/* A connected pair of sockets under test (client, server). */
void ut_pair(int af, int *c, int *s);

/* ------------------------------------------------------------------------- */
/* I/O helpers                                                                */

void write_all(int fd, const void *buf, size_t len);
void read_exact(int fd, void *buf, size_t len);

/* Every event poll can report for a stream socket (so exact masks can be checked). */
#define ALLEV (POLLIN | POLLRDNORM | POLLRDBAND | POLLPRI | POLLOUT | POLLWRNORM | POLLWRBAND | POLLRDHUP)

int poll1(int fd, short events, int timeout_ms);
/* Wait (up to 10 s) until poll reports any of `events`; returns revents. */
int wait_for(int fd, short events);
int inq(int fd);
int outq(int fd);
/* Wait (up to 10 s) until FIONREAD reaches n. */
void wait_inq(int fd, int n);
void set_nonblock(int fd, bool on);
void fill_pattern(char *buf, size_t len, unsigned seed);
/* Round trip: a -> b then b -> a, `len` bytes each way. */
void echo_check(int a, int b, size_t len, unsigned seed);
void *unmapped_page(void);

extern volatile sig_atomic_t g_sigpipes;
void catch_sigpipe(void);
void hard_close(int fd);
/* A loopback port with nothing listening: reserved by a bound plain TCP socket. */
int reserve_port(int af, uint16_t *port);

/* ------------------------------------------------------------------------- */
/* Runner                                                                     */

struct test {
	const char *name;
	void (*fn)(void);
	int timeout;		/* seconds; 0: default */
	bool sci_only;		/* skipped unless AF_SCI is expected */
};

/* Parse the command line, run (or --list) the tests; returns the exit code. */
/* SCI_INFO mode of an AF_SCI socket (-1 for any other). */
int sci_mode_of(int fd);
/* fd's /proc/self/fdinfo file, open for reading (the test fails if it cannot be). */
FILE *open_fdinfo(int fd);
/*
 * The number after `word` on fd's "/proc/self/fdinfo" line starting with `key`
 * ("sci-datagrams", "sent"): -1 when there is none.
 */
long fdinfo_field(int fd, const char *key, const char *word);

int harness_main(int argc, char **argv, const struct test *tests, int ntests);

#endif /* SOCK_SEMANTICS_HARNESS_H */
