/* How a polling worker (a DPDK lcore, the AF_XDP model's thread) waits.
 *
 * A worker with a CPU to itself keeps polling an empty queue for
 * --idle-after-us before it sleeps: a vCPU that sleeps here wakes late,
 * and the AF_XDP fill ring (2048 buffers for DPDK's PMD, 5 ms at 400k qps)
 * runs dry meanwhile. Sleeping after 64 empty polls lost 9-12% of the
 * queries at 90% of rtc's peak here; polling through the gaps between the
 * load's bursts, 0-7% (the rest is this shared VM's noise). A worker that
 * shares its CPU with another of ours still sleeps after 64 empty polls,
 * since its sleep is what lets the other one run (sched_yield instead lost
 * more: 2% against 0.06-0.4% at 400k for the pipeline on one core).
 * Either sleeps a little longer each time, doubling from 1 us up to
 * --idle-sleep-us, so an idle server costs a few wake-ups a millisecond.
 *
 * A worker under a real-time policy (the process started by `chrt -f N`;
 * threads inherit it) is not preempted by ordinary tasks: another job's
 * compile or test on its CPU no longer takes half of it in 4 ms slices
 * while the fill ring runs dry (CFS shares a CPU between sessions'
 * autogroups equally, whatever the nice value). It must still leave the
 * CPU now and then: the kernel throttles real-time tasks that run more
 * than sched_rt_runtime_us of each sched_rt_period_us (950 ms of 1 s by
 * default) by taking the CPU from them for the rest of the period, which
 * here was 45 ms once a second with every frame of it lost; and the
 * per-CPU kernel threads need some time. So it sleeps --rt-yield-us every
 * --rt-yield-every-us, busy or not; by default (0) the sleep is the share
 * the throttle needs plus 3% (800 us of every 10 ms), and its wake-up
 * preempts whatever ran meanwhile. Its idle sleeps count as such a yield.
 * Two real-time workers sharing a CPU (the pipeline on one core) have the
 * same priority, so neither preempts the other: each calls sched_yield
 * after a busy poll, which hands the CPU to the other if it is waiting. */
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "dns_internal.h"

static long read_long(const char *path, long dflt)
{
    FILE *f = fopen(path, "r");
    long v;
    if (f == NULL)
        return dflt;
    if (fscanf(f, "%ld", &v) != 1)
        v = dflt;
    fclose(f);
    return v;
}

/* The sleep a real-time worker takes every `every` us: the share of each
 * period the kernel keeps from real-time tasks (none: -1), plus 3%. */
static unsigned rt_yield_auto(unsigned every)
{
    long runtime = read_long("/proc/sys/kernel/sched_rt_runtime_us", 950000);
    long period = read_long("/proc/sys/kernel/sched_rt_period_us", 1000000);
    double kept = runtime < 0 || period <= 0 || runtime >= period
                      ? 0.0 : 1.0 - (double)runtime / (double)period;
    unsigned us = (unsigned)((kept + 0.03) * every);
    return us > 0 ? us : 1;
}

static bool policy_is_rt(void)
{
    int p = sched_getscheduler(0);
    return p == SCHED_FIFO || p == SCHED_RR;
}

void dns_poll_init(struct dns_poll *p, const struct op_dns_poll_config *pc, bool shared,
                   uint64_t *c)
{
    *p = (struct dns_poll){.after_ns = (uint64_t)pc->idle_after_us * 1000, .sleep_us = 1,
                           .idle_sleep_us = pc->idle_sleep_us, .c = c, .shared = shared,
                           .rt = policy_is_rt(),
                           .yield_every_ns = (uint64_t)pc->rt_yield_every_us * 1000,
                           .yield_us = pc->rt_yield_us ? pc->rt_yield_us
                                                       : rt_yield_auto(pc->rt_yield_every_us)};
    p->yield_at_ns = op_now_ns() + p->yield_every_ns;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static bool time_to_sleep(struct dns_poll *p)
{
    if (p->shared)
        return ++p->empty >= 64;
    uint64_t now = op_now_ns();
    if (p->since_ns == 0)
        p->since_ns = now;
    return now - p->since_ns >= p->after_ns;
}

bool dns_polled(struct dns_poll *p, bool busy)
{
    if (p->rt && op_now_ns() >= p->yield_at_ns) {
        sleep_us(p->yield_us);
        p->c[OP_DNS_C_rt_yields]++;
        p->yield_at_ns = op_now_ns() + p->yield_every_ns;
    }
    if (busy) {
        p->since_ns = 0;
        p->empty = 0;
        p->sleep_us = 1;
        if (p->rt && p->shared) /* the other worker on this CPU, at our priority, */
            sched_yield();      /* would not run otherwise until we sleep */
        return true;
    }
    if (!time_to_sleep(p))
        return false;
    sleep_us(p->sleep_us); /* it left the CPU: that stands for a real-time yield too */
    if (p->rt)
        p->yield_at_ns = op_now_ns() + p->yield_every_ns;
    p->sleep_us = p->sleep_us * 2 > p->idle_sleep_us ? p->idle_sleep_us : p->sleep_us * 2;
    return false;
}
