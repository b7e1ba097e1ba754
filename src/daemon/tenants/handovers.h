/* handovers.h - hand-overs of NVIDIA files remembered across a kairosd restart.
 *
 * A departed member whose files another process still holds keeps its charge
 * (linger.h) because of a hand-over kairosd verified (heirs.h). That process never
 * reattaches, so a restart (kill -9 included) that forgot both would leave its
 * memory charged to nobody while the holder lives. So the verified edges and the
 * lingering charges are written into the state file (handovers_state.h) shortly
 * after each change (at most every HANDOVERS_SAVE_DELAY_MS; a change waiting for
 * it when kairosd stops in order is written at once), and read back at start,
 * before any process reattaches, where they are believed only as far as they can
 * still be checked:
 *  - all of them only in the boot they were saved in (/proc's boot_id): processes
 *    of another boot are gone, their pids reused;
 *  - an edge as heirs_restore checks it (each process is the one it was, by pid
 *    and start time; a child started after its parent and, while both live, is its
 *    child; a receiver, while both live, holds one of the sender's files: kcmp);
 *  - a lingering charge only for a tenant that exists, for at most the tenant's
 *    room on each GPU (quota less what is held, draining and granted; the rest is
 *    refused, logged), and only while a restored edge leads from the departed
 *    process (pid and start time) to a live holder of a driver file, or it is that
 *    process itself (an exec'd image) or a GPU lists its pid with memory.
 * What cannot be checked after the source has exited - that a live holder got its
 * files from it - is taken on the state file's word (the file is kairosd's own,
 * 0600 in a directory only root writes): an entry can only keep its own tenant
 * charged, never move a charge to another tenant, nor charge it beyond its quota.
 *
 * It lives in tenants/, above what it joins: memory/'s heirs and linger, and the
 * tenants' state file (tenants.h), whose saves carry its section
 * (state/handovers_state.h).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDOVERS_H
#define KAIROS_DAEMON_HANDOVERS_H

#include "daemon/memory/heirs.h"
#include "daemon/memory/linger.h"
#include "daemon/base/loop.h"
#include "daemon/tenants/tenants.h"

#define HANDOVERS_SAVE_DELAY_MS 100

struct handovers;

/* Hooks itself to h, lg and ts (their changes are saved with ts's state file).
 * proc_root: where boot_id is read (NULL: "/proc"). 0 or -errno. */
int handovers_init(struct handovers **out, struct loop *loop, struct heirs *h,
                   struct linger_set *lg, struct tenants *ts, const char *proc_root);
/* Writes a change not saved yet, then unhooks and frees. */
void handovers_fini(struct handovers *hs);
/* Believes what ts->saved_handovers holds as far as it can be checked (above),
 * logging each refusal; frees it. Call once, before processes reattach. */
void handovers_restore(struct handovers *hs);

#endif /* KAIROS_DAEMON_HANDOVERS_H */
