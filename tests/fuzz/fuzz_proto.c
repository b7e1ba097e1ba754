/* fuzz_proto.c - libFuzzer target: any bytes a peer may send to kairosd go through
 * proto_check without a crash, and whatever it accepts has an exact size and a
 * terminated, valid name. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ledger.h"
#include "daemon/proto_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proto_request r;
    char why[256];
    if (proto_check(data, size, &r, why, sizeof why) != 0)
        return 0;
    if (size != sizeof(struct kairos_hdr) + (size_t)proto_body_size(r.type))
        abort();
    if (r.type == KAIROS_MSG_HELLO && !ledger_name_valid(r.body.hello.tenant))
        abort();
    if (r.type == KAIROS_MSG_TENANT_SET && r.body.tenant_set.n_gpus > KAIROS_MAX_GPUS)
        abort();
    return 0;
}
