/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C helpers: what Linux 6.12's Rust bindings lack, one file per subsystem in c/.
 *
 * Only static inline functions, macros and C-only statics live there (struct proto,
 * lock_sock, sock_poll_wait, the sk_callback_lock, module_param, the genl family).  Kbuild
 * runs bindgen over this header, so the Rust side (bindings.rs) sees exactly these
 * declarations and every kernel type they pull in, checked on every build.
 */
#ifndef AF_SCI_SHIM_H
#define AF_SCI_SHIM_H

#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/uio.h>
#include <linux/in.h>
#include <linux/in6.h>
#include "../../uapi/linux/af_sci.h"
#include "c/params.h"	/* module parameters */
#include "c/sock.h"	/* struct proto, net/sock.h and linux/tcp.h inlines */
#include "c/wait.h"	/* wait queues, wake-ups, timeouts, signals */
#include "c/pci.h"	/* the PCI driver */
#include "c/sched.h"	/* kernel threads, spinning, jiffies */
#include "c/genl.h"	/* the netlink family and per-netns counters */
#include "c/lock.h"	/* spinlocks taken with bottom halves off */
#include "c/pages.h"	/* a reader's buffer pinned for a writer in this kernel */

#endif /* AF_SCI_SHIM_H */
