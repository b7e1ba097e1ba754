/* tc_sense.c - the runnable sensor: whether the process has GPU work queued.
 *
 * A channel has work the GPU has not fetched while its USERD's GPPut (the last
 * entry CUDA queued) differs from GPGet (the next one the host will fetch), or
 * work fetched and not yet launched while the host's pushbuffer Get lags its Put
 * (a launch waiting for the kernel before it), and it ran since the last look if
 * GPGet or the pushbuffer Get moved (the host fetched an entry or processed
 * methods, which it does only for a channel on the GPU). The USERD page is in
 * the process's own memory (CPU-mapped; objtree_userds finds it from the
 * channel's allocation and the RM_MAP_MEMORY + mmap of its memory), so a sample
 * is six loads per channel and no system call. Measured on the H200 (bench/results/2026-12-02-h200-probe
 * and 2026-12-03-h200-probe-words-deep-mixes): a deep queue reads pending 99.3 %
 * of the time by GPGet/GPPut (99.8 % with the pushbuffer words), a shallow one
 * (sync after each kernel) 0.1 %, a CUDA graph 80 % (90 %), eight queued 100 ms
 * kernels 75 % (87.5 %: all but the last), one long kernel with nothing behind it
 * 0 % by every word of +0x40..+0x8C: a running kernel with nothing queued behind
 * it does not show. A paused process with work waiting shows as pending (a disabled
 * channel fetches nothing), which is how a tenant that became busy gets its
 * window back. A sample counts when some channel of the GPU is pending or its
 * GPGet or pushbuffer Get moved since the previous sample: a stream of short kernels with a sync
 * after each (pending 0.1 %) moves GPGet at every kernel. What neither shows, one
 * long kernel with nothing behind it, kairosd takes from its own figure of use.
 *
 * A process whose last report was idle (under 2 % runnable: kairosd may have
 * lent its window) and whose sample now sees work queued says so at once (a
 * KAIROS_RUNNABLE_WAKE report from the control thread, tc_sense_wake), so that
 * kairosd plans it in from now rather than a period or two later. The other way
 * round, a process whose last report was busy and that has had nothing queued for
 * KAIROS_IDLE_EARLY_MS (20 ms) says so at once, flagged KAIROS_RUNNABLE_IDLE
 * (tc_sense_idle; the interval so far, which the next report covers again): its
 * window can be lent from then on, not from the end of a whole idle period; once
 * per busy report, so a process that idles in short gaps sends at most one a
 * period.
 *
 * Owns the table of USERD addresses to sample, the per-GPU sums since the last
 * report, and sense_mu. The control thread samples every 1 ms while there is
 * work, every TC_SENSE_IDLE_NS (20 ms) once nothing has been queued or moving for
 * KAIROS_IDLE_EARLY_MS (tc_sense_quiet; tc_sense.h says the trade-off). Runnable
 * time is the sum over samples of the time since the previous sample when the
 * sample saw work pending, except that a sample seeing work after a quiet one
 * counts at most one fast interval (1 ms) of the gap: the work began somewhere in
 * it, and 1 ms sampling counted one interval for a start as well, so a short
 * kernel seen by a sparse idle sample counts 1 ms, not 20. Its error is at most
 * one interval per change of state: 1 ms, or for a start after an idle spell up
 * to the idle interval, and then short (the figure errs low, never calling a
 * short burst long). Progress time is the same sum over the
 * samples that saw a channel move, each run of them less its first interval (a
 * stretch of L on the GPU moves the channels in L / interval + 1 samples on
 * average, whatever the phase, so this is unbiased): the time on the GPU, which
 * kairosd cannot get per process from NVML (its samples, about five a second,
 * each name one process), less the stretches of kernels longer than a sample
 * interval.
 *
 * Threads: refresh, sample and report run on the control thread (timectl.c) only;
 * the munmap hooks on any application thread. sense_mu guards the table and is
 * held while the control thread reads USERD pages, and by an application thread
 * around the real munmap (or MAP_FIXED mmap) of a range that may hold one and the
 * object tree's update after it, so a page is never read after it is unmapped.
 * Order: sense_mu -> state lock. Nothing here allocates. Gaps: a USERD page
 * unmapped behind the shim's back (a raw munmap system call, mremap) is not seen.
 * Signals: none are used or blocked; the loads cannot fault on a page the table
 * holds (see above).
 * Fork: tc_sense_after_fork() (the child, single-threaded) empties the table and
 * the sums and reinitialises sense_mu.
 */
#include "shim/tc_sense.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/objtree.h"
#include "shim/state.h"
#include "shim/tc_pause.h"

#define SENSE_MAX 1024

struct sense_chan {
    const volatile uint32_t *userd;
    uint32_t gpu;
    uint32_t last_get;        /* GPGet at the previous sample */
    uint32_t last_pb_get;     /* the pushbuffer Get (low word) at the previous sample */
};

struct sense_sum {
    uint64_t since_ns, last_ns, runnable_ns, progress_ns;
    uint32_t samples, pending;
    bool pending_now;         /* the last sample saw work pending */
    uint64_t quiet_since_ns;  /* the first sample of the present run without work
                               * pending, 0 while work is (kept across reports) */
    bool early_armed;         /* the last report was busy: an early idle report may go */
    bool progress_now;        /* the last sample saw a channel move (kept across reports) */
    bool idle_reported;       /* the last report sent was idle: a wake is due at work */
};
#define SENSE_IDLE_FRAC 50    /* idle: runnable under 1/50 (2 %) of the interval, as kairosd */

static pthread_mutex_t sense_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool sense_on;
static struct sense_chan sense_tbl[SENSE_MAX];
static size_t sense_n;
static bool sense_partial;              /* some live channel has no USERD in the table */
static uint32_t sense_channels[KAIROS_MAX_GPUS];
static struct objtree_userd sense_list[SENSE_MAX];
static struct sense_sum sense_sums[KAIROS_MAX_GPUS]; /* the control thread's */

void tc_sense_start(void)
{
    atomic_store(&sense_on, true);
}

bool tc_sense_active(void)
{
    return atomic_load(&sense_on);
}

void tc_sense_refresh(void)
{
    pthread_mutex_lock(&sense_mu);
    size_t n = 0, live = 0;
    struct objtree *t = state_lock();
    if (t) {
        n = objtree_userds(t, sense_list, SENSE_MAX);
        live = objtree_list(t, RM_KIND_CHANNEL, NULL, 0);
    }
    state_unlock();
    sense_partial = n > SENSE_MAX || live > n;
    n = n < SENSE_MAX ? n : SENSE_MAX;
    uint64_t first_own = tc_pause_first_own_file();
    memset(sense_channels, 0, sizeof sense_channels);
    sense_n = 0;
    for (size_t i = 0; i < n; i++) {
        const struct objtree_userd *u = &sense_list[i];
        if (u->file_id < first_own)
            continue; /* a forking parent's channel: its runnable time is its own */
        uint32_t gpu = u->gpu < 0 || u->gpu >= KAIROS_MAX_GPUS ? 0 : (uint32_t)u->gpu;
        const volatile uint32_t *userd = (const volatile uint32_t *)(uintptr_t)u->addr;
        sense_tbl[sense_n++] = (struct sense_chan){userd, gpu, userd[OBJTREE_USERD_GP_GET / 4],
                                                   userd[OBJTREE_USERD_PB_GET / 4]};
        sense_channels[gpu]++;
    }
    pthread_mutex_unlock(&sense_mu);
}

/* The host has fetched methods it has not processed yet (its pushbuffer Get,
 * pb_get, behind Put): a launch waits for the kernel before it. */
static bool pushbuffer_behind(const volatile uint32_t *userd, uint32_t pb_get)
{
    return pb_get != userd[OBJTREE_USERD_PB_PUT / 4] ||
           userd[OBJTREE_USERD_PB_GET_HI / 4] != userd[OBJTREE_USERD_PB_PUT_HI / 4];
}

/* The host moved through the channel's work since the last sample (GPGet get, the
 * pushbuffer Get pb_get): it fetched a GPFIFO entry or processed pushbuffer
 * methods, which it does only while the channel is on the GPU. Updates the
 * channel's last words. */
static bool moved(struct sense_chan *c, uint32_t get, uint32_t pb_get)
{
    bool m = get != c->last_get || pb_get != c->last_pb_get;
    c->last_get = get;
    c->last_pb_get = pb_get;
    return m;
}

void tc_sense_sample(uint64_t now_ns)
{
    bool pending[KAIROS_MAX_GPUS] = {false}, progress[KAIROS_MAX_GPUS] = {false};
    pthread_mutex_lock(&sense_mu);
    for (size_t i = 0; i < sense_n; i++) {
        struct sense_chan *c = &sense_tbl[i];
        uint32_t get = c->userd[OBJTREE_USERD_GP_GET / 4];
        uint32_t pb_get = c->userd[OBJTREE_USERD_PB_GET / 4];
        bool m = moved(c, get, pb_get);
        progress[c->gpu] |= m;
        /* queued, fetched and not yet launched, or moved since the last sample */
        pending[c->gpu] |= m || get != c->userd[OBJTREE_USERD_GP_PUT / 4] ||
                           pushbuffer_behind(c->userd, pb_get);
    }
    pthread_mutex_unlock(&sense_mu);
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        struct sense_sum *s = &sense_sums[g];
        if (!s->since_ns)
            s->since_ns = s->last_ns = now_ns;
        uint64_t gap = now_ns - s->last_ns;
        uint64_t onset = gap < TC_SENSE_FAST_NS ? gap : TC_SENSE_FAST_NS;
        if (pending[g]) /* work that began after a quiet sample: at most one fast interval */
            s->runnable_ns += s->pending_now ? gap : onset;
        if (progress[g] && s->progress_now)
            s->progress_ns += gap;
        s->progress_now = progress[g];
        s->last_ns = now_ns;
        s->samples++;
        s->pending += pending[g];
        s->pending_now = pending[g];
        if (pending[g])
            s->quiet_since_ns = 0;
        else if (!s->quiet_since_ns)
            s->quiet_since_ns = now_ns;
    }
}

bool tc_sense_report(uint32_t gpu, uint64_t now_ns, struct kairos_runnable *out)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return false;
    struct sense_sum *s = &sense_sums[gpu];
    if (!s->since_ns || now_ns <= s->since_ns)
        return false;
    memset(out, 0, sizeof *out);
    out->gpu = gpu;
    out->interval_us = (now_ns - s->since_ns) / 1000;
    out->runnable_us = s->runnable_ns / 1000;
    if (out->runnable_us > out->interval_us)
        out->runnable_us = out->interval_us;
    uint64_t progress_us = s->progress_ns / 1000;
    progress_us = progress_us < out->runnable_us ? progress_us : out->runnable_us;
    out->progress_us = (uint32_t)(progress_us < UINT32_MAX ? progress_us : UINT32_MAX);
    out->samples = s->samples;
    out->pending_samples = s->pending;
    out->unpaused_us = tc_pause_unpaused(gpu, now_ns, s->since_ns, false) / 1000;
    if (out->unpaused_us > out->interval_us)
        out->unpaused_us = out->interval_us;
    pthread_mutex_lock(&sense_mu);
    out->channels = sense_channels[gpu];
    out->flags = KAIROS_RUNNABLE_PROGRESS | (sense_partial ? KAIROS_RUNNABLE_PARTIAL : 0);
    pthread_mutex_unlock(&sense_mu);
    return true;
}

void tc_sense_reported(uint32_t gpu, uint64_t now_ns)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return;
    const struct sense_sum *s = &sense_sums[gpu];
    bool idle = s->since_ns && now_ns > s->since_ns &&
                s->runnable_ns * SENSE_IDLE_FRAC < now_ns - s->since_ns;
    /* quiet since an early idle report and still quiet: kairosd has it idle */
    idle |= s->idle_reported && s->quiet_since_ns && !s->early_armed;
    sense_sums[gpu] = (struct sense_sum){.since_ns = now_ns, .last_ns = now_ns,
                                         .idle_reported = idle, .progress_now = s->progress_now,
                                         .pending_now = s->pending_now,
                                         .quiet_since_ns = s->quiet_since_ns,
                                         .early_armed = !idle};
    (void)tc_pause_unpaused(gpu, now_ns, now_ns, true);
}

bool tc_sense_quiet(uint32_t mask, uint64_t now_ns, uint64_t for_ns)
{
    for (uint32_t g = 0; g < KAIROS_MAX_GPUS; g++) {
        const struct sense_sum *s = &sense_sums[g];
        if ((mask & (1u << g)) && (!s->quiet_since_ns || now_ns - s->quiet_since_ns < for_ns))
            return false;
    }
    return true;
}

bool tc_sense_wake(uint32_t gpu, uint64_t now_ns, struct kairos_runnable *out)
{
    if (gpu >= KAIROS_MAX_GPUS || !sense_sums[gpu].idle_reported ||
        !sense_sums[gpu].pending_now || !tc_sense_report(gpu, now_ns, out))
        return false;
    out->flags |= KAIROS_RUNNABLE_WAKE;
    return true;
}

bool tc_sense_idle(uint32_t gpu, uint64_t now_ns, struct kairos_runnable *out)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return false;
    const struct sense_sum *s = &sense_sums[gpu];
    if (!s->early_armed || !s->quiet_since_ns ||
        now_ns - s->quiet_since_ns < KAIROS_IDLE_EARLY_MS * 1000000ull ||
        !tc_sense_report(gpu, now_ns, out))
        return false;
    out->flags |= KAIROS_RUNNABLE_IDLE;
    return true;
}

void tc_sense_idled(uint32_t gpu)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return;
    sense_sums[gpu].idle_reported = true; /* the next work it sees is a wake */
    sense_sums[gpu].early_armed = false;
}

void tc_sense_woke(uint32_t gpu)
{
    if (gpu < KAIROS_MAX_GPUS)
        sense_sums[gpu].idle_reported = false;
}

bool timectl_unmap_begin(uint64_t addr, uint64_t len)
{
    if (!atomic_load(&sense_on) || !state_may_hold_mapping(addr, len))
        return false;
    pthread_mutex_lock(&sense_mu);
    size_t k = 0;
    for (size_t i = 0; i < sense_n; i++) {
        uint64_t a = (uint64_t)(uintptr_t)sense_tbl[i].userd;
        if (a < addr + len && addr < a + OBJTREE_USERD_SPAN)
            continue; /* goes with the range */
        sense_tbl[k++] = sense_tbl[i];
    }
    if (k != sense_n)
        sense_partial = true; /* until the next refresh says otherwise */
    sense_n = k;
    return true;
}

void timectl_unmap_end(bool held)
{
    if (held)
        pthread_mutex_unlock(&sense_mu);
}

void tc_sense_reset(void)
{
    pthread_mutex_lock(&sense_mu);
    atomic_store(&sense_on, false);
    sense_n = 0;
    sense_partial = false;
    memset(sense_channels, 0, sizeof sense_channels);
    memset(sense_sums, 0, sizeof sense_sums);
    pthread_mutex_unlock(&sense_mu);
}

void tc_sense_after_fork(void)
{
    pthread_mutex_init(&sense_mu, NULL);
    atomic_store(&sense_on, false);
    sense_n = 0;
    sense_partial = false;
    memset(sense_channels, 0, sizeof sense_channels);
    memset(sense_sums, 0, sizeof sense_sums);
}
