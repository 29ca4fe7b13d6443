// SPDX-License-Identifier: GPL-2.0
/*
 * sock_semantics: data transfer (echo round trips, large bidirectional
 * transfer).
 */
#include "harness.h"
#include "tests.h"

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

void t_echo_v4(void) { echo_test(AF_INET); }
void t_echo_v6(void) { echo_test(AF_INET6); }

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

void t_large_transfer(void)
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
