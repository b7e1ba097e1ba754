/* fault_watch.h - kairosd's reading of the kernel log for the driver's Xid reports:
 * each one is parsed (gpu/xid.h), its GPU found by PCI address, attributed and counted
 * (faults.h), and logged at once, as a warning naming the tenant; the first report of
 * a fault in a fault domain is then handed on (the recovery, fault_recovery.h).
 *
 * Thread rules: the loop thread only.
 */
#ifndef KAIROS_DAEMON_FAULT_WATCH_H
#define KAIROS_DAEMON_FAULT_WATCH_H

struct loop;
struct gpu_backend;
struct ledger;
struct mps_domains;
struct faults;
struct fault_watch;
struct fault_domain_event;

/* What the watch reads from; each pointer outlives the watch (gpu and mps may be
 * NULL: no backend, no space mode). */
struct fault_watch_deps {
    struct loop *loop;
    struct gpu_backend *gpu;
    const struct ledger *ledger;
    const struct settings_book *settings; /* the tenants' fault domains (settings_book.h) */
    const struct mps_domains *mps;
    struct faults *faults;
    /* told the first report of each fault in a domain (faults.h), after it is logged;
     * may be NULL */
    void (*domain_fault)(void *ctx, const struct fault_domain_event *ev);
    void *ctx;
};

/* Starts reading path (kernel_log.h). 0, or -errno (the caller logs that faults will
 * not be attributed). */
int fault_watch_open(struct fault_watch **out, const char *path,
                     const struct fault_watch_deps *deps);
void fault_watch_close(struct fault_watch *w);

#endif /* KAIROS_DAEMON_FAULT_WATCH_H */
