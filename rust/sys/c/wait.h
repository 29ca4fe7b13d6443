/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, waiting and waking: a socket's wait queue, the poll keys of the
 * kernel's default callbacks, timeouts and signals (rust/sys/wake.rs, rust/socket/sk.rs).
 */
#ifndef AF_SCI_SYS_WAIT_H
#define AF_SCI_SYS_WAIT_H

#include <linux/sched/signal.h>
#include <linux/wait.h>
#include <net/sock.h>

/*
 * An AF_SCI sk's sk_data_ready, sk_write_space and sk_state_change: they wake whoever
 * waits on sk (poll, epoll, blocking calls, SIGIO) with the poll key the kernel's default
 * callbacks use, so edge-triggered epoll sees what it would see on TCP. Installed at
 * creation; a kernel user (iscsi_tcp) may replace them with its own, as on TCP.
 */
void sci_sk_set_default_callbacks(struct sock *sk);

/*
 * Wake sk through its callbacks (the defaults above or a kernel user's): data to read,
 * space to write, a state change.
 */
void sci_wake_readable(struct sock *sk);	/* sk_data_ready */
void sci_wake_writable(struct sock *sk);	/* sk_write_space */
void sci_wake_state(struct sock *sk);		/* sk_state_change */
void sci_wake_error(struct sock *sk);		/* as sock_def_error_report */

/*
 * Space the peer freed, told as tcp_check_space() tells it: sk_write_space runs only if a
 * writer found no room since the last such wake (SOCK_NOSPACE, which sci_note_no_room()
 * sets before the writer's last look at the ring; tcp_poll and a full tcp_sendmsg set it
 * the same way). A kernel user's write_space then runs once per stall, not per answer.
 */
void sci_wake_space(struct sock *sk);
void sci_note_no_room(struct sock *sk);

/*
 * Whether anyone besides the caller watches sk for the next arrival: an entry on its
 * wait queue (poll, select, epoll registered or a sleeper), O_ASYNC, or a kernel user's
 * own sk_data_ready. A recv that leaves data behind asks the peer for the next doorbell
 * only then (TCP wakes on every segment; a plain blocking reader needs no doorbell while
 * it is not asleep).
 */
bool sci_sock_watched(struct sock *sk);

/*
 * Sleeping on a socket's wait queue without losing a wake-up: add the entry first,
 * re-check the condition, then sleep (wait_woken remembers a wake that came between).
 * sci_wait_sleep also measures what the sleep cost: wake_ns is the time from the first
 * wake-up of the entry to the sleeper running again (0 when no wake-up ended it: a
 * timeout, a signal), which adaptive spinning weighs a spin against
 * (rust/proto/spin.rs).
 */
struct sci_wait {
	struct wait_queue_entry entry;
	u64 woken_at;		/* ktime_get_ns() of the first wake-up, 0: none yet */
	u64 wake_ns;		/* the last sleep's wake-up latency, 0: not woken */
};

void sci_wait_init(struct sci_wait *wait);
void sci_wait_add(struct sock *sk, struct sci_wait *wait);
long sci_wait_sleep(struct sci_wait *wait, long timeo);
void sci_wait_remove(struct sock *sk, struct sci_wait *wait);
bool sci_signal_pending(void);
long sci_sock_rcvtimeo(const struct sock *sk, bool noblock);
long sci_sock_sndtimeo(const struct sock *sk, bool noblock);
int sci_sock_intr_errno(long timeo);
void sci_send_sigpipe(void);

#endif /* AF_SCI_SYS_WAIT_H */
