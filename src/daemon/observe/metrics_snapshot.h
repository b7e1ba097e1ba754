/* metrics_snapshot.h - renders kairosd's metrics without holding its loop. With
 * thousands of tenants a scrape is megabytes of text and tens of milliseconds of
 * formatting; done in the loop thread, a flood of scrapes delayed every grant
 * behind it (issue 25, item 3). Instead the loop thread reads the GPU backend's
 * figures (NVML belongs to this process) and forks: the child sees the daemon's
 * state as it was at that instant (copy-on-write), renders it into a memfd and
 * exits, while the loop goes on serving tenants. The loop learns of the end through
 * the child's pidfd. The cost left to the loop is the fork itself (page tables,
 * figures in docs/metrics.md).
 *
 * At most one render runs at a time, starts at least METRICS_RENDER_GAP_MS apart (a
 * flood of scrapes costs at most a few renders a second) and lasts at most
 * METRICS_RENDER_TIMEOUT_MS (then the child is killed and the render fails).
 * Where fork() fails, the render is made in the loop thread, as before.
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_METRICS_SNAPSHOT_H
#define KAIROS_DAEMON_METRICS_SNAPSHOT_H

#include <stddef.h>

#include "daemon/base/loop.h"
#include "daemon/observe/metrics.h"

#define METRICS_RENDER_GAP_MS 250
#define METRICS_RENDER_TIMEOUT_MS 10000

struct metrics_snapshot;

/* A render ended: fd (a memfd the callee now owns, read from offset 0) holds len
 * bytes of exposition text; or fd is -1 and err says why (-ETIMEDOUT, -ENOMEM,
 * -ECHILD: the child failed). */
typedef void (*metrics_snapshot_done)(void *ctx, int fd, size_t len, int err);

/* src is copied; what it points to must outlive the renderer. 0 or -errno. */
int metrics_snapshot_init(struct metrics_snapshot **out, struct loop *loop,
                          const struct metrics_sources *src, metrics_snapshot_done done,
                          void *ctx);
/* Kills a render under way (its done is not called). NULL is fine. */
void metrics_snapshot_fini(struct metrics_snapshot *s);

/* Asks for a render of the state from now on: starts one at once, or when the gap
 * since the last start has passed; nothing when one is already asked for or under
 * way (its result serves this request too). done follows, from the loop. */
void metrics_snapshot_request(struct metrics_snapshot *s);

/* Renders made in a child, and in the loop thread because fork() failed (for tests
 * and the log). */
struct metrics_snapshot_counts {
    unsigned long long forked, inline_renders, failed;
};
struct metrics_snapshot_counts metrics_snapshot_counts(const struct metrics_snapshot *s);

#endif /* KAIROS_DAEMON_METRICS_SNAPSHOT_H */
