// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, params: see params.h. No logic lives here. */
#include <linux/delay.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/net.h>
#include "../../../uapi/linux/af_sci.h"
#include "params.h"

static int family = AF_SCI_DEFAULT;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "Address family number to register (default 27)");

int sci_family_param(void)
{
	return family;
}

bool sci_loopback_on = true;
module_param_named(sci_loopback, sci_loopback_on, bool, 0644);
MODULE_PARM_DESC(sci_loopback, "Carry connections to this node's own addresses (127.0.0.0/8, ::1, interface addresses) over the loopback fabric's shared-memory queues (default on)");

static int spin_us = -1;
module_param(spin_us, int, 0644);
MODULE_PARM_DESC(spin_us, "Microseconds a blocking send/receive on the SCI data path polls before sleeping (-1: adaptive, as recent waits say, the default; 0: never; at most 10000; per socket: SCI_SPIN_US)");

int sci_spin_us_param(void)
{
	return READ_ONCE(spin_us);
}

static unsigned int failover_ms = 1000;
module_param(failover_ms, uint, 0644);
MODULE_PARM_DESC(failover_ms, "How long an SCI connection whose fabric path is lost may take to move onto TCP before it is reset (ms; 0: reset at once, as a connection whose peer died; default 1000)");

unsigned int sci_failover_ms_param(void)
{
	return READ_ONCE(failover_ms);
}

static unsigned int refusal_ms = 1000;
module_param(refusal_ms, uint, 0644);
MODULE_PARM_DESC(refusal_ms, "How long a destination that refused an SCI connect (no AF_SCI listener there) is remembered: connects to it meanwhile fall back to TCP at once (ms; 0: never remembered; default 1000)");

unsigned int sci_refusal_ms_param(void)
{
	return READ_ONCE(refusal_ms);
}

static unsigned int direct_min = 16384;
module_param(direct_min, uint, 0644);
MODULE_PARM_DESC(direct_min, "Smallest receive buffer (bytes) that a blocked reader on the loopback fabric posts for the writer to fill directly, one copy instead of two, once the writer's sends are that large too (0: never; default 16384)");

unsigned int sci_direct_min_param(void)
{
	return READ_ONCE(direct_min);
}

static unsigned int dgram_idle_ms = 5000;
module_param(dgram_idle_ms, uint, 0644);
MODULE_PARM_DESC(dgram_idle_ms, "How long an implicit SCI connection between datagram sockets lasts without a datagram before it ends; the next datagram to that destination goes over UDP and sets one up again (ms, at least 100; default 5000)");

unsigned int sci_dgram_idle_ms_param(void)
{
	return max(READ_ONCE(dgram_idle_ms), 100U);
}

static bool fabric_selftest;
module_param(fabric_selftest, bool, 0444);
MODULE_PARM_DESC(fabric_selftest, "Run the fabric and queue self-test at load time; fail the load if it fails");

bool sci_fabric_selftest_param(void)
{
	return fabric_selftest;
}

static char *fabric = "auto";
module_param(fabric, charp, 0444);
MODULE_PARM_DESC(fabric, "Fabric backend: auto (ivshmem if the device is present, else loopback), loopback or ivshmem");

const char *sci_fabric_param(void)
{
	return fabric;
}

static int node_id = -1;
module_param(node_id, int, 0444);
MODULE_PARM_DESC(node_id, "This node's id on the ivshmem fabric (default -1: the device's IVPosition; ivshmem-plain needs it)");

int sci_node_id_param(void)
{
	return node_id;
}

static unsigned int ivshmem_nodes = 8;
module_param(ivshmem_nodes, uint, 0444);
MODULE_PARM_DESC(ivshmem_nodes, "Node table size when this node formats the shared region (1..32, default 8)");

unsigned int sci_ivshmem_nodes_param(void)
{
	return ivshmem_nodes;
}

static unsigned int ivshmem_timeout_ms = 2000;
module_param(ivshmem_timeout_ms, uint, 0444);
MODULE_PARM_DESC(ivshmem_timeout_ms, "A peer whose heartbeat stands still this long (ms) is down (default 2000)");

unsigned int sci_ivshmem_timeout_param(void)
{
	return ivshmem_timeout_ms;
}

/* Test only: the ivshmem self-test also connects to this node's AF_SCI listener. */
static int ivshmem_test_peer = -1;
module_param(ivshmem_test_peer, int, 0444);
MODULE_PARM_DESC(ivshmem_test_peer, "Test: with fabric_selftest=1, connect to this node's ivshmem_test_port over the ivshmem fabric (default -1: no)");
static int ivshmem_test_port = 7000;
module_param(ivshmem_test_port, int, 0444);
MODULE_PARM_DESC(ivshmem_test_port, "Test: the port ivshmem_test_peer listens on (default 7000)");
static unsigned int ivshmem_test_hold;
module_param(ivshmem_test_hold, uint, 0444);
MODULE_PARM_DESC(ivshmem_test_hold, "Test: seconds to hold that connection open (default 0)");

void sci_ivshmem_test_params(int *peer, int *port, unsigned int *hold)
{
	*peer = ivshmem_test_peer;
	*port = ivshmem_test_port;
	*hold = ivshmem_test_hold;
}

/*
 * Test only: the listener's node drops this many connect answers (accepts) instead of
 * sending them, as a full mailbox or a peer that went away loses one on a real fabric
 * (selftests/guest/sci_lost_answer.py). Root only.
 */
static int test_drop_answers;
module_param(test_drop_answers, int, 0600);
MODULE_PARM_DESC(test_drop_answers, "Test: drop this many connect answers instead of sending them (default 0)");

/* A test parameter that counts down: true (and one less) while it is above 0. */
static bool take_one(int *counter)
{
	int v = READ_ONCE(*counter);

	while (v > 0) {
		if (try_cmpxchg(counter, &v, v - 1))
			return true;
	}
	return false;
}

/*
 * Test only: this many read_sock calls (a kernel reader's, iscsi_tcp's) find the socket
 * held, as when a process owns it, and leave the read to the socket's work item, which
 * reads again (rust/socket/sock/read_sock.rs; selftests/guest/iscsi-sci). Root only.
 */
static int test_read_sock_busy;
module_param(test_read_sock_busy, int, 0600);
MODULE_PARM_DESC(test_read_sock_busy, "Test: this many read_sock calls find the socket held (default 0)");

bool sci_take_read_sock_busy(void)
{
	return take_one(&test_read_sock_busy);
}

/*
 * Test only: while nonzero, the listener kthread leaves inbound control frames in its
 * inbox; they are served, in order, once it is 0 again. A test makes a connect request
 * arrive after its connect gave up this way (selftests/guest/sci_late_request.py).
 * Root only.
 */
static int test_hold_frames;
module_param(test_hold_frames, int, 0600);
MODULE_PARM_DESC(test_hold_frames, "Test: leave inbound control frames unserved while nonzero (default 0)");

bool sci_test_hold_frames(void)
{
	return READ_ONCE(test_hold_frames) != 0;
}

/*
 * Test only: how long an implicit connection of a datagram socket waits for its answer,
 * and once answered keeps following the datagrams it sent over UDP meanwhile (ms; 0: the
 * module's 1000). A test that holds those datagrams in the device's queue raises it, so
 * that its own steps, slow under a loaded emulator, stay inside the window
 * (selftests/pair/pair-sci-guest, check_udp_follow). Root only.
 */
static unsigned int test_dgram_answer_ms;
module_param(test_dgram_answer_ms, uint, 0600);
MODULE_PARM_DESC(test_dgram_answer_ms, "Test: how long an implicit datagram connection waits for its answer and follows its UDP datagrams (ms; default 0: 1000)");

unsigned int sci_test_dgram_answer_ms(void)
{
	return READ_ONCE(test_dgram_answer_ms);
}

/*
 * Test only: a reader that found its ring empty (or a non-blocking writer that found it
 * full) busy-waits this many microseconds (at most 5000) before it posts its wait
 * request, so that a byte the writer sends (or space the reader frees) meanwhile rings no
 * doorbell, as one rarely does by chance: it must still be used
 * (sci_kselftest.ko, selftests/guest/sci_limits.py wait-race). Root only.
 */
static int test_wait_race_us;
module_param(test_wait_race_us, int, 0600);
MODULE_PARM_DESC(test_wait_race_us, "Test: delay a wait request after an empty (or full) look by this many us (default 0)");

void sci_test_wait_race(void)
{
	int us = READ_ONCE(test_wait_race_us);

	if (us > 0)
		udelay(min(us, 5000));
}

bool sci_take_drop_answer(void)
{
	return take_one(&test_drop_answers);
}
