/* SPDX-License-Identifier: GPL-2.0 */
/*
 * af_sci C shim: what Linux 6.12's Rust bindings lack.
 *
 * Only static inline functions, macros and C-only statics live here (struct proto,
 * lock_sock, sock_poll_wait, the sk_callback_lock, the module parameter).  Kbuild runs
 * bindgen over this header, so the Rust side sees exactly these declarations and every
 * kernel type they pull in, checked on every build.
 */
#ifndef AF_SCI_SHIM_H
#define AF_SCI_SHIM_H

#include <linux/module.h>
#include <linux/net.h>
#include <linux/poll.h>
#include <linux/seq_file.h>
#include <linux/kthread.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>
#include <linux/socket.h>
#include <linux/sockptr.h>
#include <linux/uio.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/tcp.h>
#include <linux/pci.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include "../uapi/linux/af_sci.h"
#include "genl.h"	/* the netlink family and per-netns counters (genl.c) */

/* Module parameter "family" (default AF_SCI_DEFAULT). */
int sci_family_param(void);
/* Module parameter "sci_loopback" (default on): the SCI data path over loopback. */
bool sci_loopback_param(void);
/* Module parameter "spin_us" (default 0), and what spinning needs. */
int sci_spin_us_param(void);
void sci_cpu_relax(void);
bool sci_need_resched(void);
/* A network namespace's cookie, and whether it is the initial namespace. */
u64 sci_net_cookie(const struct net *net);
bool sci_net_is_init(const struct net *net);
/* IPV6_V6ONLY of an AF_INET6 sock (false for AF_INET). */
bool sci_sk_ipv6only(const struct sock *sk);
/* SO_LINGER with a zero timeout: close aborts. */
bool sci_linger_zero(const struct sock *sk);
/*
 * TCP_NODELAY and TCP_CORK as a TCP sock holds them (the TCP_NAGLE_OFF and TCP_NAGLE_CORK
 * bits of tcp_sk(sk)->nonagle, a bitfield), 0 for a sock that is not TCP; and TCP_NODELAY
 * passed on from a listener to an accepted sock, as TCP's accept does.
 */
#define SCI_NAGLE_OFF	1
#define SCI_NAGLE_CORK	2
unsigned int sci_tcp_nagle(const struct sock *sk);
void sci_tcp_inherit_nodelay(struct sock *to, const struct sock *from);
/* Module parameter "fabric_selftest" (default off). */
bool sci_fabric_selftest_param(void);

/* Our struct proto: obj_size is the Rust socket's size, known only at load time. */
int sci_proto_register(unsigned int obj_size);
void sci_proto_unregister(void);
struct sock *sci_sk_alloc(struct net *net, int family, int kern);

/* Static inlines and macros of net/sock.h. */
void sci_lock_sock(struct sock *sk);
void sci_module_get(struct module *module);
void sci_sock_hold(struct sock *sk);
void sci_sock_put(struct sock *sk);
void sci_sock_orphan(struct sock *sk);
void sci_sock_graft(struct sock *sk, struct socket *parent);
int sci_sock_error(struct sock *sk);
void sci_sock_poll_wait(struct file *file, struct socket *sock, poll_table *wait);
void sci_set_custom_sockopt(struct socket *sock);
void sci_copy_alloc_flags(struct sock *to, const struct sock *from);
struct net *sci_sock_net(const struct sock *sk);
int sci_copy_from_sockptr(void *dst, sockptr_t src, size_t size);
sockptr_t sci_kernel_sockptr(void *p);

/* The native socket's callbacks are forwarded under its sk_callback_lock. */
void sci_callback_write_lock(struct sock *sk);
void sci_callback_write_unlock(struct sock *sk);
void sci_callback_read_lock(struct sock *sk);
void sci_callback_read_unlock(struct sock *sk);
/*
 * sk_user_data with SK_USER_DATA_NOCOPY, so accepted children never inherit it; read and
 * written under sk_callback_lock.
 */
void sci_set_user_data(struct sock *sk, void *data);
void *sci_user_data(struct sock *sk);

/*
 * Wake whoever waits on sk (poll, epoll, blocking calls, SIGIO) with the poll key the
 * kernel's default callbacks use, so edge-triggered epoll sees what it would see on TCP.
 */
void sci_wake_readable(struct sock *sk);	/* as sock_def_readable */
void sci_wake_writable(struct sock *sk);	/* as sk_stream_write_space */
void sci_wake_state(struct sock *sk);		/* as sock_def_wakeup */
void sci_wake_error(struct sock *sk);		/* as sock_def_error_report */

/*
 * Whether anyone besides the caller watches sk for the next arrival: an entry on its
 * wait queue (poll, select, epoll registered or a sleeper) or O_ASYNC. A recv that
 * leaves data behind asks the peer for the next doorbell only then (TCP wakes on every
 * segment; a plain blocking reader needs no doorbell while it is not asleep).
 */
bool sci_sock_watched(struct sock *sk);

/*
 * Sleeping on a socket's wait queue without losing a wake-up: add the entry first,
 * re-check the condition, then sleep (wait_woken remembers a wake that came between).
 */
const struct proto_ops *sci_tcp_ops(int family);
struct socket *sci_file_socket(struct file *file);
void sci_sock_set_fasync(struct sock *sk, bool on);

void sci_wait_init(struct wait_queue_entry *wait);
void sci_wait_add(struct sock *sk, struct wait_queue_entry *wait);
long sci_wait_sleep(struct wait_queue_entry *wait, long timeo);
void sci_wait_remove(struct sock *sk, struct wait_queue_entry *wait);
bool sci_signal_pending(void);
long sci_sock_rcvtimeo(const struct sock *sk, bool noblock);
long sci_sock_sndtimeo(const struct sock *sk, bool noblock);
int sci_sock_intr_errno(long timeo);
void sci_send_sigpipe(void);
long sci_msecs_to_jiffies(unsigned int msecs);

/* Module parameters of the fabric choice and the inter-VM (ivshmem) backend. */
const char *sci_fabric_param(void);		/* "auto", "loopback" or "ivshmem" */
int sci_node_id_param(void);			/* -1: from the device */
unsigned int sci_ivshmem_nodes_param(void);	/* node table size when formatting */
unsigned int sci_ivshmem_timeout_param(void);	/* ms without heartbeat = node down */
void sci_ivshmem_test_params(int *peer, int *port, unsigned int *hold);	/* test only */

/* PCI: pci_register_driver() and the static inlines of linux/pci.h the wrapper needs. */
int sci_pci_register_driver(struct pci_driver *drv);
resource_size_t sci_pci_resource_start(struct pci_dev *pdev, int bar);
resource_size_t sci_pci_resource_len(struct pci_dev *pdev, int bar);
void sci_pci_set_drvdata(struct pci_dev *pdev, void *data);
void *sci_pci_get_drvdata(struct pci_dev *pdev);
const char *sci_pci_name(const struct pci_dev *pdev);
struct pci_driver *sci_pci_driver_of(struct pci_dev *pdev);	/* to_pci_driver(dev.driver) */

/* Kernel threads: run fn(data) until it returns; stop = ask and wait. */
struct task_struct *sci_kthread_run(int (*fn)(void *), void *data, const char *name);
bool sci_kthread_should_stop(void);
int sci_kthread_stop(struct task_struct *task);

#endif /* AF_SCI_SHIM_H */
