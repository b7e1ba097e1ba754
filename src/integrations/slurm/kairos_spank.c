/* kairos_spank.c - the Slurm SPANK plugin kairos_spank.so: a job step run with
 * --gpu-mem=SIZE (and --gpu-share, --gpu-limit, --gpu-priority) becomes a Kairos
 * tenant on each node it runs on, job-<jobid>.<stepid>, whose processes are
 * members whatever their environment, and which goes when the step ends.
 *
 * Where each thing happens (slurmstepd, as root):
 *   slurm_spank_init_post_opt   once per step: kairos tenant set NAME --mem ...
 *                               (a failure fails the step: no task runs uncapped)
 *   slurm_spank_task_init_privileged  in each task's own process before exec:
 *                               kairos tenant admit NAME <its pid> (its descendants
 *                               are members), and KAIROS_TENANT and LD_PRELOAD of
 *                               libkairos.so in its environment (the task's shim
 *                               finds kairosd through the node's
 *                               /etc/kairos/shim.conf, never its environment; the
 *                               plugin's socket= is for its own kairos commands
 *                               and must name the same daemon)
 *   slurm_spank_exit            once per step: kairos tenant del NAME
 * In srun (local context) the options are only checked, so that a bad value is
 * refused before the job is queued. spank_job.c has the rest, without Slurm.
 *
 * Thread rules: SPANK calls the plugin from one thread per process; the settings
 * are per process (static), filled by the option callbacks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "integrations/slurm/spank_job.h"

SPANK_PLUGIN(kairos, 1)

enum { OPT_MEM = 1, OPT_SHARE, OPT_LIMIT, OPT_PRIORITY };

static struct spank_job job;
static bool job_ready;
static char tenant[SPANK_JOB_NAME_MAX];
static bool tenant_made;

static const char *const option_names[] = {"", "gpu-mem", "gpu-share", "gpu-limit",
                                           "gpu-priority"};

static void ensure_init(void)
{
    if (!job_ready) {
        spank_job_init(&job);
        job_ready = true;
    }
}

static int on_option(int val, const char *arg, int remote)
{
    char err[256];
    ensure_init();
    if (val < OPT_MEM || val > OPT_PRIORITY)
        return -1;
    if (spank_job_option(&job, option_names[val], arg, err, sizeof err)) {
        slurm_error("kairos: %s", err);
        return -1;
    }
    return 0;
}

/* Registered in slurm_spank_init in every context (srun, sbatch and salloc, and
 * slurmstepd), so that sbatch --gpu-mem=... reaches the job's steps too. */
static struct spank_option options[] = {
    {"gpu-mem", "SIZE", "GPU memory quota of the job step on each of its GPUs (kairos): "
     "8G, 512MiB, 50%", 1, OPT_MEM, on_option},
    {"gpu-share", "PCT", "GPU time guaranteed to the job step whenever others compete "
     "(kairos; with --gpu-mem)", 1, OPT_SHARE, on_option},
    {"gpu-limit", "PCT", "cap on the job step's GPU time, even on an idle GPU (kairos; "
     "with --gpu-mem)", 1, OPT_LIMIT, on_option},
    {"gpu-priority", "latency|normal|batch", "the job step's GPU scheduling priority "
     "(kairos; with --gpu-mem)", 1, OPT_PRIORITY, on_option},
    SPANK_OPTIONS_TABLE_END,
};

/* Runs one kairos command; 0, or -1 after logging what it said. */
static int run_kairos(const char *const *argv, const char *what)
{
    char out[1024];
    int rc = spank_job_run(&job, argv, out, sizeof out);
    if (rc == 0)
        return 0;
    if (rc == 124)
        slurm_error("kairos: %s: '%s tenant %s' did not answer within %u s", what,
                    job.kairos, argv[2], job.timeout_s);
    else if (rc < 0)
        slurm_error("kairos: %s: cannot run %s: %s", what, job.kairos, strerror(-rc));
    else
        slurm_error("kairos: %s: kairos tenant %s failed (exit %d): %s", what, argv[2], rc,
                    out);
    return -1;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    char err[256];
    ensure_init();
    for (int i = 0; i < ac; i++)
        if (spank_job_arg(&job, av[i], err, sizeof err)) {
            slurm_error("kairos: %s", err);
            return -1;
        }
    for (struct spank_option *o = options; o->name; o++)
        if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
            slurm_error("kairos: cannot register --%s", o->name);
            return -1;
        }
    return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    char err[256];
    ensure_init();
    if (!spank_job_wanted(&job))
        return 0;
    if (spank_job_check(&job, err, sizeof err)) {
        slurm_error("kairos: %s", err);
        return -1;
    }
    if (!spank_remote(sp))
        return 0;
    uint32_t job_id = 0, step_id = 0;
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
        slurm_error("kairos: cannot read the job and step ids");
        return -1;
    }
    spank_job_tenant(job_id, step_id, tenant, sizeof tenant);
    char gpus[256];
    bool have_gpus = spank_getenv(sp, "SLURM_STEP_GPUS", gpus, sizeof gpus) == ESPANK_SUCCESS ||
                     spank_getenv(sp, "SLURM_JOB_GPUS", gpus, sizeof gpus) == ESPANK_SUCCESS;
    const char *argv[SPANK_JOB_ARGV_MAX];
    if (spank_job_argv_set(&job, tenant, have_gpus && gpus[0] ? gpus : NULL, argv,
                           SPANK_JOB_ARGV_MAX) ||
        run_kairos(argv, "creating the step's tenant"))
        return -1;
    tenant_made = true;
    slurm_info("kairos: job step tenant %s: --mem %s%s%s", tenant, job.mem,
               job.share ? " --share " : "", job.share ? job.share : "");
    return 0;
}

/* LD_PRELOAD with the shim first, keeping what the job had. */
static int preload(spank_t sp)
{
    if (!job.shim)
        return 0;
    char old[4096], val[4096 + 512];
    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof old) != ESPANK_SUCCESS)
        old[0] = 0;
    snprintf(val, sizeof val, "%s%s%s", job.shim, old[0] ? " " : "", old);
    return spank_setenv(sp, "LD_PRELOAD", val, 1) == ESPANK_SUCCESS ? 0 : -1;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
    if (!tenant_made)
        return 0;
    char pid_text[24];
    const char *argv[SPANK_JOB_ARGV_MAX];
    if (spank_job_argv_admit(&job, tenant, getpid(), pid_text, sizeof pid_text, argv,
                             SPANK_JOB_ARGV_MAX) ||
        run_kairos(argv, "admitting the task"))
        return -1;
    if (spank_setenv(sp, "KAIROS_TENANT", tenant, 1) != ESPANK_SUCCESS || preload(sp)) {
        slurm_error("kairos: cannot set the task's environment");
        return -1;
    }
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (!tenant_made || !spank_remote(sp))
        return 0;
    const char *argv[SPANK_JOB_ARGV_MAX];
    tenant_made = false;
    if (spank_job_argv_del(&job, tenant, argv, SPANK_JOB_ARGV_MAX) ||
        run_kairos(argv, "removing the step's tenant"))
        return -1;
    return 0;
}
