/* cmd_run.c - `kairos run`: start a command as a tenant of kairosd.
 *
 *   kairos run [--tenant NAME] [--mem SIZE] [--share PCT] [--limit PCT|none]
 *              [--priority latency|normal|batch] [--managed refuse|charge]
 *              [--fault-domain NAME] [--gpus LIST] [--user NAME] [--socket PATH]
 *              -- CMD [ARGS]
 *
 * With --mem (root or an administrator), the tenant is created or its quota set
 * first (a generated name when --tenant is absent: such a tenant is ephemeral and
 * goes away with its command). --share, --limit and --priority (administrators
 * too) set the tenant's compute policy on each GPU (of --gpus), --managed its
 * managed-memory policy and --fault-domain its fault domain (space mode), in the
 * same TENANT_SET; without --mem the tenant must exist already. Without any of
 * them, the tenant must exist. TENANT_SET carries fault_domain only for
 * --fault-domain (a kairosd of before refuses the longer body, and is told to be too
 * old for the option); otherwise it is the body of before (KAIROS_TENANT_SET_SIZE_V1).
 * Then kairosd is asked to admit this process (TENANT_ADMIT: kairosd decides; CMD
 * keeps this pid, its descendants follow it), the user CMD runs as is taken
 * (run_user.h: under sudo, the invoking user), the environment is prepared
 * (KAIROS_TENANT, LD_PRELOAD of libkairos.so, CUDA_VISIBLE_DEVICES for --gpus) and
 * CMD is exec'd in place of kairos, so its signals, pid and exit status are its own;
 * the daemon knows this pid as the owner of an ephemeral tenant.
 *
 * Which kairosd: CMD's shim registers with the daemon the node's shim settings
 * name (core/shim_conf.h), whatever kairos run is told. So kairos run talks to that
 * daemon too; --socket or $KAIROS_SOCKET naming another one is refused (the tenant
 * would be set up on one daemon while CMD registers with another), and settings
 * the shim cannot use are refused before CMD starts.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/run_user.h"
#include "cli/shim_path.h"
#include "core/policy.h"
#include "core/tenant_name.h"
#include "core/units.h"

struct run_opts {
    const char *tenant;
    const char *mem;
    const char *gpus;
    const char *socket;
    const char *user;
    bool set_only;             /* kairos tenant set: the tenant's settings, no command */
    bool compute;              /* --share, --limit or --priority given */
    uint32_t managed;          /* --managed: KAIROS_TENANT_MANAGED_* (0: not given) */
    const char *fault_domain;  /* --fault-domain ("": none; NULL: not given) */
    struct sched_policy pol;   /* what they say (unsaid: 0 %, none, normal) */
    char **command;
};

enum { OPT_SHARE = 256, OPT_LIMIT, OPT_PRIORITY, OPT_USER, OPT_MANAGED, OPT_FAULT_DOMAIN };

/* How messages begin: "kairos run", or "kairos tenant set" (cmd_run_tenant_set), or the
 * caller of cmd_run_daemon_check. */
static const char *run_prog = "kairos run";

static const char no_shim[] = "cannot find libkairos.so next to kairos; build it, or set "
                              "KAIROS_SHIM=/path/to/libkairos.so";

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos run [options] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD as a member of a kairosd tenant: its GPU memory is limited to the\n"
            "tenant's quota, shared with the tenant's other processes.\n"
            "\n"
            "options:\n"
            "  -t, --tenant NAME   join this tenant (created or updated by the options below)\n"
            "  -m, --mem SIZE      quota per GPU for the tenant (8G, 512MiB, 80%%); root or an\n"
            "                      administrator only; without --tenant a tenant with a\n"
            "                      generated name is created and removed when CMD ends\n"
            "      --share PCT     GPU time guaranteed to the tenant on each GPU whenever\n"
            "                      others compete (30%%; default 0%%: best effort)\n"
            "      --limit PCT     a cap on its GPU time even when the GPU is idle (50%%, or\n"
            "                      none: the default)\n"
            "      --priority P    latency, normal (default) or batch\n"
            "      --managed M     managed memory (cudaMallocManaged) in the tenant: refuse\n"
            "                      (the default for a new tenant) or charge (allowed, each\n"
            "                      range charged in full against the quota); root or an\n"
            "                      administrator only\n"
            "                      --share, --limit and --priority set the tenant's compute\n"
            "                      policy (replacing the one it had there); root or an\n"
            "                      administrator only; the tenant must exist or be created\n"
            "                      by --mem; the shares of one GPU add up to at most 100%%\n"
            "      --fault-domain NAME\n"
            "                      the tenant's fault domain (space mode): its processes run\n"
            "                      beside the domain's others on the SMs, as clients of one\n"
            "                      MPS server, and share its fate; a domain declared under\n"
            "                      space: domains: in kairosd.yaml ('' for none); root or an\n"
            "                      administrator only, for a tenant without processes\n"
            "  -g, --gpus LIST     only these GPU indexes, e.g. 0,2 (quota 0 elsewhere, the\n"
            "                      compute policy there only); sets CUDA_VISIBLE_DEVICES\n"
            "      --user NAME     run CMD as NAME (root only; --user root to run it as\n"
            "                      root). Under sudo, CMD runs as the user who ran sudo\n"
            "  -s, --socket PATH   kairosd's socket; must be the one the shim's node\n"
            "                      settings name (" SHIM_CONF_NODE_PATH "), the default\n"
            "  -h, --help          show this text\n"
            "\n"
            "Environment: KAIROS_SHIM=/path/to/libkairos.so overrides where the shim is found.\n");
}

/* One of --share, --limit, --priority into o->pol; 0, or 2 after a message. */
static int parse_compute(int opt, const char *arg, struct run_opts *o)
{
    char why[256];
    int rc;
    if (opt == OPT_SHARE)
        rc = policy_parse_percent("share", arg, &o->pol.share, why, sizeof why);
    else if (opt == OPT_LIMIT)
        rc = policy_parse_limit(arg, &o->pol.limit, why, sizeof why);
    else
        rc = policy_parse_priority(arg, &o->pol.prio, why, sizeof why);
    if (rc) {
        fprintf(stderr, "%s: %s %s: %s\n", run_prog,
                opt == OPT_SHARE ? "--share" : opt == OPT_LIMIT ? "--limit" : "--priority", arg,
                why);
        return 2;
    }
    o->compute = true;
    return 0;
}

static int parse_args(int argc, char **argv, struct run_opts *o, bool set_only)
{
    static const struct option longopts[] = {
        {"tenant", required_argument, NULL, 't'}, {"mem", required_argument, NULL, 'm'},
        {"gpus", required_argument, NULL, 'g'},   {"socket", required_argument, NULL, 's'},
        {"share", required_argument, NULL, OPT_SHARE},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"priority", required_argument, NULL, OPT_PRIORITY},
        {"user", required_argument, NULL, OPT_USER},
        {"managed", required_argument, NULL, OPT_MANAGED},
        {"fault-domain", required_argument, NULL, OPT_FAULT_DOMAIN},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->set_only = set_only;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+t:m:g:s:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SHARE:
        case OPT_LIMIT:
        case OPT_PRIORITY:
            if (parse_compute(c, optarg, o))
                return 2;
            break;
        case OPT_USER:
            o->user = optarg;
            break;
        case OPT_MANAGED:
            if (strcmp(optarg, "charge") && strcmp(optarg, "refuse")) {
                fprintf(stderr, "%s: --managed %s: expected refuse (managed memory refused) or "
                                "charge (allowed, each range charged in full)\n", run_prog,
                        optarg);
                return 2;
            }
            o->managed = !strcmp(optarg, "charge") ? KAIROS_TENANT_MANAGED_CHARGE
                                                   : KAIROS_TENANT_MANAGED_REFUSE;
            break;
        case OPT_FAULT_DOMAIN:
            if (optarg[0] && (strlen(optarg) >= KAIROS_NAME_MAX || !tenant_name_valid(optarg))) {
                fprintf(stderr, "%s: --fault-domain '%s': a fault domain's name is 1-63 "
                                "characters of A-Z a-z 0-9 . _ - (not starting with . or -), "
                                "or '' for none\n", run_prog, optarg);
                return 2;
            }
            o->fault_domain = optarg;
            break;
        case 't':
            o->tenant = optarg;
            break;
        case 'm':
            o->mem = optarg;
            break;
        case 'g':
            o->gpus = optarg;
            break;
        case 's':
            o->socket = optarg;
            break;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (set_only)
        return 0;
    if (optind >= argc) {
        fprintf(stderr, "%s: no command given (kairos run [options] -- CMD [ARGS])\n", run_prog);
        return 2;
    }
    o->command = argv + optind;
    char why[256];
    if (o->compute && policy_check(&o->pol, why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", run_prog, why);
        return 2;
    }
    if (!o->tenant && !o->mem) {
        const char *env = getenv("KAIROS_TENANT");
        if (env && *env) {
            o->tenant = env;
        } else {
            fprintf(stderr, "%s: give --tenant NAME to join a tenant, or --mem SIZE to "
                            "create one\n", run_prog);
            return 2;
        }
    }
    return 0;
}

/* "0,2" -> mask; 0 or -EINVAL with a message. */
static int parse_gpus(const char *list, unsigned *mask)
{
    *mask = 0;
    const char *p = list;
    while (*p) {
        char *end;
        unsigned long g = strtoul(p, &end, 10);
        if (end == p || g >= KAIROS_MAX_GPUS || (*end && *end != ',')) {
            fprintf(stderr, "%s: --gpus '%s': expected GPU indexes 0-%u separated by "
                            "commas, e.g. 0,2\n", run_prog, list, KAIROS_MAX_GPUS - 1);
            return -EINVAL;
        }
        *mask |= 1u << g;
        p = *end ? end + 1 : end;
    }
    if (!*mask) {
        fprintf(stderr, "%s: --gpus is empty\n", run_prog);
        return -EINVAL;
    }
    return 0;
}

/* The quota per GPU for --mem: a size, or a percentage that kairosd resolves with
 * each GPU's memory (KAIROS_QUOTA_PERCENT). 0 or -EINVAL after a message. */
static int mem_quota(const char *mem, unsigned n_gpus, unsigned mask, uint64_t *quota)
{
    char err[160] = "";
    uint64_t value;
    if (strchr(mem, '%')) {
        double fraction = 0;
        if (units_parse_percent(mem, &fraction, err, sizeof err) == 0 && fraction <= 0)
            snprintf(err, sizeof err, "'%s': a percentage must be above 0%%", mem);
        if (err[0]) {
            fprintf(stderr, "%s: --mem %s\n", run_prog, err);
            return -EINVAL;
        }
        uint64_t ppm = (uint64_t)(fraction * KAIROS_PPM + 0.5);
        value = KAIROS_QUOTA_PERCENT | (ppm ? ppm : 1);
    } else if (units_parse_size_with_unit(mem, 0, &value, err, sizeof err)) {
        fprintf(stderr, "%s: --mem %s\n", run_prog, err);
        return -EINVAL;
    }
    for (unsigned g = 0; g < n_gpus; g++)
        quota[g] = (mask & (1u << g)) ? value : 0;
    return 0;
}

static int run_error(const char *what, const char *err)
{
    fprintf(stderr, "%s: %s%s\n", run_prog, what, err);
    return 1;
}

static bool same_socket(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (realpath(a, ra) && realpath(b, rb))
        return !strcmp(ra, rb);
    return !strcmp(a, b);
}

/* The socket of the daemon CMD's shim will register with, in *path: the node's
 * shim settings. --socket or $KAIROS_SOCKET may only name the same one. 0, or the
 * exit code after a message. */
static int daemon_socket(const char *shim, const char *given, struct shim_conf *conf,
                         const char **path)
{
    shim_path_conf(shim, conf);
    if (conf->problem[0]) {
        fprintf(stderr, "%s: the shim's node settings are unusable (%s); CMD would "
                        "be refused GPU use. An administrator fixes the file (libkairos(7))\n",
                run_prog, conf->problem);
        return 1;
    }
    if (conf->note[0])
        fprintf(stderr, "%s: %s\n", run_prog, conf->note);
    const char *env = getenv("KAIROS_SOCKET");
    const char *asked = given && *given ? given : env && *env ? env : NULL;
    if (asked && !same_socket(asked, conf->socket_path)) {
        fprintf(stderr,
                "kairos run: %s %s is not the kairosd that CMD's shim registers with (%s, from "
                "%s): a shim takes its daemon from the node's settings, not from kairos run. "
                "Leave out %s, or (tests, developer builds) set KAIROS_SHIM_CONF to a shim.conf "
                "naming %s, owned by root or by libkairos.so's owner and writable by no one "
                "else\n",
                given && *given ? "--socket" : "KAIROS_SOCKET", asked, conf->socket_path,
                conf->source, given && *given ? "--socket" : "KAIROS_SOCKET", asked);
        return 2;
    }
    *path = conf->socket_path;
    return 0;
}

/* What set_tenant did, on stderr. */
/* An existing tenant's quotas that --mem changed, each said with what it was: run
 * never changes a tenant (a configured one included) without saying so. */
static void report_changed_quotas(const char *name, unsigned n_gpus,
                                  const struct kairos_ps_reply *before,
                                  const struct kairos_tenant_set *set)
{
    for (unsigned g = 0; before && g < n_gpus && g < KAIROS_MAX_GPUS; g++) {
        uint64_t was = before->quota[g], now = set->quota[g];
        if (now == KAIROS_QUOTA_KEEP || (now & KAIROS_QUOTA_PERCENT) || now == was)
            continue;
        char a[32], b[32];
        fprintf(stderr, "%s: tenant %s's quota on GPU %u changed from %s to %s%s\n", run_prog,
                name, g, was ? units_format_size(was, a, sizeof a) : "none",
                units_format_size(now, b, sizeof b),
                now < was ? " (lowered: its members' allocations beyond it are refused)" : "");
    }
}

static void report_set(const struct run_opts *o, const char *name, unsigned n_gpus, unsigned mask,
                       const struct kairos_tenant_set *set)
{
    if (o->mem) {
        unsigned first = 0;
        while (first < n_gpus && !(mask & (1u << first)))
            first++;
        char size[32];
        uint64_t q = first < n_gpus ? set->quota[first] : 0;
        if (q & KAIROS_QUOTA_PERCENT)
            snprintf(size, sizeof size, "%s of the GPU's memory", o->mem);
        else
            units_format_size(q, size, sizeof size);
        fprintf(stderr, "%s: tenant %s %s: %s per GPU%s%s%s\n", run_prog, name,
                o->tenant ? "set" : "created", size, o->gpus ? " on GPUs " : "",
                o->gpus ? o->gpus : "", o->tenant ? "" : " (removed when the command ends)");
    }
    if (o->managed)
        fprintf(stderr, "%s: tenant %s: managed memory %s\n", run_prog, name,
                o->managed == KAIROS_TENANT_MANAGED_CHARGE ? "allowed, charged in full"
                                                           : "refused");
    if (o->compute) {
        char what[96];
        fprintf(stderr, "%s: tenant %s: compute %s on %s%s\n", run_prog, name,
                policy_describe(&o->pol, what, sizeof what), o->gpus ? "GPUs " : "each GPU",
                o->gpus ? o->gpus : "");
    }
    if (o->fault_domain && o->fault_domain[0])
        fprintf(stderr, "%s: tenant %s: fault domain %s (its processes are clients of the "
                        "domain's MPS server and share its fate)\n", run_prog, name,
                o->fault_domain);
    else if (o->fault_domain)
        fprintf(stderr, "%s: tenant %s: in no fault domain (time sharing)\n", run_prog, name);
}

/* kairosd's refusal of set_tenant's TENANT_SET, on stderr. */
static void report_refused(const struct run_opts *o, uint32_t code, const char *err)
{
    if (code == KAIROS_ERR_PROTOCOL && o->fault_domain) /* its exact-size rule: proto.h */
        fprintf(stderr, "%s: this kairosd is too old for --fault-domain (it refused the "
                        "longer TENANT_SET: %s); upgrade kairosd, or leave out "
                        "--fault-domain\n", run_prog, err);
    else if (code == KAIROS_ERR_PERMISSION)
        fprintf(stderr, "%s: %s; without --mem, --share, --limit, --priority, --managed and "
                        "--fault-domain you can join an existing tenant with --tenant NAME\n",
                run_prog, err);
    else
        run_error("", err);
}

/* TENANT_ADMIT of this process (CMD once exec'd) and its descendants. 0, or the
 * exit code after a message. */
static int admit_self(struct client *cl, const char *name)
{
    struct kairos_tenant_admit a = {.pid = 0};
    char err[512];
    uint16_t type;
    uint32_t code = 0;
    snprintf(a.tenant, sizeof a.tenant, "%s", name);
    int seq = client_send(cl, KAIROS_MSG_TENANT_ADMIT, &a, sizeof a);
    if (seq < 0)
        return run_error("cannot send to kairosd: ", strerror(-seq));
    if (client_recv(cl, (uint32_t)seq, &type, NULL, 0, &code, err, sizeof err))
        return run_error("", err);
    return 0;
}

/* TENANT_SET for --mem and the compute options: quotas (or KEEP), the policy on
 * each GPU of mask. 0, or the exit code after a message. */
static int set_tenant(struct client *cl, const struct run_opts *o, const char *name,
                      unsigned n_gpus, unsigned mask, const struct kairos_ps_reply *before)
{
    struct kairos_tenant_set set = {.n_gpus = n_gpus,
                                    .flags = (o->tenant ? 0 : KAIROS_TENANT_EPHEMERAL) |
                                             o->managed};
    char err[512];
    memcpy(set.tenant, name, sizeof set.tenant);
    size_t len = KAIROS_TENANT_SET_SIZE_V1; /* a kairosd of before takes it */
    if (o->fault_domain) {
        snprintf(set.fault_domain, sizeof set.fault_domain, "%s", o->fault_domain);
        len = sizeof set;
    }
    if (o->mem && mem_quota(o->mem, n_gpus, mask, set.quota))
        return 2;
    for (unsigned g = 0; g < n_gpus; g++) {
        if (!o->mem)
            set.quota[g] = KAIROS_QUOTA_KEEP;
        if (o->compute && (mask & (1u << g)))
            policy_to_wire(&o->pol, &set.compute[g]);
    }
    int seq = client_send(cl, KAIROS_MSG_TENANT_SET, &set, len);
    uint16_t type;
    uint32_t code = 0;
    if (seq < 0)
        return run_error("cannot send to kairosd: ", strerror(-seq));
    if (client_recv(cl, (uint32_t)seq, &type, NULL, 0, &code, err, sizeof err)) {
        report_refused(o, code, err);
        return 1;
    }
    report_set(o, name, n_gpus, mask, &set);
    report_changed_quotas(name, n_gpus, before, &set);
    return 0;
}

/* kairos run, or (set_only) kairos tenant set: the tenant's settings only. */
static int run_main(int argc, char **argv, bool set_only)
{
    run_prog = set_only ? "kairos tenant set" : "kairos run";
    struct run_opts o;
    int rc = parse_args(argc, argv, &o, set_only);
    if (rc)
        return rc < 0 ? 0 : rc;
    bool settings = o.mem || o.compute || o.managed || o.fault_domain;
    if (set_only && !settings) {
        fprintf(stderr, "kairos tenant set: give --mem SIZE and/or --share, --limit, "
                        "--priority, --managed, --fault-domain\n");
        return 2;
    }
    char shim[PATH_MAX], err[512], name[KAIROS_NAME_MAX];
    if (!set_only && shim_path_find(shim, sizeof shim))
        return run_error(no_shim, "");
    unsigned mask = ~0u;
    if (o.gpus && parse_gpus(o.gpus, &mask))
        return 2;
    struct run_user user;
    if (run_user_resolve(o.user, &user, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", run_prog, err);
        return 2;
    }
    struct shim_conf conf;
    const char *socket_path = client_socket_path(o.socket);
    if (!set_only && (rc = daemon_socket(shim, o.socket, &conf, &socket_path)))
        return rc;
    struct client cl;
    if (client_connect(&cl, socket_path, err, sizeof err))
        return run_error("", err);
    struct kairos_ps_reply *list = NULL;
    size_t n = 0;
    unsigned n_gpus = 0;
    int exit_code = 1;
    if (client_ps(&cl, 0, &list, &n, &n_gpus, err, sizeof err)) {
        run_error("", err);
        goto out;
    }
    if (o.gpus && (mask >> n_gpus)) {
        fprintf(stderr, "%s: --gpus %s: this node has %u GPU%s (0-%d)\n", run_prog, o.gpus, n_gpus,
                n_gpus == 1 ? "" : "s", (int)n_gpus - 1);
        exit_code = 2;
        goto out;
    }
    if (o.tenant)
        snprintf(name, sizeof name, "%s", o.tenant);
    else
        snprintf(name, sizeof name, "run-%ld", (long)getpid());
    const struct kairos_ps_reply *before = NULL;
    for (size_t i = 0; i < n && !before; i++)
        if (!strcmp(list[i].tenant, name))
            before = &list[i];
    bool found = before != NULL;
    if (!found && !o.mem) {
        if (settings)
            fprintf(stderr, "%s: unknown tenant '%s'; add --mem SIZE to create it with "
                            "its policies (a tenant needs a memory quota to use a GPU)\n",
                    run_prog, name);
        else
            fprintf(stderr, "%s: unknown tenant '%s'; 'kairos ps' lists the tenants, and "
                            "an administrator creates one with 'kairos run --tenant %s --mem "
                            "SIZE' or in the configuration\n", run_prog, name, name);
        goto out;
    }
    if (settings && (exit_code = set_tenant(&cl, &o, name, n_gpus, mask, before)))
        goto out;
    if (set_only)
        goto out; /* exit_code 0 */
    if ((exit_code = admit_self(&cl, name)))
        goto out;
    client_close(&cl);
    free(list);
    list = NULL;

    if (shim_path_preload(shim))
        return run_error("out of memory", "");
    setenv("KAIROS_TENANT", name, 1);
    if (run_user_switch(&user, err, sizeof err))
        return run_error("", err);
    if (o.gpus) {
        setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1); /* CUDA's order = NVML's indexes */
        setenv("CUDA_VISIBLE_DEVICES", o.gpus, 1);
    }
    execvp(o.command[0], o.command);
    fprintf(stderr, "%s: cannot run '%s': %s\n", run_prog, o.command[0], strerror(errno));
    return 127;
out:
    client_close(&cl);
    free(list);
    return exit_code;
}

int cmd_run_daemon_check(const char *prog)
{
    char shim[PATH_MAX], err[512];
    struct shim_conf conf;
    struct client cl;
    const char *path = NULL;
    int rc;
    run_prog = prog;
    if (shim_path_find(shim, sizeof shim))
        rc = run_error(no_shim, "");
    else if (!(rc = daemon_socket(shim, NULL, &conf, &path)) &&
             client_connect(&cl, path, err, sizeof err))
        rc = run_error("", err);
    else if (!rc)
        client_close(&cl);
    run_prog = "kairos run";
    return rc;
}

int cmd_run(int argc, char **argv)
{
    return run_main(argc, argv, false);
}

int cmd_run_tenant_set(int argc, char **argv)
{
    return run_main(argc, argv, true);
}
