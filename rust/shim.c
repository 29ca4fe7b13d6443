// SPDX-License-Identifier: GPL-2.0
/*
 * af_sci C shim: static inline functions, macros and C-only statics that Linux 6.12's
 * Rust bindings lack.  No logic lives here; see shim.h.
 */
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <net/sock.h>
#include <net/tcp.h>
#include "shim.h"

static int family = AF_SCI_DEFAULT;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "Address family number to register (default 27)");

int sci_family_param(void)
{
	return family;
}

static bool sci_loopback = true;
module_param(sci_loopback, bool, 0644);
MODULE_PARM_DESC(sci_loopback, "Carry connections to this node's own addresses (127.0.0.0/8, ::1, interface addresses) over the loopback fabric's shared-memory queues (default on)");

bool sci_loopback_param(void)
{
	return READ_ONCE(sci_loopback);
}

static int spin_us;
module_param(spin_us, int, 0644);
MODULE_PARM_DESC(spin_us, "Microseconds a blocking send/receive on the SCI data path polls before sleeping (default 0; per socket: SCI_SPIN_US)");

int sci_spin_us_param(void)
{
	return READ_ONCE(spin_us);
}

void sci_cpu_relax(void)
{
	cpu_relax();
}

bool sci_need_resched(void)
{
	return need_resched();
}

u64 sci_net_cookie(const struct net *net)
{
	return net->net_cookie;
}

bool sci_net_is_init(const struct net *net)
{
	return net_eq(net, &init_net);
}

bool sci_sk_ipv6only(const struct sock *sk)
{
	return sk->sk_family == AF_INET6 && sk->sk_ipv6only;
}

bool sci_linger_zero(const struct sock *sk)
{
	return sock_flag(sk, SOCK_LINGER) && !READ_ONCE(sk->sk_lingertime);
}

static_assert(SCI_NAGLE_OFF == TCP_NAGLE_OFF && SCI_NAGLE_CORK == TCP_NAGLE_CORK);

unsigned int sci_tcp_nagle(const struct sock *sk)
{
	if (sk->sk_protocol != IPPROTO_TCP || sk->sk_type != SOCK_STREAM)
		return 0;
	/* A lockless read, as tcp_sendmsg reads it under the lock: a racing setsockopt
	 * is seen by this write or the next one (both flush, see options.rs). */
	return tcp_sk(sk)->nonagle & (TCP_NAGLE_OFF | TCP_NAGLE_CORK);
}

void sci_tcp_inherit_nodelay(struct sock *to, const struct sock *from)
{
	if (sci_tcp_nagle(from) & TCP_NAGLE_OFF && to->sk_protocol == IPPROTO_TCP)
		tcp_sock_set_nodelay(to);
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

static struct proto sci_proto = {
	.name		= "AF_SCI",
	.owner		= THIS_MODULE,
};

int sci_proto_register(unsigned int obj_size)
{
	sci_proto.obj_size = obj_size;
	return proto_register(&sci_proto, 0);
}

void sci_proto_unregister(void)
{
	proto_unregister(&sci_proto);
}

struct sock *sci_sk_alloc(struct net *net, int family, int kern)
{
	return sk_alloc(net, family, GFP_KERNEL, &sci_proto, kern);
}

void sci_lock_sock(struct sock *sk) { lock_sock(sk); }
void sci_module_get(struct module *module) { __module_get(module); }
void sci_sock_hold(struct sock *sk) { sock_hold(sk); }
void sci_sock_put(struct sock *sk) { sock_put(sk); }
void sci_sock_orphan(struct sock *sk) { sock_orphan(sk); }
void sci_sock_graft(struct sock *sk, struct socket *parent) { sock_graft(sk, parent); }
int sci_sock_error(struct sock *sk) { return sock_error(sk); }

void sci_sock_poll_wait(struct file *file, struct socket *sock, poll_table *wait)
{
	sock_poll_wait(file, sock, wait);
}

void sci_set_custom_sockopt(struct socket *sock)
{
	set_bit(SOCK_CUSTOM_SOCKOPT, &sock->flags);
}

/* A kernel user (NBD) sets these on the AF_SCI socket; the native socket must obey them. */
void sci_copy_alloc_flags(struct sock *to, const struct sock *from)
{
	gfp_t gfp = READ_ONCE(from->sk_allocation);

	if (READ_ONCE(to->sk_allocation) != gfp)
		WRITE_ONCE(to->sk_allocation, gfp);
	if (to->sk_use_task_frag != from->sk_use_task_frag)
		to->sk_use_task_frag = from->sk_use_task_frag;
	if (sock_flag(from, SOCK_MEMALLOC) && !sock_flag(to, SOCK_MEMALLOC))
		sk_set_memalloc(to);
}

struct net *sci_sock_net(const struct sock *sk)
{
	return sock_net(sk);
}

int sci_copy_from_sockptr(void *dst, sockptr_t src, size_t size)
{
	return copy_from_sockptr(dst, src, size) ? -EFAULT : 0;
}

sockptr_t sci_kernel_sockptr(void *p)
{
	return KERNEL_SOCKPTR(p);
}

void sci_callback_write_lock(struct sock *sk) { write_lock_bh(&sk->sk_callback_lock); }
void sci_callback_write_unlock(struct sock *sk) { write_unlock_bh(&sk->sk_callback_lock); }
void sci_callback_read_lock(struct sock *sk) { read_lock_bh(&sk->sk_callback_lock); }
void sci_callback_read_unlock(struct sock *sk) { read_unlock_bh(&sk->sk_callback_lock); }

void sci_set_user_data(struct sock *sk, void *data)
{
	__rcu_assign_sk_user_data_with_flags(sk, data, SK_USER_DATA_NOCOPY);
}

/* Read under sk_callback_lock (not RCU), as smc_clcsock_user_data() does. */
void *sci_user_data(struct sock *sk)
{
	return (void *)((uintptr_t)sk->sk_user_data & SK_USER_DATA_PTRMASK);
}

static void sci_wake(struct sock *sk, __poll_t key, int async_how, int async_band)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq)) {
		if (key)
			wake_up_interruptible_sync_poll(&wq->wait, key);
		else
			wake_up_interruptible_all(&wq->wait);
	}
	if (async_band)
		sk_wake_async_rcu(sk, async_how, async_band);
	rcu_read_unlock();
}

bool sci_sock_watched(struct sock *sk)
{
	bool watched;

	rcu_read_lock();
	watched = skwq_has_sleeper(rcu_dereference(sk->sk_wq)) ||
		  sock_flag(sk, SOCK_FASYNC);
	rcu_read_unlock();
	return watched;
}

void sci_wake_readable(struct sock *sk)
{
	sci_wake(sk, EPOLLIN | EPOLLPRI | EPOLLRDNORM | EPOLLRDBAND, SOCK_WAKE_WAITD, POLL_IN);
}

void sci_wake_writable(struct sock *sk)
{
	sci_wake(sk, EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND, SOCK_WAKE_SPACE, POLL_OUT);
}

void sci_wake_state(struct sock *sk)
{
	sci_wake(sk, 0, 0, 0);
}

void sci_wake_error(struct sock *sk)
{
	sci_wake(sk, EPOLLERR, SOCK_WAKE_IO, POLL_ERR);
}

void sci_wait_init(struct wait_queue_entry *wait)
{
	init_wait(wait);
	wait->func = woken_wake_function;
}

void sci_wait_add(struct sock *sk, struct wait_queue_entry *wait)
{
	add_wait_queue(sk_sleep(sk), wait);
}

long sci_wait_sleep(struct wait_queue_entry *wait, long timeo)
{
	return wait_woken(wait, TASK_INTERRUPTIBLE, timeo);
}

void sci_wait_remove(struct sock *sk, struct wait_queue_entry *wait)
{
	remove_wait_queue(sk_sleep(sk), wait);
}

/*
 * TCP's proto_ops for @family, read from a probe socket: inet6_stream_ops is not
 * exported, and the table of a live socket is what a fallen-back socket must copy.
 * NULL when the family cannot be created (no IPv6).
 */
const struct proto_ops *sci_tcp_ops(int family)
{
	const struct proto_ops *ops;
	struct socket *sock;

	if (sock_create_kern(&init_net, family, SOCK_STREAM, IPPROTO_TCP, &sock))
		return NULL;
	ops = sock->ops;
	sock_release(sock);
	return ops;
}

/* The socket a socket file was created for (its inode's), whatever private_data says. */
struct socket *sci_file_socket(struct file *file)
{
	return SOCKET_I(file_inode(file));
}

void sci_sock_set_fasync(struct sock *sk, bool on)
{
	if (on)
		sock_set_flag(sk, SOCK_FASYNC);
	else
		sock_reset_flag(sk, SOCK_FASYNC);
}

bool sci_signal_pending(void) { return signal_pending(current); }
long sci_sock_rcvtimeo(const struct sock *sk, bool noblock) { return sock_rcvtimeo(sk, noblock); }
long sci_sock_sndtimeo(const struct sock *sk, bool noblock) { return sock_sndtimeo(sk, noblock); }
int sci_sock_intr_errno(long timeo) { return sock_intr_errno(timeo); }
void sci_send_sigpipe(void) { send_sig(SIGPIPE, current, 0); }
long sci_msecs_to_jiffies(unsigned int msecs) { return msecs_to_jiffies(msecs); }

int sci_pci_register_driver(struct pci_driver *drv)
{
	return pci_register_driver(drv);
}

resource_size_t sci_pci_resource_start(struct pci_dev *pdev, int bar)
{
	return pci_resource_start(pdev, bar);
}

resource_size_t sci_pci_resource_len(struct pci_dev *pdev, int bar)
{
	return pci_resource_len(pdev, bar);
}

void sci_pci_set_drvdata(struct pci_dev *pdev, void *data) { pci_set_drvdata(pdev, data); }
void *sci_pci_get_drvdata(struct pci_dev *pdev) { return pci_get_drvdata(pdev); }
const char *sci_pci_name(const struct pci_dev *pdev) { return pci_name(pdev); }
struct pci_driver *sci_pci_driver_of(struct pci_dev *pdev) { return to_pci_driver(pdev->dev.driver); }

struct task_struct *sci_kthread_run(int (*fn)(void *), void *data, const char *name)
{
	return kthread_run(fn, data, "%s", name);
}

bool sci_kthread_should_stop(void) { return kthread_should_stop(); }
int sci_kthread_stop(struct task_struct *task) { return kthread_stop(task); }
