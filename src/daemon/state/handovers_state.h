/* handovers_state.h - the "handovers" part of the state file: hand-overs of NVIDIA
 * files (heirs.h) and the departed members' charges kept for them (linger.h), as
 * kairosd saves them so that a restart (kill -9 included) does not forget them.
 *
 * JSON (jansson), beside "tenants": {"handovers": {"boot_id": "<uuid>",
 * "edges": [{"from_pid": 10, "from_start": 500, "pid": 11, "start": 520,
 * "kind": "forked"}], "lingering": [{"tenant": "team", "pid": 10, "start": 500,
 * "held": {"0": 44040192}}]}}. This module checks only the form: each pid a
 * possible pid, each start time a number, each kind known, each tenant name valid,
 * each GPU one the node has and each byte count within KAIROS_BYTES_MAX, at most
 * HEIRS_MAX edges and HANDOVERS_LINGER_MAX charges; an entry that is not is refused
 * alone (warned), a section that is not an object is refused whole, and the tenants
 * of the file are loaded either way. Whether an entry is believed (its processes,
 * the tenant, the quota's room) is handovers.h's, at start.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_HANDOVERS_STATE_H
#define KAIROS_DAEMON_HANDOVERS_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/memory/heirs.h"
#include "kairos/proto.h"

#define HANDOVERS_LINGER_MAX 4096 /* departed members' charges saved, at most */
#define HANDOVERS_BOOT_ID_MAX 40  /* a boot id: 36 characters and a NUL */
#define HANDOVERS_PID_MAX (1u << 22) /* the kernel's PID_MAX_LIMIT */

struct saved_linger {
    char tenant[KAIROS_NAME_MAX];
    uint32_t pid;
    uint64_t start; /* 0: unknown */
    uint64_t held[KAIROS_MAX_GPUS];
};

struct handovers_saved {
    char boot_id[HANDOVERS_BOOT_ID_MAX]; /* the boot they were saved in; "" unknown */
    struct heir_edge *edges;
    size_t n_edges;
    struct saved_linger *lingering;
    size_t n_lingering;
};

struct json_t;
/* The section for s (a new reference), or NULL when out of memory. */
struct json_t *handovers_state_json(const struct handovers_saved *s, unsigned n_gpus);
/* Reads the section j into out (emptied first; free it with handovers_saved_free).
 * Each entry refused is told to warn (may be NULL). 0, or -EINVAL when j is not an
 * object (out stays empty), -ENOMEM. */
int handovers_state_parse(struct json_t *j, unsigned n_gpus, struct handovers_saved *out,
                          void (*warn)(void *ctx, const char *msg), void *warn_ctx);
void handovers_saved_free(struct handovers_saved *s);

#endif /* KAIROS_DAEMON_HANDOVERS_STATE_H */
