/* audit_action.h - what one finding of the audit (audit.c) leads to: its line in the
 * log, with the tenant, process and GPU as fields, and by policy (audit: { action:
 * kill }) the process killed, unless it is exempt (audit: { exempt }, by default
 * root's monitoring tools), pid 1 or kairosd.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_AUDIT_ACTION_H
#define KAIROS_DAEMON_AUDIT_ACTION_H

#include <stdbool.h>

#include "daemon/base/log.h"
#include "daemon/base/procscan.h"
#include "daemon/config/config.h"

/* Every finding's line names its tenant (NULL: none), process (0: none) and GPU (< 0:
 * none): the one place to give the log those as fields. */
#define audit_warn(t, p, g, ...) log_about_warn(t, p, g, __VA_ARGS__)
#define audit_error(t, p, g, ...) log_about_error(t, p, g, __VA_ARGS__)

/* Reports what process p did (about tenant, NULL: none, and gpu, < 0: none) and, by
 * cfg's policy, kills it. killable: the finding is GPU memory the process holds (an
 * opener seen holding none is only reported). */
void audit_act(const struct config *cfg, const struct procscan_proc *p, const char *tenant,
               int gpu, const char *what, bool killable);
/* The line of a kill audit_act or a waiting kill (space/client_end.h) made: err 0 (killed),
 * ESRCH (it had exited), or why the kill failed. */
void audit_killed(const struct procscan_proc *p, const char *tenant, int gpu, const char *what,
                  int err);
/* Whether audit_act would kill p (the policy, its exemptions, pid 1 and kairosd). */
bool audit_would_kill(const struct config *cfg, const struct procscan_proc *p, bool killable);

#endif /* KAIROS_DAEMON_AUDIT_ACTION_H */
