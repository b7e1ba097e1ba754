/* owners.h - the owners of ephemeral tenants, watched through a pidfd each: when
 * the process that created such a tenant exits, the tenant is told
 * (tenants_after_leave: it goes once its members have gone too). Also the pidfd
 * opening the server's peers use.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_OWNERS_H
#define KAIROS_DAEMON_OWNERS_H

#include <stdint.h>

#include "daemon/base/loop.h"
#include "daemon/memory/ledger.h"
#include "daemon/transport/peer.h"

struct owner;

struct owners {
    struct loop *loop;
    struct services *sv;
    struct owner *list;
};

void owners_init(struct owners *o, struct loop *loop, struct services *sv);
/* Stops watching every owner. */
void owners_fini(struct owners *o);

/* Watches the owner of ephemeral tenant t (owner_alive in its settings record,
 * tenants/settings_book.h, says whether it lives:
 * without pidfds, it counts as alive until the members leave). */
void owners_watch(struct owners *o, struct ledger_tenant *t);
/* Watches the owners of every ephemeral tenant of the ledger (after a restart). */
void owners_watch_all(struct owners *o);

/* pidfd_open(2): a descriptor of process pid, or -1 with errno (ENOSYS: no pidfds). */
int owners_pidfd_open(uint32_t pid);

#endif /* KAIROS_DAEMON_OWNERS_H */
