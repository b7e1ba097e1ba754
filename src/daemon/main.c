/* main.c - kairosd: options, the order in which the modules start (log, config,
 * GPUs, tenants and state, loop and signals, server, linger, heirs and imports,
 * hand-overs, chargeback, audit, time-share, metrics endpoint, the service
 * manager's watchdog) and stop (the reverse),
 * and the signals: SIGTERM/SIGINT stop, SIGHUP reloads the configuration (keeping
 * the old one when the new one is refused). Under systemd it says READY=1 once the
 * socket accepts and the metrics endpoint (if any) serves, and STOPPING=1 when it stops (service.c).
 *
 *   kairosd [-c FILE] [-s SOCKET] [--state FILE] [--fake-gpu FILE] [-l LEVEL]
 *           [--log TARGET] [--syslog] [--metrics ADDRESS] [--check]
 *   kairosd [-c FILE] [-s SOCKET] --quit-domains[=SECONDS]
 *   kairosd --sim SCENARIO.yaml [--sim-seconds N] [--sim-mode MODE] [--json]
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/observe/audit.h"
#include "daemon/observe/chargeback.h"
#include "daemon/config/config.h"
#include "daemon/gpu/driver_release.h"
#include "daemon/gpu/gpu.h"
#include "daemon/tenants/handovers.h"
#include "daemon/memory/heirs.h"
#include "daemon/space/fault_watch.h"
#include "daemon/space/mps_clients.h"
#include "daemon/space/faults.h"
#include "daemon/space/domains_quit.h"
#include "daemon/space/mps_domains.h"
#include "daemon/memory/imports.h"
#include "daemon/memory/linger.h"
#include "daemon/gpu/gpu_numbering.h"
#include "daemon/base/folders.h"
#include "daemon/base/log.h"
#include "daemon/base/loop.h"
#include "daemon/observe/metrics_http.h"
#include "daemon/transport/server.h"
#include "daemon/base/service.h"
#include "daemon/time/sim.h"
#include "daemon/tenants/tenants.h"
#include "daemon/time/timeshare.h"

#define DEFAULT_CONFIG "/etc/kairos/kairosd.yaml"

struct options {
    const char *config;
    bool config_given;
    const char *socket;
    const char *state;
    const char *fake_gpu;
    struct metrics_addr metrics; /* --metrics: overrides the configuration's */
    bool metrics_given;
    enum log_level level;
    enum log_target log_target;
    bool check_only;
    double quit_domains_s; /* --quit-domains: seconds to wait; < 0: not asked */
    const char *sim;
    double sim_seconds;
    const char *sim_mode;
    bool json;
};

struct daemon {
    struct options opt;
    struct config cfg;
    struct gpu_backend gpu;
    bool have_gpu;
    struct driver_release driver; /* the node's driver release, read at start */
    struct tenants ts;
    struct loop *loop;
    int sfd;
    struct loop_watch *sw;
    struct server *server;
    struct audit *audit;
    struct linger_set *linger;
    struct heirs heirs;
    struct handovers *handovers;
    struct imports imports; /* legacy CUDA IPC (imports.h) */
    struct mps_domains mps; /* space mode's MPS daemons (mps_domains.h) */
    bool mps_open;
    struct faults faults;   /* GPU faults per tenant (faults.h) */
    struct fault_watch *fault_watch; /* the kernel log's Xid reports, or NULL */
    struct mps_clients *mps_clients; /* the MPS servers' clients checked, or NULL */
    struct timeshare *timeshare;
    struct chargeback *chargeback;
    struct service *service;
    struct metrics_http *metrics;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairosd [options]\n"
            "\n"
            "The Kairos node daemon: tenants, their GPU memory quotas and the memory ledger,\n"
            "their GPU time shares (the time-share scheduler), served on a unix socket to\n"
            "libkairos.so and the kairos command.\n"
            "\n"
            "options:\n"
            "  -c, --config FILE     configuration (default " DEFAULT_CONFIG ")\n"
            "  -s, --socket PATH     socket path, overriding the configuration's\n"
            "      --state FILE      state file, overriding the configuration's\n"
            "      --fake-gpu FILE   scripted GPUs for tests instead of NVML (also KAIROS_FAKE_GPU)\n"
            "  -l, --log-level LEVEL error, warn, info (default) or debug\n"
            "      --log TARGET      where log lines go: auto (default: the journal when\n"
            "                        kairosd runs under systemd, else stderr), stderr,\n"
            "                        journal or syslog\n"
            "      --syslog          the same as --log syslog\n"
            "      --metrics ADDRESS serve Prometheus metrics on http://ADDRESS/metrics\n"
            "                        (127.0.0.1:9494, [::1]:9494...; off: none), overriding\n"
            "                        the configuration's\n"
            "      --check           check the configuration and exit\n"
            "      --quit-domains[=SECONDS]  with kairosd stopped, ask the MPS control\n"
            "                        daemons it left running for its fault domains to quit,\n"
            "                        wait up to SECONDS (default 10) and say which still\n"
            "                        wait for their clients; exit 1 if any does\n"
            "      --sim FILE        run the scheduler against a simulated GPU (a scenario,\n"
            "                        see etc/sim/) faster than real time, print and exit\n"
            "      --sim-seconds N   simulated time (default: the scenario's seconds)\n"
            "      --sim-mode MODE   the scenario in auto, timeslices, windows or native\n"
            "                        (no decision applied: the GPU without Kairos) mode\n"
            "      --json            with --sim: one JSON document (without --sim: a usage\n"
            "                        error)\n"
            "  -h, --help            show this text\n"
            "      --version         print the version\n"
            "\n"
            "Signals: SIGTERM or SIGINT stop, SIGHUP reloads the configuration.\n"
            "man kairosd(8), kairosd.conf(5).\n");
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},   {"socket", required_argument, NULL, 's'},
        {"state", required_argument, NULL, 'S'},    {"fake-gpu", required_argument, NULL, 'F'},
        {"log-level", required_argument, NULL, 'l'}, {"syslog", no_argument, NULL, 'y'},
        {"log", required_argument, NULL, 'L'},
        {"check", no_argument, NULL, 'k'},
        {"quit-domains", optional_argument, NULL, 'Q'},          {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},        {"sim", required_argument, NULL, 'm'},
        {"sim-seconds", required_argument, NULL, 'n'}, {"json", no_argument, NULL, 'j'},
        {"sim-mode", required_argument, NULL, 'o'},
        {"metrics", required_argument, NULL, 'M'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->config = DEFAULT_CONFIG;
    o->level = LOG_LEVEL_INFO;
    o->quit_domains_s = -1;
    o->fake_gpu = getenv("KAIROS_FAKE_GPU");
    if (o->fake_gpu && !*o->fake_gpu)
        o->fake_gpu = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "c:s:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->config = optarg;
            o->config_given = true;
            break;
        case 's':
            o->socket = optarg;
            break;
        case 'S':
            o->state = optarg;
            break;
        case 'F':
            o->fake_gpu = optarg;
            break;
        case 'l':
            if (log_parse_level(optarg, &o->level)) {
                fprintf(stderr, "kairosd: unknown log level '%s' (error, warn, info, debug)\n",
                        optarg);
                return 2;
            }
            break;
        case 'y':
            o->log_target = LOG_TARGET_SYSLOG;
            break;
        case 'L':
            if (log_parse_target(optarg, &o->log_target)) {
                fprintf(stderr, "kairosd: unknown log target '%s' (auto, stderr, journal, "
                                "syslog)\n", optarg);
                return 2;
            }
            break;
        case 'M': {
            char why[256];
            if (metrics_addr_parse(optarg, &o->metrics, why, sizeof why)) {
                fprintf(stderr, "kairosd: --metrics: %s\n", why);
                return 2;
            }
            o->metrics_given = true;
            break;
        }
        case 'k':
            o->check_only = true;
            break;
        case 'Q': {
            char *end = NULL;
            o->quit_domains_s = optarg ? strtod(optarg, &end) : 10;
            if (optarg && (end == optarg || *end || !(o->quit_domains_s >= 0 &&
                                                      o->quit_domains_s <= 3600))) {
                fprintf(stderr, "kairosd: --quit-domains=SECONDS wants a number of seconds "
                                "[0-3600]\n");
                return 2;
            }
            break;
        }
        case 'm':
            o->sim = optarg;
            break;
        case 'n': {
            char *end;
            o->sim_seconds = strtod(optarg, &end);
            if (end == optarg || *end || !(o->sim_seconds > 0 && o->sim_seconds <= 3600)) {
                fprintf(stderr, "kairosd: --sim-seconds wants a number of seconds (0-3600]\n");
                return 2;
            }
            break;
        }
        case 'j':
            o->json = true;
            break;
        case 'o':
            o->sim_mode = optarg;
            break;
        case 'h':
            usage(stdout);
            return -1;
        case 'V':
            printf("kairosd %s\n", KAIROS_VERSION);
            return -1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kairosd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (!o->sim && (o->json || o->sim_seconds > 0 || o->sim_mode)) {
        fprintf(stderr, "kairosd: %s goes with --sim SCENARIO (the daemon itself has no JSON "
                        "output: see kairos ps --json)\n",
                o->json ? "--json" : o->sim_mode ? "--sim-mode" : "--sim-seconds");
        return 2;
    }
    return 0;
}

/* {"error": "..."} on standard output. */
static void print_json_error(const char *text)
{
    json_t *e = json_pack("{s:s%}", "error", text, strlen(text));
    if (e)
        json_dumpf(e, stdout, 0);
    fputc('\n', stdout);
    json_decref(e);
}

/* --sim: the real scheduler against the simulated GPU; 0, or 1 on an error. */
static int run_sim(const struct options *o)
{
    struct sim_scenario sc;
    char err[768];
    if (sim_scenario_load(o->sim, &sc, err, sizeof err)) {
        if (o->json)
            print_json_error(err);
        else
            fprintf(stderr, "kairosd: %s\n", err);
        return 1;
    }
    if (o->sim_seconds > 0)
        sc.seconds = o->sim_seconds;
    if (o->sim_mode && !sim_scenario_set_mode(&sc, o->sim_mode)) {
        fprintf(stderr, "kairosd: --sim-mode wants auto, timeslices, windows or native\n");
        return 2;
    }
    if (!o->json)
        printf("simulated GPU, %zu tenant(s), %.0f s; every second, per tenant: target/ran, "
               "%% of the GPU's time\n", sc.n, sc.seconds);
    if (sim_run(&sc, stdout, o->json ? 1 : 10, o->json, NULL)) {
        fprintf(stderr, "kairosd: out of memory\n");
        return 1;
    }
    return 0;
}

static int load_config(struct daemon *d, struct config *out)
{
    char err[768];
    struct stat st;
    if (!d->opt.config_given && stat(d->opt.config, &st) && errno == ENOENT) {
        config_defaults(out);
        log_info("no configuration at %s: defaults (no tenants but those created at run time)",
                 d->opt.config);
    } else if (config_load(d->opt.config, out, err, sizeof err)) {
        log_error("%s", err);
        return -EINVAL;
    }
    if (d->opt.socket)
        snprintf(out->socket, sizeof out->socket, "%s", d->opt.socket);
    if (d->opt.state)
        snprintf(out->state, sizeof out->state, "%s", d->opt.state);
    if (d->opt.metrics_given)
        out->metrics = d->opt.metrics;
    return 0;
}

/* A lingering member released: its tenant goes when that was its last (linger.h). */
static bool linger_after_leave(void *ctx, struct ledger_tenant *t)
{
    return tenants_after_leave(ctx, t);
}

/* The time-share scheduler's TIME_POLICY messages go out through the server, which is
 * made after it and goes first: nothing is sent while there is none. */
static void send_time_policy(void *ctx, const char *tenant, const struct kairos_time_policy *p)
{
    struct daemon *d = ctx;
    if (d->server)
        server_send_time_policy(d->server, tenant, p);
}

/* Space mode's daemons under the socket's folder (ROOT/mps); without them a tenant
 * in a fault domain is refused the GPU with the reason. */
static void open_domains(struct daemon *d)
{
    char root[MPS_ROOT_MAX], why[512];
    mps_domains_root_of(d->cfg.socket, root, sizeof root);
    int rc = folders_make_parents(root); /* the socket's folder, before the server makes it */
    if (rc) {
        log_warn("space mode is off: cannot make the folder of %s: %s", root, strerror(-rc));
        return;
    }
    if (mps_domains_open(&d->mps, root, d->loop, &d->cfg.space, why, sizeof why)) {
        log_warn("space mode is off: %s", why);
        return;
    }
    d->mps_open = true;
    struct mps_clients_deps deps = {.loop = d->loop, .mps = &d->mps, .ledger = &d->ts.ledger,
                                    .settings = &d->ts.settings, .proc = "/proc",
                                    .interval_ms = d->cfg.space.client_check_ms,
                                    .fault_recovery_ms = d->cfg.space.fault_recovery_ms};
    rc = mps_clients_open(&d->mps_clients, &deps);
    if (rc)
        log_warn("space: the MPS servers' clients will not be checked: %s", strerror(-rc));
    else if (!d->mps_clients && d->cfg.space.fault_recovery_ms)
        log_info("space: client_check_ms is 0: after a fault in a fault domain the clients it "
                 "left are not ended (fault_recovery_ms needs the client checks)");
}

/* The first report of a fault in a domain: its clients are ended later if need be. */
static void on_domain_fault(void *ctx, const struct fault_domain_event *ev)
{
    struct daemon *d = ctx;
    mps_clients_after_fault(d->mps_clients, ev);
}

/* The driver's fault reports from the kernel log; without them faults are not
 * attributed (kairosd runs on). */
static void open_fault_watch(struct daemon *d)
{
    faults_init(&d->faults);
    if (!d->cfg.kernel_log[0])
        return; /* kernel_log: none */
    struct fault_watch_deps deps = {.loop = d->loop, .gpu = d->have_gpu ? &d->gpu : NULL,
                                    .ledger = &d->ts.ledger, .settings = &d->ts.settings,
                                    .mps = d->mps_open ? &d->mps : NULL,
                                    .faults = &d->faults, .domain_fault = on_domain_fault,
                                    .ctx = d};
    int rc = fault_watch_open(&d->fault_watch, d->cfg.kernel_log, &deps);
    if (rc)
        log_warn("GPU faults are not attributed to tenants: cannot read %s (%s); kairosd "
                 "needs CAP_SYSLOG where kernel.dmesg_restrict is 1 and the kernel log not "
                 "hidden from it (systemd: ProtectKernelLogs=no)", d->cfg.kernel_log,
                 strerror(-rc));
}

static void reload_config(struct daemon *d)
{
    struct config next;
    char err[768];
    log_info("SIGHUP: reloading %s", d->opt.config);
    if (load_config(d, &next)) {
        log_error("the new configuration is refused; the previous one stays in force");
        return;
    }
    if (config_reload_check(&d->cfg, &next, err, sizeof err)) {
        log_error("%s; the previous configuration stays in force", err);
        config_free(&next);
        return;
    }
    if (tenants_apply_config(&d->ts, &next, err, sizeof err)) {
        log_error("%s; the previous configuration stays in force", err);
        config_free(&next);
        return;
    }
    if (strcmp(next.socket, d->cfg.socket) || strcmp(next.state, d->cfg.state) ||
        strcmp(next.metrics.text, d->cfg.metrics.text))
        log_warn("a new socket, state path or metrics address takes effect at the next start "
                 "of kairosd");
    snprintf(next.socket, sizeof next.socket, "%s", d->cfg.socket);
    snprintf(next.state, sizeof next.state, "%s", d->cfg.state);
    next.metrics = d->cfg.metrics;
    config_free(&d->cfg);
    d->cfg = next; /* server and audit read it through their pointer */
    audit_reconfigure(d->audit);
    timeshare_reconfigure(d->timeshare);
    if (d->mps_open) /* the daemons of the domains no tenant names now are asked to quit */
        mps_domains_retire_unnamed(&d->mps, &d->ts.ledger, &d->ts.settings);
    log_info("configuration reloaded: %zu tenant(s) declared", d->cfg.n_tenants);
}

/* SIGHUP: the service manager hears RELOADING=1, then READY=1 when it is done. */
static void reload(struct daemon *d)
{
    service_reloading(d->service, 0);
    reload_config(d);
    service_reloading(d->service, 1);
}

static void on_signal(void *ctx, int fd, uint32_t events)
{
    struct daemon *d = ctx;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            reload(d);
        } else {
            log_info("%s: stopping", strsignal((int)si.ssi_signo));
            service_stopping(d->service);
            loop_stop(d->loop);
        }
    }
}

static int setup_gpus(struct daemon *d)
{
    unsigned n = d->cfg.gpus;
    int rc = gpu_init(&d->gpu, d->opt.fake_gpu);
    if (rc) {
        if (d->opt.fake_gpu) {
            log_error("%s", d->gpu.why);
            return rc;
        }
        log_warn("%s: running with %u GPU(s) from the configuration ('gpus:'); the audit "
                 "sees only /proc, percent quotas and GPU UUIDs unavailable", d->gpu.why, n);
    } else {
        d->have_gpu = true;
        if ((rc = d->gpu.ops->count(&d->gpu, &n))) {
            log_error("GPU backend %s cannot count GPUs: %s", d->gpu.ops->name, strerror(-rc));
            return rc;
        }
        if (n > KAIROS_MAX_GPUS) {
            log_warn("%u GPUs; kairos manages the first %u", n, KAIROS_MAX_GPUS);
            n = KAIROS_MAX_GPUS;
        }
    }
    if ((rc = tenants_init(&d->ts, n, d->cfg.state)))
        return rc;
    d->ts.gpu_known = d->have_gpu;
    for (unsigned g = 0; d->have_gpu && g < n; g++) {
        char size[32];
        if (d->gpu.ops->uuid(&d->gpu, g, d->ts.gpu_uuid[g], KAIROS_UUID_MAX))
            d->ts.gpu_uuid[g][0] = 0;
        if (d->gpu.ops->total_memory(&d->gpu, g, &d->ts.gpu_total[g]))
            d->ts.gpu_total[g] = 0;
        log_info("GPU %u: %s, %s (%s backend)", g, d->ts.gpu_uuid[g][0] ? d->ts.gpu_uuid[g] : "?",
                 tenants_size(d->ts.gpu_total[g], size, sizeof size), d->gpu.ops->name);
    }
    if (d->have_gpu)
        gpu_numbering_check(&d->gpu, n);
    driver_release_read(d->have_gpu ? &d->gpu : NULL, &d->driver);
    return 0;
}

/* The metrics endpoint, when an address is configured; 0 or -errno (logged). */
static int setup_metrics(struct daemon *d, double start_time)
{
    const struct metrics_addr *a = &d->cfg.metrics;
    if (!a->on)
        return 0;
    struct metrics_sources src = {
        .ts = &d->ts,
        .timeshare = d->timeshare,
        .gpu = d->have_gpu ? &d->gpu : NULL,
        .server = d->server,
        .cfg = &d->cfg,
        .start_time = start_time,
        .version = KAIROS_VERSION,
        .driver = &d->driver,
        .faults = &d->faults,
        .mps_clients = d->mps_clients,
    };
    int rc = metrics_http_start(&d->metrics, d->loop, a, &src);
    if (rc) {
        log_error("cannot serve metrics on %s: %s (another exporter on that port? choose "
                  "another address with 'metrics:' in %s or --metrics)",
                  a->text, strerror(-rc), d->opt.config);
        return rc;
    }
    char where[METRICS_ADDR_MAX];
    log_info("metrics at http://%s/metrics",
             metrics_addr_format(a, metrics_http_port(d->metrics), where, sizeof where));
    return 0;
}

static int setup_signals(struct daemon *d)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL))
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    d->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (d->sfd < 0)
        return -errno;
    d->sw = loop_add(d->loop, d->sfd, EPOLLIN, on_signal, d);
    return d->sw ? 0 : -errno;
}

int main(int argc, char **argv)
{
    struct daemon d;
    memset(&d, 0, sizeof d);
    d.sfd = -1;
    int rc = parse_options(argc, argv, &d.opt);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (d.opt.sim)
        return run_sim(&d.opt);
    log_init(d.opt.level, d.opt.log_target);
    umask(022);
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    int exit_code = 1;
    char err[768];
    bool cfg_loaded = false, ts_ready = false;

    if (load_config(&d, &d.cfg))
        goto out;
    cfg_loaded = true;
    if (d.opt.quit_domains_s >= 0) { /* no GPU, tenant or socket of ours needed */
        exit_code = domains_quit_run(d.cfg.socket, &d.cfg.space, d.opt.quit_domains_s, stdout,
                                     stderr);
        goto out;
    }
    if (setup_gpus(&d))
        goto out;
    ts_ready = true;
    if (tenants_apply_config(&d.ts, &d.cfg, err, sizeof err)) {
        log_error("%s", err);
        goto out;
    }
    if (d.opt.check_only) {
        log_info("configuration %s is valid: %zu tenant(s)", d.cfg.path[0] ? d.cfg.path : "(none)",
                 d.cfg.n_tenants);
        exit_code = 0;
        goto out;
    }
    tenants_load_state(&d.ts, &d.cfg);
    if ((rc = loop_init(&d.loop)) || (rc = setup_signals(&d))) {
        log_error("cannot set up the event loop: %s", strerror(-rc));
        goto out;
    }
    open_domains(&d);
    open_fault_watch(&d);
    heirs_init(&d.heirs, NULL, d.have_gpu ? &d.gpu : NULL);
    imports_init(&d.imports, NULL, &d.heirs, &d.ts.ledger);
    struct linger_deps ldeps = {.loop = d.loop, .gpu = d.have_gpu ? &d.gpu : NULL,
                                .ledger = &d.ts.ledger, .n_gpus = d.ts.n_gpus,
                                .after_leave = linger_after_leave, .after_leave_ctx = &d.ts,
                                .holds = imports_holder_cb, .holds_ctx = &d.imports};
    if ((rc = linger_init(&d.linger, &ldeps))) {
        log_error("cannot start watching departed processes' memory: %s", strerror(-rc));
        goto out;
    }
    if ((rc = timeshare_init(&d.timeshare, d.loop, d.have_gpu ? &d.gpu : NULL, &d.ts, &d.cfg,
                             send_time_policy, &d))) {
        log_error("cannot start the time-share scheduler: %s", strerror(-rc));
        goto out;
    }
    struct server_deps sdeps = {
        .loop = d.loop, .ts = &d.ts, .cfg = &d.cfg, .socket_path = d.cfg.socket,
        .gpu = d.have_gpu ? &d.gpu : NULL, .linger = d.linger, .heirs = &d.heirs,
        .imports = &d.imports, .mps = d.mps_open ? &d.mps : NULL, .faults = &d.faults,
        .timeshare = d.timeshare};
    if (server_init(&d.server, &sdeps))
        goto out;
    server_watch_owners(d.server);
    if ((rc = handovers_init(&d.handovers, d.loop, &d.heirs, d.linger, &d.ts, NULL))) {
        log_error("cannot keep hand-overs across restarts: %s", strerror(-rc));
        goto out;
    }
    handovers_restore(d.handovers); /* before any process reattaches */
    if ((rc = chargeback_init(&d.chargeback, d.loop, &d.ts, &d.cfg))) {
        log_error("cannot start the chargeback counters: %s", strerror(-rc));
        goto out;
    }
    struct audit_deps adeps = {.loop = d.loop, .gpu = d.have_gpu ? &d.gpu : NULL, .ts = &d.ts,
                               .cfg = &d.cfg, .linger = d.linger, .heirs = &d.heirs,
                               .mps = d.mps_open ? &d.mps : NULL};
    if ((rc = audit_init(&d.audit, &adeps))) {
        log_error("cannot start the audit: %s", strerror(-rc));
        goto out;
    }
    timeshare_reconfigure(d.timeshare);
    if (setup_metrics(&d, (double)started.tv_sec + started.tv_nsec / 1e9))
        goto out;
    if ((rc = service_init(&d.service, d.loop))) {
        log_error("cannot start the systemd watchdog pings: %s", strerror(-rc));
        goto out;
    }
    char status[96];
    snprintf(status, sizeof status, "%zu tenant(s), %u GPU(s)", d.ts.ledger.n_tenants,
             d.ts.n_gpus);
    log_info("kairosd %s ready: %s", KAIROS_VERSION, status);
    service_ready(d.service, status);
    rc = loop_run(d.loop);
    if (rc)
        log_error("event loop failed: %s", strerror(-rc));
    else
        exit_code = 0;
out:
    service_fini(d.service);
    metrics_http_stop(d.metrics);
    audit_fini(d.audit);
    chargeback_fini(d.chargeback); /* the counters up to now, saved with the state */
    handovers_fini(d.handovers); /* a change not saved yet is written now */
    struct server *server = d.server;
    d.server = NULL; /* no TIME_POLICY goes out from here on (send_time_policy) */
    server_fini(server); /* before what it hands requests to */
    timeshare_fini(d.timeshare);
    linger_fini(d.linger);
    fault_watch_close(d.fault_watch);
    faults_fini(&d.faults);
    mps_clients_close(d.mps_clients);
    if (d.mps_open)
        mps_domains_close(&d.mps); /* the daemons run on: their clients keep working */
    imports_fini(&d.imports);
    heirs_fini(&d.heirs);
    if (d.sw)
        loop_del(d.loop, d.sw);
    if (d.sfd >= 0)
        close(d.sfd);
    loop_fini(d.loop);
    if (ts_ready)
        tenants_fini(&d.ts);
    gpu_fini(&d.gpu);
    if (cfg_loaded)
        config_free(&d.cfg);
    log_fini();
    return exit_code;
}
