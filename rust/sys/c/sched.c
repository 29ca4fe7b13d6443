// SPDX-License-Identifier: GPL-2.0
/* af_sci C helpers, sched: see sched.h. No logic lives here. */
#include "sched.h"

void sci_cpu_relax(void)
{
	cpu_relax();
}

bool sci_need_resched(void)
{
	return need_resched();
}

bool sci_single_task_running(void)
{
	return single_task_running();
}

long sci_msecs_to_jiffies(unsigned int msecs) { return msecs_to_jiffies(msecs); }

s64 sci_coarse_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}

void sci_sched_current_fifo_low(void)
{
	sched_set_fifo_low(current);
}

/* Interruptible, so that the sleeping thread does not count as load. */
void sci_usleep_range(unsigned long min_us, unsigned long max_us)
{
	usleep_range_state(min_us, max_us, TASK_INTERRUPTIBLE);
}

struct task_struct *sci_kthread_run(int (*fn)(void *), void *data, const char *name)
{
	return kthread_run(fn, data, "%s", name);
}

bool sci_kthread_should_stop(void) { return kthread_should_stop(); }
int sci_kthread_stop(struct task_struct *task) { return kthread_stop(task); }
