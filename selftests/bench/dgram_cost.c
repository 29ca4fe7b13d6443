// SPDX-License-Identifier: GPL-2.0
/*
 * What one datagram costs to send and to receive, with nothing else in the way: one
 * process, one CPU, no sleep and no context switch. It sends BATCH datagrams of SIZE
 * bytes from one socket to another on 127.0.0.1, times the sends, then reads them and
 * times the reads; then the same again read with recvfrom(), the sender's address
 * asked for and no MSG_DONTWAIT (what sockperf's server calls); ROUNDS times, and prints
 * the median of each per datagram. In a guest
 * whose clock counts instructions (vm-run's VM_ICOUNT=0: a nanosecond for each one) the
 * times are instructions, the same in every run: the receive path's own cost, which the
 * UDP flood's rows measure only through the scheduler (Documentation/benchmarks.rst,
 * "What a datagram costs"). selftests/bench/dgram-cost runs it plain and under
 * SCI_DGRAM=1 sci-run.
 *
 *   dgram_cost SIZE BATCH ROUNDS
 *
 * Under sci-run it first waits for the sender's implicit connection (its fdinfo counts a
 * datagram sent over SCI), and fails when a measured datagram went over UDP or was
 * dropped. It prints "send NS recv NS recvfrom NS path udp|sci".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* fdinfo's "sci-datagrams: sent N" of FD, or -1 when FD is no AF_SCI datagram socket. */
static long long sci_sent(int fd)
{
	char path[64], line[256];
	long long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "sci-datagrams: sent %lld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* The median of the n values at v (sorted in place). */
static long long median(long long *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	return v[n / 2];
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Sends n datagrams of size bytes from buf to to. */
static void send_batch(int tx, const char *buf, int size, const struct sockaddr_in *to, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (sendto(tx, buf, size, 0, (const struct sockaddr *)to, sizeof(*to)) != size)
			die("dgram_cost: sendto");
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	socklen_t tolen = sizeof(to);
	long long *send_ns, *recv_ns, *from_ns, sent0;
	int size, batch, rounds, r, i, tx, rx;
	char *buf;

	if (argc != 4 || (size = atoi(argv[1])) < 1 || size > 65507 ||
	    (batch = atoi(argv[2])) < 1 || (rounds = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: dgram_cost SIZE BATCH ROUNDS\n");
		return 2;
	}
	buf = calloc(1, size);
	send_ns = calloc(rounds, sizeof(*send_ns));
	recv_ns = calloc(rounds, sizeof(*recv_ns));
	from_ns = calloc(rounds, sizeof(*from_ns));
	if (!buf || !send_ns || !recv_ns || !from_ns)
		die("dgram_cost: memory");
	rx = socket(AF_INET, SOCK_DGRAM, 0);
	tx = socket(AF_INET, SOCK_DGRAM, 0);
	if (rx < 0 || tx < 0)
		die("dgram_cost: socket");
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(rx, (struct sockaddr *)&to, sizeof(to)) ||
	    getsockname(rx, (struct sockaddr *)&to, &tolen))
		die("dgram_cost: bind");

	/* Under sci-run: one datagram at a time until one went over SCI (the first ones go
	 * over UDP while the implicit connection comes up). */
	if (sci_sent(tx) >= 0) {
		for (i = 0; sci_sent(tx) == 0; i++) {
			if (i == 20000) {
				fprintf(stderr, "dgram_cost: no implicit connection after %d datagrams\n", i);
				return 1;
			}
			if (sendto(tx, buf, size, 0, (struct sockaddr *)&to, sizeof(to)) != size ||
			    recv(rx, buf, size, 0) != size)
				die("dgram_cost: warm-up");
			usleep(1000);
		}
	}
	sent0 = sci_sent(tx);
	for (r = 0; r < rounds; r++) {
		long long t0 = now_ns(), t1, t2;

		send_batch(tx, buf, size, &to, batch);
		t1 = now_ns();
		for (i = 0; i < batch; i++) {
			/* Every datagram is there already: one that is not was dropped. */
			ssize_t n = recv(rx, buf, size, MSG_DONTWAIT);

			if (n != size) {
				fprintf(stderr, "dgram_cost: datagram %d of round %d: %s\n", i, r,
					n < 0 ? strerror(errno) : "short");
				return 1;
			}
		}
		t2 = now_ns();
		send_ns[r] = (t1 - t0) / batch;
		recv_ns[r] = (t2 - t1) / batch;
		/* The same batch read as sockperf's server reads: a blocking recvfrom() that
		 * asks for the sender's address (every datagram is there, so none waits). */
		send_batch(tx, buf, size, &to, batch);
		t2 = now_ns();
		for (i = 0; i < batch; i++) {
			struct sockaddr_in from;
			socklen_t fromlen = sizeof(from);
			ssize_t n = recvfrom(rx, buf, size, 0, (struct sockaddr *)&from, &fromlen);

			if (n != size || fromlen != sizeof(from) || from.sin_family != AF_INET) {
				fprintf(stderr, "dgram_cost: recvfrom %d of round %d: %s\n", i, r,
					n < 0 ? strerror(errno) : "short or no address");
				return 1;
			}
		}
		from_ns[r] = (now_ns() - t2) / batch;
	}
	if (sent0 >= 0 && sci_sent(tx) - sent0 != 2LL * batch * rounds) {
		fprintf(stderr, "dgram_cost: %lld of %lld datagrams went over SCI\n",
			sci_sent(tx) - sent0, 2LL * batch * rounds);
		return 1;
	}
	printf("send %lld recv %lld recvfrom %lld path %s\n", median(send_ns, rounds),
	       median(recv_ns, rounds), median(from_ns, rounds), sent0 >= 0 ? "sci" : "udp");
	return 0;
}
