// SPDX-License-Identifier: GPL-2.0
/*
 * The least a 14-byte ping-pong between two processes pinned to one CPU can take,
 * whatever carries the bytes: each round trip is two sleeps, two wake-ups and two
 * switches between address spaces, and here nothing else — the two processes pass the
 * bytes through a shared page and wake each other with a futex word beside them.
 * sockperf's client and server are two such processes; `make bench` prints this as the
 * floor of its one-CPU UDP ping-pong row (Documentation/benchmarks.rst, "The one-CPU
 * floor").
 *
 *   futex_pingpong CPU LOOPS     prints the median round trip of LOOPS in microseconds
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 1000
#define MSG 14

/* The shared page: the sequence word (odd: a request waits, even: its answer) and the
 * bytes each way. */
struct page {
	_Atomic uint32_t seq;
	char req[MSG];
	char resp[MSG];
};

static void wait_while(_Atomic uint32_t *w, uint32_t v)
{
	while (atomic_load(w) == v)
		syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void set_and_wake(_Atomic uint32_t *w, uint32_t v)
{
	atomic_store(w, v);
	syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The server: answers every request with the bytes it got. */
static void serve(struct page *p, long rounds)
{
	char buf[MSG];

	for (uint32_t i = 0; i < rounds; i++) {
		wait_while(&p->seq, 2 * i);
		memcpy(buf, p->req, MSG);
		memcpy(p->resp, buf, MSG);
		set_and_wake(&p->seq, 2 * i + 2);
	}
}

int main(int argc, char **argv)
{
	char msg[MSG] = "ping-pong 14B", back[MSG];
	struct page *p;
	uint64_t *lat;
	cpu_set_t set;
	long loops, rounds;
	int cpu, status;
	pid_t pid;

	if (argc != 3 || (cpu = atoi(argv[1])) < 0 || (loops = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: futex_pingpong CPU LOOPS\n");
		return 2;
	}
	rounds = loops + WARMUP;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("futex_pingpong: sched_setaffinity");
		return 1;
	}
	p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	lat = calloc(loops, sizeof(*lat));
	if (p == MAP_FAILED || !lat) {
		perror("futex_pingpong: memory");
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		perror("futex_pingpong: fork");
		return 1;
	}
	if (pid == 0) {
		serve(p, rounds);
		_exit(0);
	}
	for (uint32_t i = 0; i < rounds; i++) {
		uint64_t t0 = now_ns();

		memcpy(p->req, msg, MSG);
		set_and_wake(&p->seq, 2 * i + 1);
		wait_while(&p->seq, 2 * i + 1);
		memcpy(back, p->resp, MSG);
		if (memcmp(back, msg, MSG)) {
			fprintf(stderr, "futex_pingpong: round %u came back changed\n", i);
			return 1;
		}
		if (i >= WARMUP)
			lat[i - WARMUP] = now_ns() - t0;
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "futex_pingpong: the server did not end cleanly\n");
		return 1;
	}
	qsort(lat, loops, sizeof(*lat), cmp_u64);
	printf("%.3f\n", lat[loops / 2] / 1000.0);
	return 0;
}
