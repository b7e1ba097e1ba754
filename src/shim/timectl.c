/* timectl.c - the policy link: the daemon's time policies and the control thread.
 *
 * Owns the per-GPU policies (as kairosd pushed them on the agent's connection),
 * the control thread that follows them, and the fork handler of all time control.
 * The mechanism is tc_pause.c (FIFO_DISABLE_CHANNELS, SET_TIMESLICE); the runnable
 * sensor tc_sense.c, which this thread drives while a policy has
 * KAIROS_TIME_REPORT, every 1 ms while there is work and, once there has been
 * none for 20 ms, every 20 ms where kairosd acts on a wake at once
 * (KAIROS_TIME_QUICK_WAKE), else once a report period (next_sample_at: an idle
 * process costs 50 or 10 wakeups a second, not 1000), sending KAIROS_MSG_RUNNABLE
 * once a period (never waiting for the agent: a busy link delays a report, never
 * a window edge), and at once (a wake) when work shows after an idle report; the
 * window arithmetic is timectl_window_paused below.
 *
 * Threads: the policy handler runs on whichever thread read the push, under the
 * agent's mutex: it only stores the policy and wakes the control thread. The
 * control thread (started at the first policy, all signals blocked so the
 * application's signals never land on it) applies timeslice changes at once and
 * follows the strict windows (period, phase, duty from epoch_ns on
 * CLOCK_MONOTONIC), waking at each window edge on an absolute deadline. tc_mu
 * guards the policies and the thread; the thread drops it before acting, so it is
 * never held while tc_pause.c's lock or the state lock is taken.
 * Signals: none are handled; nothing here can raise one.
 * Fork: a child handler (registered at load) makes the child start clean: no
 * thread, fresh lock and condition, no policy, nothing paused (tc_pause.c), nothing
 * sampled (tc_sense.c).
 */
#include "shim/timectl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim/agent.h"
#include "shim/own_thread.h"
#include "shim/settings.h"
#include "shim/tc_pause.h"
#include "shim/tc_sense.h"

#define TC_REFRESH_NS 50000000ull   /* the sensor reads the channels' USERD anew every 50 ms */
#define TC_REPORT_US 100000u        /* report interval when the policy has no period */

struct tc_gpu {
    bool have;
    bool ts_dirty;
    struct kairos_time_policy pol;
};

static pthread_mutex_t tc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tc_cv;
static bool tc_cv_ready, tc_thread_running, tc_stop;
static pthread_t tc_thread;
static struct tc_gpu tc_gpus[KAIROS_MAX_GPUS];
static _Atomic uint64_t st_turns, st_samples, st_sample_ns, st_reports,
    st_wake_reports; /* timectl_stats */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the policy and the control thread ---------------------------------------------- */

bool timectl_window_paused(const struct kairos_time_policy *p, uint64_t now_ns,
                           uint64_t *next_ns)
{
    *next_ns = UINT64_MAX;
    if (p->period_us == 0 || p->duty_us >= p->period_us)
        return false;
    if (p->duty_us == 0)
        return true;
    uint64_t period = (uint64_t)p->period_us * 1000, duty = (uint64_t)p->duty_us * 1000;
    uint64_t phase = (uint64_t)p->phase_us * 1000 % period;
    /* position in the period, counted from the window's start; now may precede epoch */
    uint64_t since = now_ns >= p->epoch_ns ? (now_ns - p->epoch_ns) % period
                                           : (period - (p->epoch_ns - now_ns) % period) % period;
    uint64_t pos = (since + period - phase) % period;
    if (pos < duty) {
        *next_ns = now_ns + (duty - pos);
        return false;
    }
    *next_ns = now_ns + (period - pos);
    return true;
}

/* The sensor's schedule (the control thread's own, reset at fork). */
static uint64_t tc_next_sample, tc_next_refresh, tc_next_report[KAIROS_MAX_GPUS];

/* GPUs whose policy asks for runnable reports, and how often (each's period);
 * *quick: those of them whose wake kairosd acts on at once. Call with tc_mu. */
static uint32_t reporting_locked(uint64_t every_ns[KAIROS_MAX_GPUS], uint32_t *quick)
{
    uint32_t mask = 0;
    *quick = 0;
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        const struct tc_gpu *s = &tc_gpus[g];
        every_ns[g] = 0;
        if (!s->have || !(s->pol.flags & KAIROS_TIME_REPORT))
            continue;
        mask |= 1u << g;
        if (s->pol.flags & KAIROS_TIME_QUICK_WAKE)
            *quick |= 1u << g;
        every_ns[g] = (uint64_t)(s->pol.period_us ? s->pol.period_us : TC_REPORT_US) * 1000;
    }
    return mask;
}

/* When to sample after a sample at now: in 1 ms while some reporting GPU had work
 * in the last KAIROS_IDLE_EARLY_MS or a report is owed (the link was busy), else
 * in TC_SENSE_IDLE_NS where kairosd acts on a wake at once (quick), in
 * TC_SENSE_REST_NS where it does not (tc_sense.h says the trade-offs), but no later
 * than the next report is due (the idle intervals divide the 100 ms period, so
 * that costs no extra wakeup) and never sooner than 1 ms. Without tc_mu. */
static uint64_t next_sample_at(uint32_t mask, uint32_t quick, uint64_t now, bool owed)
{
    bool quiet = !owed && tc_sense_quiet(mask, now, KAIROS_IDLE_EARLY_MS * 1000000ull);
    uint64_t rest = quick ? TC_SENSE_IDLE_NS : TC_SENSE_REST_NS;
    uint64_t next = now + (quiet ? rest : TC_SENSE_FAST_NS);
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        uint64_t due = tc_next_report[g];
        if ((mask & (1u << g)) && due && due < next)
            next = due > now + TC_SENSE_FAST_NS ? due : now + TC_SENSE_FAST_NS;
    }
    return next;
}

/* Sends a report now; false when the agent's link is busy (try again later). */
static bool send_now(const struct kairos_runnable *r)
{
    return agent_report_runnable(r) != -EBUSY; /* sent, or no daemon to send it to */
}

/* gpu's reports due at now: a wake, an early idle report, the period's. Returns
 * whether one is owed because the link was busy (sent at a later sample). */
static bool report_gpu(uint32_t g, uint64_t every_ns, uint64_t now)
{
    struct kairos_runnable r;
    bool owed = false;
    if (tc_sense_wake(g, now, &r)) {
        if (send_now(&r)) {
            tc_sense_woke(g); /* back from an idle report: kairosd plans it in now */
            atomic_fetch_add(&st_wake_reports, 1);
        } else {
            owed = true;
        }
    }
    if (tc_sense_idle(g, now, &r)) {
        if (send_now(&r))
            tc_sense_idled(g); /* quiet for 20 ms: its window may be lent now */
        else
            owed = true;
    }
    if (now < tc_next_report[g] || !tc_sense_report(g, now, &r))
        return owed;
    if (!send_now(&r))
        return true; /* the link is busy: the interval grows to the next sample */
    tc_sense_reported(g, now);
    tc_next_report[g] = now + every_ns;
    atomic_fetch_add(&st_reports, 1);
    return owed;
}

/* One turn of the sensor at now: a sample, the table read again now and then,
 * and each reporting GPU's figures sent when due (if the agent is busy, at the
 * next sample, 1 ms later). Without tc_mu. */
static void sense_step(uint32_t mask, uint32_t quick, const uint64_t every_ns[KAIROS_MAX_GPUS],
                       uint64_t now)
{
    if (!tc_sense_active())
        tc_sense_start();
    if (now >= tc_next_refresh) {
        tc_sense_refresh();
        tc_next_refresh = now + TC_REFRESH_NS;
    }
    tc_sense_sample(now);
    atomic_fetch_add(&st_samples, 1);
    atomic_fetch_add(&st_sample_ns, mono_ns() - now);
    bool owed = false;
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        if (!(mask & (1u << g))) {
            tc_next_report[g] = 0;
        } else if (!tc_next_report[g]) { /* a new reporting GPU: its first interval starts now */
            tc_sense_reported(g, now);
            tc_next_report[g] = now + every_ns[g];
        } else {
            owed |= report_gpu(g, every_ns[g], now);
        }
    }
    tc_next_sample = next_sample_at(mask, quick, now, owed);
}

static void *control_thread(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&tc_mu);
    while (!tc_stop) {
        bool acted = false;
        uint64_t deadline = UINT64_MAX;
        uint64_t every_ns[KAIROS_MAX_GPUS];
        uint32_t quick;
        uint32_t mask = reporting_locked(every_ns, &quick);
        if (mask) {
            uint64_t now = mono_ns();
            if (now >= tc_next_sample) {
                pthread_mutex_unlock(&tc_mu);
                sense_step(mask, quick, every_ns, now);
                pthread_mutex_lock(&tc_mu);
            }
            deadline = tc_next_sample;
        }
        for (uint32_t g = 0; g < KAIROS_MAX_GPUS && !acted; g++) {
            struct tc_gpu *s = &tc_gpus[g];
            if (!s->have)
                continue;
            if (s->ts_dirty) { /* 0: the application's own, given back if ours were set */
                s->ts_dirty = false;
                uint64_t us = s->pol.timeslice_us;
                pthread_mutex_unlock(&tc_mu);
                tc_pause_set_timeslice(g, us);
                pthread_mutex_lock(&tc_mu);
                acted = true;
                continue;
            }
            uint64_t next;
            bool want = timectl_window_paused(&s->pol, mono_ns(), &next);
            if (want != timectl_is_paused(g)) {
                pthread_mutex_unlock(&tc_mu);
                if (want)
                    timectl_pause(g);
                else
                    timectl_resume(g);
                pthread_mutex_lock(&tc_mu);
                acted = true;
                continue;
            }
            if (next < deadline)
                deadline = next;
        }
        if (acted || tc_stop)
            continue;
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&tc_cv, &tc_mu);
        } else {
            struct timespec ts = {(time_t)(deadline / 1000000000ull),
                                  (long)(deadline % 1000000000ull)};
            pthread_cond_timedwait(&tc_cv, &tc_mu, &ts);
        }
        atomic_fetch_add(&st_turns, 1);
    }
    pthread_mutex_unlock(&tc_mu);
    return NULL;
}

static void init_cv_locked(void)
{
    if (tc_cv_ready)
        return;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC); /* windows are on CLOCK_MONOTONIC */
    pthread_cond_init(&tc_cv, &a);
    pthread_condattr_destroy(&a);
    tc_cv_ready = true;
}

static void start_thread_locked(void)
{
    if (tc_thread_running)
        return;
    init_cv_locked();
    tc_stop = false;
    tc_thread_running = own_thread_start(&tc_thread, control_thread, NULL);
}

void timectl_policy(const struct kairos_time_policy *p)
{
    if (p->gpu >= KAIROS_MAX_GPUS)
        return;
    pthread_mutex_lock(&tc_mu);
    struct tc_gpu *s = &tc_gpus[p->gpu];
    if (!s->have || p->seq > s->pol.seq) {
        s->ts_dirty = !s->have || p->timeslice_us != s->pol.timeslice_us;
        s->have = true;
        s->pol = *p;
        tc_pause_activate();
        start_thread_locked();
        if (tc_cv_ready)
            pthread_cond_signal(&tc_cv);
    }
    pthread_mutex_unlock(&tc_mu);
}

static void policy_from_agent(const struct kairos_time_policy *p)
{
    timectl_policy(p); /* quick: stores and wakes the thread, under the agent's mutex */
}

void timectl_init(void)
{
    agent_set_policy_handler(policy_from_agent);
}

void timectl_stats(struct timectl_stats *s)
{
    memset(s, 0, sizeof *s);
    tc_pause_stats(s);
    s->turns = atomic_load(&st_turns);
    s->samples = atomic_load(&st_samples);
    s->sample_ns = atomic_load(&st_sample_ns);
    s->reports = atomic_load(&st_reports);
    s->wake_reports = atomic_load(&st_wake_reports);
}

/* With KAIROS_LOG=stderr, a process whose channels were sampled says at exit what the
 * sensor cost it, and one that was paused how often and how long the driver took to
 * pause and resume it (the GPU suite reads these lines). */
__attribute__((destructor)) static void report_at_exit(void)
{
    struct timectl_stats s;
    timectl_stats(&s);
    if (!settings_get()->log_stderr)
        return;
    if (s.samples)
        dprintf(2, "kairos[%d]: time sensor: samples=%llu sample_mean_us=%.2f sample_ms=%.1f\n",
                (int)getpid(), (unsigned long long)s.samples, s.sample_ns / 1e3 / s.samples,
                s.sample_ns / 1e6);
    if (!s.pauses)
        return;
    dprintf(2,
            "kairos[%d]: time control: pauses=%llu pause_mean_us=%.1f pause_max_us=%.1f "
            "resumes=%llu resume_mean_us=%.1f resume_max_us=%.1f\n",
            (int)getpid(), (unsigned long long)s.pauses, s.pause_ns / 1e3 / s.pauses,
            s.pause_max_ns / 1e3, (unsigned long long)s.resumes,
            s.resumes ? s.resume_ns / 1e3 / s.resumes : 0.0, s.resume_max_ns / 1e3);
}

static void stop_thread(void)
{
    pthread_mutex_lock(&tc_mu);
    bool join = tc_thread_running;
    tc_stop = true;
    if (tc_cv_ready)
        pthread_cond_signal(&tc_cv);
    pthread_mutex_unlock(&tc_mu);
    if (join)
        pthread_join(tc_thread, NULL);
    pthread_mutex_lock(&tc_mu);
    tc_thread_running = false;
    tc_stop = false;
    memset(tc_gpus, 0, sizeof tc_gpus);
    pthread_mutex_unlock(&tc_mu);
}

static void forget_sense_schedule(void)
{
    tc_next_sample = tc_next_refresh = 0;
    memset(tc_next_report, 0, sizeof tc_next_report);
    atomic_store(&st_turns, 0);
    atomic_store(&st_samples, 0);
    atomic_store(&st_sample_ns, 0);
    atomic_store(&st_reports, 0);
    atomic_store(&st_wake_reports, 0);
}

void timectl_reset(void)
{
    stop_thread();
    tc_pause_reset();
    tc_sense_reset();
    forget_sense_schedule();
}

/* In a forked child, alone: no control thread runs here (threads do not survive
 * fork), its lock and condition may have been held or waited on by the parent's
 * thread, and the policies are the parent's. The child starts as a process that
 * never had a policy: unpaused, and taking the daemon's next policy whatever its
 * sequence number (the child registers anew with kairosd, which sends it). */
static void after_fork_in_child(void)
{
    pthread_mutex_init(&tc_mu, NULL);
    tc_cv_ready = false; /* a fresh condition at the next policy */
    tc_thread_running = false;
    tc_stop = false;
    memset(tc_gpus, 0, sizeof tc_gpus);
    forget_sense_schedule();
    tc_pause_after_fork();
    tc_sense_after_fork();
}

__attribute__((constructor)) static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_in_child);
}
