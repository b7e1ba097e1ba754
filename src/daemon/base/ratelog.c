/* ratelog.c - one log line per key per interval (see ratelog.h). */
#include "daemon/base/ratelog.h"

bool ratelog_event(struct ratelog *r, uint64_t now_ms, uint64_t interval_ms,
                   uint64_t *suppressed)
{
    if (r->logged && now_ms - r->last_ms < interval_ms) {
        r->suppressed++;
        return false;
    }
    *suppressed = r->suppressed;
    r->suppressed = 0;
    r->logged = true;
    r->last_ms = now_ms;
    return true;
}
