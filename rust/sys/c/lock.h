/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, locks: spinlocks taken with bottom halves off (rust/sys/spinlock_bh.rs),
 * for the locks a doorbell takes in softirq context, and bottom halves off for the atomic
 * side of a gated mutex.
 */
#ifndef AF_SCI_SYS_LOCK_H
#define AF_SCI_SYS_LOCK_H

#include <linux/spinlock.h>

void sci_spin_lock_bh(spinlock_t *lock);
void sci_spin_unlock_bh(spinlock_t *lock);

/* Bottom halves off and on again (rust/sys/gated_mutex.rs). */
void sci_local_bh_disable(void);
void sci_local_bh_enable(void);

#endif /* AF_SCI_SYS_LOCK_H */
