/* fuzz_proto.c - libFuzzer target: any bytes a peer may send to kairosd go through
 * proto_check without a crash, and whatever it accepts has an exact size (or
 * TENANT_SET's earlier ones, or none for PS), for PS known flags only (the faults
 * only with the holds), a
 * terminated, valid name (or, for a HELLO that asks kairosd to place it, none),
 * valid compute policies and a fault domain that is none or a valid name (none in a
 * TENANT_SET of before), for FORKED and INHERITED a pid, one flag and exactly n_fds
 * descriptors (>= 0, zeros after), and for CREDIT a shim's flags only, bounded byte
 * counts and least within need; for SHARED handles and a known scope with its
 * argument, for IMPORTED one flag and two distinct clients; CREDIT_RECALL (sent by
 * kairosd) is never accepted from a peer. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/memory/ledger.h"
#include "core/policy.h"
#include "daemon/transport/proto_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proto_request r;
    char why[256];
    if (proto_check(data, size, &r, why, sizeof why) != 0)
        return 0;
    size_t body = size - sizeof(struct kairos_hdr);
    if (body != (size_t)proto_body_size(r.type) &&
        !(r.type == KAIROS_MSG_TENANT_SET &&
          (body == KAIROS_TENANT_SET_SIZE_V0 || body == KAIROS_TENANT_SET_SIZE_V1)) &&
        !(r.type == KAIROS_MSG_PS && body == 0))
        abort();
    if (r.type == KAIROS_MSG_PS &&
        ((r.body.ps.flags & ~(KAIROS_PS_HOLDS | KAIROS_PS_FAULTS)) || r.body.ps.pad ||
         ((r.body.ps.flags & KAIROS_PS_FAULTS) && !(r.body.ps.flags & KAIROS_PS_HOLDS))))
        abort();
    if (r.type == KAIROS_MSG_HELLO) {
        const struct kairos_hello *h = &r.body.hello;
        bool placed = h->flags & KAIROS_HELLO_PLACE; /* kairosd places it: it names none */
        if (placed ? h->tenant[0] != 0 : !ledger_name_valid(h->tenant))
            abort();
    }
    if (r.type == KAIROS_MSG_FORKED && (r.body.forked.child_pid == 0 ||
                                        (r.body.forked.flags & ~KAIROS_FORKED_TICKET)))
        abort();
    if (r.type == KAIROS_MSG_INHERITED) {
        const struct kairos_inherited *in = &r.body.inherited;
        if (!in->from_pid || in->pad || in->n_fds == 0 || in->n_fds > KAIROS_INHERITED_MAX_FDS ||
            (in->flags != KAIROS_INHERITED_EXEC && in->flags != KAIROS_INHERITED_RECEIVED))
            abort();
        for (unsigned i = 0; i < KAIROS_INHERITED_MAX_FDS; i++)
            if (i < in->n_fds ? in->fds[i] < 0 : in->fds[i] != 0)
                abort();
    }
    if (r.type == KAIROS_MSG_SHARED) {
        const struct kairos_shared *m = &r.body.shared;
        bool with_arg = m->share_type == KAIROS_SHARE_PID || m->share_type == KAIROS_SHARE_CLIENT;
        if (!m->h_client || !m->h_object || m->share_type < KAIROS_SHARE_ALL ||
            m->share_type > KAIROS_SHARE_PID || (with_arg ? !m->share_arg : m->share_arg))
            abort();
    }
    if (r.type == KAIROS_MSG_IMPORTED) {
        const struct kairos_imported *m = &r.body.imported;
        if ((m->flags != KAIROS_IMPORT_BEGIN && m->flags != KAIROS_IMPORT_END) || m->pad ||
            !m->h_client_src || !m->h_object_src || !m->h_client ||
            m->h_client_src == m->h_client)
            abort();
    }
    if (r.type == KAIROS_MSG_TENANT_SET && (r.body_len != body ||
                                            (r.body_len < sizeof r.body.tenant_set &&
                                             r.body.tenant_set.fault_domain[0])))
        abort(); /* a body of before sets no domain */
    if (r.type == KAIROS_MSG_TENANT_SET && r.body.tenant_set.fault_domain[0] &&
        !ledger_name_valid(r.body.tenant_set.fault_domain))
        abort();
    if (r.type == KAIROS_MSG_TENANT_SET && r.body.tenant_set.n_gpus > KAIROS_MAX_GPUS)
        abort();
    if (r.type == KAIROS_MSG_CREDIT_RECALL)
        abort();
    if (r.type == KAIROS_MSG_CREDIT) {
        const struct kairos_credit *c = &r.body.credit;
        const uint32_t shim_flags = KAIROS_CREDIT_AHEAD | KAIROS_CREDIT_RECALLED |
                                    KAIROS_CREDIT_REVOKED | KAIROS_CREDIT_LAST |
                                    KAIROS_CREDIT_NOTICE;
        bool last_asks = (c->flags & KAIROS_CREDIT_LAST) &&
                         (c->need || (c->flags & KAIROS_CREDIT_AHEAD));
        if (c->gpu >= KAIROS_MAX_GPUS || c->flags & ~shim_flags || last_asks ||
            c->least > c->need || (c->need && !c->least) || c->quota ||
            c->held > KAIROS_BYTES_MAX || c->returned > KAIROS_BYTES_MAX ||
            c->need > KAIROS_BYTES_MAX)
            abort();
    }
    for (unsigned g = 0; r.type == KAIROS_MSG_TENANT_SET && g < KAIROS_MAX_GPUS; g++) {
        const struct kairos_compute *c = &r.body.tenant_set.compute[g];
        struct sched_policy p;
        if ((c->flags & KAIROS_COMPUTE_SET) &&
            policy_from_ppm(c->share_ppm, c->limit_ppm, c->priority, &p, NULL, 0))
            abort();
    }
    return 0;
}
