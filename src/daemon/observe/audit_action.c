/* audit_action.c - what one finding of the audit leads to (see audit_action.h): the
 * line in the log, and by policy the kill, with the exemptions (audit: { exempt }, or
 * root's monitoring tools by default). */
#include "daemon/observe/audit_action.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Root's monitoring tools, exempt from kills when audit: { exempt } is not given. */
static const struct config_exempt builtin_exempt[] = {
    {"nvidia-smi", false, 0},    {"nvidia-persiste", false, 0}, {"nv-hostengine", false, 0},
    {"dcgm-exporter", false, 0}, {"dcgmi", false, 0},           {"nvtop", false, 0},
};

static bool exempt_matches(const struct config_exempt *e, const struct procscan_proc *p)
{
    return (!e->command[0] || !strcmp(e->command, p->comm)) && (e->any_uid || e->uid == p->uid);
}

static bool is_exempt(const struct config *cfg, const struct procscan_proc *p)
{
    const struct config_exempt *v = cfg->audit_exempt;
    size_t n = cfg->n_audit_exempt;
    if (!cfg->audit_exempt_given) {
        v = builtin_exempt;
        n = sizeof builtin_exempt / sizeof *builtin_exempt;
    }
    for (size_t i = 0; i < n; i++)
        if (exempt_matches(&v[i], p))
            return true;
    return false;
}

/* Why p is not killed (NULL: it is, by policy). */
static const char *spared(const struct config *cfg, const struct procscan_proc *p, bool killable)
{
    if (!cfg->audit_kill)
        return "not killed (audit action is report)";
    if (!p->exists)
        return "not killed (not in /proc)";
    if (!killable)
        return "not killed (no GPU memory of it is seen)";
    if (p->pid <= 1 || p->pid == (uint32_t)getpid())
        return "never killed (pid 1 or kairosd)";
    if (is_exempt(cfg, p))
        return "not killed: exempt (audit exempt)";
    return NULL;
}

bool audit_would_kill(const struct config *cfg, const struct procscan_proc *p, bool killable)
{
    return spared(cfg, p, killable) == NULL;
}

/* "pid P (comm)" into who, "uid U" (or "uid ?") into uid. */
static void name(const struct procscan_proc *p, char who[static 96], char uid[static 24])
{
    snprintf(who, 96, "pid %u (%s)", p->pid, p->comm);
    if (p->uid != UINT32_MAX)
        snprintf(uid, 24, "uid %u", p->uid);
    else
        snprintf(uid, 24, "uid ?");
}

/* Reports what pid did (about tenant, NULL: none, and gpu, < 0: none) and, by
 * policy, kills it. killable: the finding is GPU memory the process holds (an opener
 * seen holding none is only reported). */
void audit_act(const struct config *cfg, const struct procscan_proc *p, const char *tenant,
               int gpu, const char *what, bool killable)
{
    char who[96], uid[24];
    name(p, who, uid);
    const char *outcome = spared(cfg, p, killable);
    if (outcome)
        audit_warn(tenant, p->pid, gpu, "audit: %s %s, %s; %s", who, what, uid, outcome);
    else
        audit_killed(p, tenant, gpu, what, kill((pid_t)p->pid, SIGKILL) ? errno : 0);
}

void audit_killed(const struct procscan_proc *p, const char *tenant, int gpu, const char *what,
                  int err)
{
    char who[96], uid[24];
    name(p, who, uid);
    if (err == ESRCH)
        audit_warn(tenant, p->pid, gpu, "audit: %s %s, %s; it had exited before the kill", who,
                   what, uid);
    else if (err)
        audit_error(tenant, p->pid, gpu, "audit: %s %s, %s; kill failed: %s", who, what, uid,
                    strerror(err));
    else
        audit_warn(tenant, p->pid, gpu, "audit: %s %s, %s; killed (audit action kill)", who,
                   what, uid);
}
