/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, scheduling: kernel threads (rust/sys/kthread.rs), and what spinning
 * and timeouts need.
 */
#ifndef AF_SCI_SYS_SCHED_H
#define AF_SCI_SYS_SCHED_H

#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/sched/stat.h>
#include <linux/jiffies.h>
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/timekeeping.h>

/* Kernel threads: run fn(data) until it returns; stop = ask and wait. */
struct task_struct *sci_kthread_run(int (*fn)(void *), void *data, const char *name);
bool sci_kthread_should_stop(void);
int sci_kthread_stop(struct task_struct *task);

/*
 * Spinning (spin_us): relax the CPU, whether to yield it, and whether it is the only
 * runnable task on this CPU (an adaptive spin's condition, as KVM's halt polling's).
 */
void sci_cpu_relax(void);
bool sci_need_resched(void);
bool sci_single_task_running(void);

long sci_msecs_to_jiffies(unsigned int msecs);

/* Milliseconds counted in jiffies (arbitrary start): one load, a stamp per datagram. */
s64 sci_coarse_ms(void);

/* The calling thread runs as a threaded interrupt handler does (SCHED_FIFO, low). */
void sci_sched_current_fifo_low(void);

/* A sleep of min_us to max_us microseconds on an hrtimer (a poller between passes). */
void sci_usleep_range(unsigned long min_us, unsigned long max_us);

#endif /* AF_SCI_SYS_SCHED_H */
