/* reentry.c - the per-thread depth of the shim's own work (see reentry.h). */
#include "shim/reentry.h"

static _Thread_local volatile unsigned depth __attribute__((tls_model("initial-exec")));

void reentry_enter(void)
{
    depth = depth + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* seen by a handler on this thread */
}

void reentry_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    depth = depth - 1;
}

bool reentry_inside(void)
{
    return depth > 0;
}
