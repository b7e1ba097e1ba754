/* spank_job.h - what the Slurm plugin (kairos_spank.c) does for a job step,
 * without Slurm: the job options it takes (--gpu-mem, --gpu-share, --gpu-limit,
 * --gpu-priority) checked as kairos checks them, the step's tenant name, and the
 * kairos commands that make the tenant, admit a task and remove the tenant, run by
 * one function (spank_job_run) with a time limit.
 *
 * The commands are those of `kairos tenant` (kairos-tenant(1)):
 *   kairos tenant set job-<jobid>.<stepid> --mem SIZE [--gpus LIST] [--share P]
 *                 [--limit P] [--priority X]
 *   kairos tenant admit NAME PID
 *   kairos tenant del NAME
 * with KAIROS_SOCKET in their environment when the plugin was given a socket.
 *
 * Thread rules: no shared state; spank_job_run forks (slurmstepd is one thread
 * where the plugin runs).
 */
#ifndef KAIROS_SLURM_SPANK_JOB_H
#define KAIROS_SLURM_SPANK_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPANK_JOB_NAME_MAX 64
#define SPANK_JOB_ARGV_MAX 24

/* The job's options, as given (NULL: not given), and the plugin's arguments. */
struct spank_job {
    const char *mem, *share, *limit, *priority;
    const char *kairos;  /* the kairos binary (plugstack.conf: kairos=PATH) */
    const char *socket;  /* kairosd's socket (socket=PATH), NULL: kairos's default */
    const char *shim;    /* libkairos.so for the tasks' LD_PRELOAD (shim=PATH) */
    unsigned timeout_s;  /* each kairos command (timeout=SECONDS) */
};

/* Defaults for the plugin's arguments. */
void spank_job_init(struct spank_job *j);
/* One plugstack.conf argument ("kairos=/usr/bin/kairos"): 0, or -EINVAL with err. */
int spank_job_arg(struct spank_job *j, const char *arg, char *err, size_t err_len);
/* Checks one option's value (opt: "gpu-mem", ...) and stores it: 0, or -EINVAL with
 * err saying what is wrong and what is expected. */
int spank_job_option(struct spank_job *j, const char *opt, const char *value, char *err,
                     size_t err_len);
/* Some --gpu-* option was given: the step is to be a tenant. */
bool spank_job_wanted(const struct spank_job *j);
/* Options that make sense together: a share, a limit or a priority need a memory
 * quota (the tenant is created with --gpu-mem); 0, or -EINVAL with err. */
int spank_job_check(const struct spank_job *j, char *err, size_t err_len);

/* "job-42.0", "job-42.batch", "job-42.extern", "job-42.interactive". */
void spank_job_tenant(uint32_t job_id, uint32_t step_id, char *out, size_t cap);

/* argv (NULL-terminated, pointing into the strings given and into buf) of the
 * commands above. gpus may be NULL (every GPU). 0, or -ENOSPC. */
int spank_job_argv_set(const struct spank_job *j, const char *tenant, const char *gpus,
                       const char **argv, size_t cap);
int spank_job_argv_admit(const struct spank_job *j, const char *tenant, pid_t pid,
                         char *buf, size_t buf_len, const char **argv, size_t cap);
int spank_job_argv_del(const struct spank_job *j, const char *tenant, const char **argv,
                       size_t cap);

/* Runs argv[0] with argv (and KAIROS_SOCKET=j->socket when set), its standard
 * output and error into out (cut, always terminated), killed with its process
 * group after j->timeout_s seconds. Returns its exit status (0..255), 124 when it
 * was killed for time, or -errno when it could not be started. */
int spank_job_run(const struct spank_job *j, const char *const *argv, char *out,
                  size_t out_len);

#endif /* KAIROS_SLURM_SPANK_JOB_H */
