// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, wait: see wait.h. No logic lives here. */
#include "wait.h"

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

/*
 * The callbacks every AF_SCI sk starts with, as sock_init_data() installs the kernel's
 * (which are not exported). A kernel user (iscsi_tcp) may replace them, as it does on a
 * TCP sock, and chain to these.
 */
static void sci_def_readable(struct sock *sk)
{
	sci_wake(sk, EPOLLIN | EPOLLPRI | EPOLLRDNORM | EPOLLRDBAND, SOCK_WAKE_WAITD, POLL_IN);
}

static void sci_def_write_space(struct sock *sk)
{
	sci_wake(sk, EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND, SOCK_WAKE_SPACE, POLL_OUT);
}

static void sci_def_state_change(struct sock *sk)
{
	sci_wake(sk, 0, 0, 0);
}

void sci_sk_set_default_callbacks(struct sock *sk)
{
	sk->sk_data_ready = sci_def_readable;
	sk->sk_write_space = sci_def_write_space;
	sk->sk_state_change = sci_def_state_change;
}

/* A kernel user installed its own sk_data_ready: it reads when told, as on TCP. */
static bool sci_custom_reader(struct sock *sk)
{
	return READ_ONCE(sk->sk_data_ready) != sci_def_readable;
}

bool sci_sock_watched(struct sock *sk)
{
	bool watched;

	rcu_read_lock();
	watched = skwq_has_sleeper(rcu_dereference(sk->sk_wq)) ||
		  sock_flag(sk, SOCK_FASYNC) || sci_custom_reader(sk);
	rcu_read_unlock();
	return watched;
}

void sci_wake_readable(struct sock *sk)
{
	READ_ONCE(sk->sk_data_ready)(sk);
}

void sci_wake_writable(struct sock *sk)
{
	READ_ONCE(sk->sk_write_space)(sk);
}

/*
 * Pairs with sci_note_no_room(): a writer sets SOCK_NOSPACE, then looks at the ring; the
 * doorbell's look read the peer's cursor before this, so either the writer saw the
 * space or this sees the flag.
 */
void sci_wake_space(struct sock *sk)
{
	struct socket *sock = READ_ONCE(sk->sk_socket);

	smp_mb();
	if (sock && test_and_clear_bit(SOCK_NOSPACE, &sock->flags))
		sci_wake_writable(sk);
}

void sci_note_no_room(struct sock *sk)
{
	struct socket *sock = READ_ONCE(sk->sk_socket);

	if (sock)
		set_bit(SOCK_NOSPACE, &sock->flags);
	smp_mb__after_atomic();
}

/*
 * Only the state callback: the peer's end of stream or reset comes with a doorbell, which
 * wakes readers too (a kernel reader learns of it by reading, read_sock sets sk_state),
 * and a local shutdown must not make a kernel user read (iscsi_tcp's reader must not run
 * once it restored the callbacks, which it does after its own shutdown).
 */
void sci_wake_state(struct sock *sk)
{
	READ_ONCE(sk->sk_state_change)(sk);
}

void sci_wake_error(struct sock *sk)
{
	sci_wake(sk, EPOLLERR, SOCK_WAKE_IO, POLL_ERR);
}

/* woken_wake_function(), noting when the first wake-up came (under the queue's lock). */
static int sci_wait_wake(struct wait_queue_entry *entry, unsigned int mode, int sync, void *key)
{
	struct sci_wait *wait = container_of(entry, struct sci_wait, entry);

	if (!READ_ONCE(wait->woken_at))
		WRITE_ONCE(wait->woken_at, ktime_get_ns());
	return woken_wake_function(entry, mode, sync, key);
}

void sci_wait_init(struct sci_wait *wait)
{
	init_wait(&wait->entry);
	wait->entry.func = sci_wait_wake;
	wait->woken_at = 0;
	wait->wake_ns = 0;
}

void sci_wait_add(struct sock *sk, struct sci_wait *wait)
{
	add_wait_queue(sk_sleep(sk), &wait->entry);
}

long sci_wait_sleep(struct sci_wait *wait, long timeo)
{
	u64 start = ktime_get_ns(), woken, now;
	long left;

	WRITE_ONCE(wait->woken_at, 0);
	left = wait_woken(&wait->entry, TASK_INTERRUPTIBLE, timeo);
	now = ktime_get_ns();
	woken = READ_ONCE(wait->woken_at);
	/* A wake-up that came before this sleep (wait_woken returned at once) cost none. */
	wait->wake_ns = woken >= start && woken <= now ? now - woken : 0;
	return left;
}

void sci_wait_remove(struct sock *sk, struct sci_wait *wait)
{
	remove_wait_queue(sk_sleep(sk), &wait->entry);
}

bool sci_signal_pending(void) { return signal_pending(current); }
long sci_sock_rcvtimeo(const struct sock *sk, bool noblock) { return sock_rcvtimeo(sk, noblock); }
long sci_sock_sndtimeo(const struct sock *sk, bool noblock) { return sock_sndtimeo(sk, noblock); }
int sci_sock_intr_errno(long timeo) { return sock_intr_errno(timeo); }
void sci_send_sigpipe(void) { send_sig(SIGPIPE, current, 0); }
