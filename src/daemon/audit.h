/* audit.h - the audit: every interval, the processes the GPU backend lists on each
 * GPU (however many) are compared with the ledger. A process using a GPU without
 * being a registered tenant member is reported; a tenant whose member processes
 * together use more than its quota there is reported with its processes, and the
 * largest are named until the rest fit. Each finding is reported once while it
 * stays; the processes named are killed when the configuration says so.
 * Never kills kairosd itself or pid 1.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_AUDIT_H
#define KAIROS_DAEMON_AUDIT_H

#include "daemon/config.h"
#include "daemon/gpu.h"
#include "daemon/loop.h"
#include "daemon/tenants.h"

struct audit;

/* gpu may be NULL (no backend): the audit then stays off. */
int audit_init(struct audit **out, struct loop *loop, struct gpu_backend *gpu,
               struct tenants *ts, const struct config *cfg);
void audit_fini(struct audit *a);
/* Re-reads cfg's interval (after a reload). */
void audit_reconfigure(struct audit *a);
/* One pass (also what the timer runs). */
void audit_tick(struct audit *a);

#endif /* KAIROS_DAEMON_AUDIT_H */
