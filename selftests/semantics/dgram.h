/* SPDX-License-Identifier: GPL-2.0 */
/* sock_semantics: the datagram helpers dgram.c shares with the other datagram cases. */
#ifndef SOCK_SEMANTICS_DGRAM_H
#define SOCK_SEMANTICS_DGRAM_H

/* Two sockets under test of af, each bound to its own loopback port. */
void dgram_pair(int af, int *a, struct sockaddr_storage *aa, int *b,
		struct sockaddr_storage *ba);
/*
 * Whether the datagrams of a case must take implicit SCI connections (--family sci or
 * the preload, with --expect-mode sci).
 */
bool sci_path_expected(void);
/*
 * Sends datagrams from b to a (each received before the next) until the implicit
 * connection from b to a is up at both ends (SCI_INFO mode sci), when the SCI path is
 * expected: it comes up in the background after the first datagram, which went over
 * UDP. At most 20 s (a loaded host); otherwise one datagram.
 */
void await_fabric(int a, int b, const struct sockaddr_storage *aa);
/*
 * The datagrams sender b sent and receiver a received over SCI (fdinfo), 0 unless the
 * SCI path is expected.
 */
struct sci_counts {
	long sent, received;
};
struct sci_counts sci_counts_of(int b, int a);
/* When the SCI path is expected: b sent and a received n datagrams over SCI since `before`. */
void check_over_sci(int b, int a, struct sci_counts before, long n);
/* Datagram i of a test run: its length (1 to 700 bytes); its pattern seed is i. */
size_t nth_len(unsigned i);

#endif /* SOCK_SEMANTICS_DGRAM_H */
