/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, module parameters: declared here with module_param() and read from
 * Rust through these getters (rust/sys/params.rs); the writable ones (0644) with
 * READ_ONCE.
 */
#ifndef AF_SCI_SYS_PARAMS_H
#define AF_SCI_SYS_PARAMS_H

#include <linux/moduleparam.h>
#include <linux/types.h>

/* "family" (default AF_SCI_DEFAULT): the address family number to register. */
int sci_family_param(void);
/*
 * "sci_loopback" (default on): the SCI data path over loopback. Writable. Read directly
 * (READ_ONCE's volatile load, in rust/sys/params.rs): every datagram sent looks at it.
 */
extern bool sci_loopback_on;
/* "failover_ms" (default 1000): how long a move onto TCP may take; 0 turns it off. Writable. */
unsigned int sci_failover_ms_param(void);
/* "refusal_ms" (default 1000): how long a refused SCI destination is remembered. Writable. */
unsigned int sci_refusal_ms_param(void);
/* "direct_min" (default 16384): smallest buffer a reader posts for a direct fill; 0: off. Writable. */
unsigned int sci_direct_min_param(void);
/* "dgram_idle_ms" (default 5000, at least 100): an idle implicit connection's life. Writable. */
unsigned int sci_dgram_idle_ms_param(void);
/* "spin_us" (default 0): how long a blocking call polls before sleeping. Writable. */
int sci_spin_us_param(void);
/* "fabric_selftest" (default off). */
bool sci_fabric_selftest_param(void);
/* The fabric choice and the inter-VM (ivshmem) backend. */
const char *sci_fabric_param(void);		/* "auto", "loopback" or "ivshmem" */
int sci_node_id_param(void);			/* -1: from the device */
unsigned int sci_ivshmem_nodes_param(void);	/* node table size when formatting */
unsigned int sci_ivshmem_timeout_param(void);	/* ms without heartbeat = node down */
void sci_ivshmem_test_params(int *peer, int *port, unsigned int *hold);	/* test only */
/* "test_drop_answers": true (and one less) while connect answers are to be dropped. Test only. */
bool sci_take_drop_answer(void);
/* "test_read_sock_busy": true (and one less) while read_sock is to find its socket held. Test only. */
bool sci_take_read_sock_busy(void);
/* "test_hold_frames": true while inbound control frames are to be left unserved. Test only. */
bool sci_test_hold_frames(void);
/* "test_dgram_answer_ms": an implicit datagram connection's answer window (0: the default). Test only. */
unsigned int sci_test_dgram_answer_ms(void);
/* "test_wait_race_us": busy-waits that long before a wait request. Test only. */
void sci_test_wait_race(void);

#endif /* AF_SCI_SYS_PARAMS_H */
