/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers, locks: spinlocks taken with bottom halves off (rust/sys/spinlock_bh.rs),
 * for the locks a doorbell takes in softirq context.
 */
#ifndef AF_SCI_SYS_LOCK_H
#define AF_SCI_SYS_LOCK_H

#include <linux/spinlock.h>

void sci_spin_lock_bh(spinlock_t *lock);
void sci_spin_unlock_bh(spinlock_t *lock);

#endif /* AF_SCI_SYS_LOCK_H */
