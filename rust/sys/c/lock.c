// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, locks: see lock.h. No logic lives here. */
#include "lock.h"

void sci_spin_lock_bh(spinlock_t *lock) { spin_lock_bh(lock); }
void sci_spin_unlock_bh(spinlock_t *lock) { spin_unlock_bh(lock); }

void sci_local_bh_disable(void) { local_bh_disable(); }
void sci_local_bh_enable(void) { local_bh_enable(); }
