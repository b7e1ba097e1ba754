/* cmd_tenant.c - `kairos tenant`: a tenant's settings and membership, without
 * running a command (administrators; cluster integrations such as the Slurm
 * plugin call these).
 *
 *   kairos tenant set NAME [--mem SIZE] [--share PCT] [--limit PCT|none]
 *                          [--priority P] [--managed refuse|charge]
 *                          [--fault-domain NAME] [--gpus LIST] [--socket PATH]
 *   kairos tenant admit NAME PID [--socket PATH]
 *   kairos tenant members NAME [--users LIST] [--groups LIST] [--cgroups LIST]
 *                              [--socket PATH]
 *   kairos tenant del NAME [--socket PATH]
 *
 * set is kairos run's TENANT_SET (cmd_run.c) without the command; admit, members
 * and del send TENANT_ADMIT, TENANT_MEMBERS and TENANT_DEL. kairosd decides and
 * its refusal is printed as it says it.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos tenant set NAME [--mem SIZE] [--share PCT] [--limit PCT|none]\n"
            "                     [--priority latency|normal|batch] [--managed refuse|charge]\n"
            "                     [--fault-domain NAME] [--gpus LIST]\n"
            "       kairos tenant admit NAME PID\n"
            "       kairos tenant members NAME [--users LIST] [--groups LIST] [--cgroups LIST]\n"
            "       kairos tenant del NAME\n"
            "\n"
            "A tenant's settings and membership, for administrators and cluster integrations:\n"
            "  set      create the tenant or change its quota, compute policy, managed-\n"
            "           memory policy and fault domain (options as kairos run's)\n"
            "  admit    let process PID and its descendants join the tenant (whatever tenant\n"
            "           they ask for)\n"
            "  members  who may join a tenant created at run time: users and groups (names\n"
            "           or ids) and cgroup patterns, comma-separated; none given: nobody but\n"
            "           administrators and admitted processes\n"
            "  del      remove a tenant without processes\n"
            "\n"
            "Every subcommand takes -s, --socket PATH: kairosd's socket (default\n"
            "$KAIROS_SOCKET or " KAIROS_DEFAULT_SOCKET ").\n");
}

/* Sends one request and waits for OK; 0, or 1 after kairosd's message. */
static int request(const char *socket, uint16_t type, const void *body, size_t len)
{
    struct client cl;
    char err[512];
    uint16_t reply;
    uint32_t code = 0;
    if (client_connect(&cl, client_socket_path(socket), err, sizeof err)) {
        fprintf(stderr, "kairos tenant: %s\n", err);
        return 1;
    }
    int seq = client_send(&cl, type, body, len);
    int rc = seq < 0 ? seq : client_recv(&cl, (uint32_t)seq, &reply, NULL, 0, &code, err,
                                         sizeof err);
    client_close(&cl);
    if (rc) {
        fprintf(stderr, "kairos tenant: %s\n", seq < 0 ? strerror(-seq) : err);
        return 1;
    }
    return 0;
}

static int name_into(char *out, const char *name)
{
    if (strlen(name) >= KAIROS_NAME_MAX) {
        fprintf(stderr, "kairos tenant: tenant name '%s' is too long\n", name);
        return 2;
    }
    snprintf(out, KAIROS_NAME_MAX, "%s", name);
    return 0;
}

/* One user or group of a comma-separated list: an id, or a name resolved. */
static int resolve_id(const char *item, bool group, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(item, &end, 10);
    if (*item && !*end && !errno && item[0] != '-' && v < UINT32_MAX) {
        *out = (uint32_t)v;
        return 0;
    }
    if (group) {
        struct group *g = getgrnam(item);
        if (g) {
            *out = g->gr_gid;
            return 0;
        }
    } else {
        struct passwd *p = getpwnam(item);
        if (p) {
            *out = p->pw_uid;
            return 0;
        }
    }
    fprintf(stderr, "kairos tenant members: no %s '%s'\n", group ? "group" : "user", item);
    return 2;
}

/* "a,b,c" into ids (group: groups) or cgroups; 0 or 2 after a message. */
static int parse_list(const char *list, int kind, struct kairos_tenant_members *m)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        if (kind == 'c') {
            if (m->n_cgroups >= KAIROS_MEMBERS_MAX_CGROUPS || item[0] != '/' ||
                strlen(item) >= KAIROS_CGROUP_MAX) {
                fprintf(stderr, "kairos tenant members: --cgroups: at most %u patterns, each "
                        "beginning with '/' (at most %d characters)\n",
                        KAIROS_MEMBERS_MAX_CGROUPS, KAIROS_CGROUP_MAX - 1);
                return 2;
            }
            snprintf(m->cgroups[m->n_cgroups++], KAIROS_CGROUP_MAX, "%s", item);
            continue;
        }
        uint32_t *n = kind == 'u' ? &m->n_users : &m->n_groups;
        if (*n >= KAIROS_MEMBERS_MAX_IDS) {
            fprintf(stderr, "kairos tenant members: at most %u %s\n", KAIROS_MEMBERS_MAX_IDS,
                    kind == 'u' ? "users" : "groups");
            return 2;
        }
        uint32_t *ids = kind == 'u' ? m->users : m->groups;
        if (resolve_id(item, kind == 'g', &ids[*n]))
            return 2;
        (*n)++;
    }
    return 0;
}

/* admit, members, del: NAME [PID] and options. */
static int simple(const char *what, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'}, {"users", required_argument, NULL, 'u'},
        {"groups", required_argument, NULL, 'g'}, {"cgroups", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    struct kairos_tenant_members m = {0};
    const char *socket = NULL;
    bool members = !strcmp(what, "members");
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "s:h", longopts, NULL)) != -1) {
        if (c == 's') {
            socket = optarg;
        } else if (members && (c == 'u' || c == 'g' || c == 'c')) {
            if (parse_list(optarg, c, &m))
                return 2;
        } else {
            usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    int want = !strcmp(what, "admit") ? 2 : 1;
    if (argc - optind != want) {
        fprintf(stderr, "kairos tenant %s: expected %s\n", what, want == 2 ? "NAME PID" : "NAME");
        return 2;
    }
    const char *name = argv[optind];
    if (!strcmp(what, "admit")) {
        struct kairos_tenant_admit a = {0};
        char *end;
        unsigned long pid = strtoul(argv[optind + 1], &end, 10);
        if (*end || !pid || pid > INT32_MAX) {
            fprintf(stderr, "kairos tenant admit: '%s' is not a process id\n", argv[optind + 1]);
            return 2;
        }
        a.pid = (uint32_t)pid;
        if (name_into(a.tenant, name))
            return 2;
        return request(socket, KAIROS_MSG_TENANT_ADMIT, &a, sizeof a);
    }
    if (members) {
        if (name_into(m.tenant, name))
            return 2;
        return request(socket, KAIROS_MSG_TENANT_MEMBERS, &m, sizeof m);
    }
    struct kairos_tenant_del d = {0};
    if (name_into(d.tenant, name))
        return 2;
    return request(socket, KAIROS_MSG_TENANT_DEL, &d, sizeof d);
}

/* set NAME [options]: kairos run --tenant NAME [options], without a command. */
static int set(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "kairos tenant set: expected NAME [--mem SIZE] [...]\n");
        return 2;
    }
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args)
        return 1;
    args[0] = argv[0];
    args[1] = "--tenant";
    args[2] = argv[1];
    for (int i = 2; i < argc; i++)
        args[i + 1] = argv[i];
    int rc = cmd_run_tenant_set(argc + 1, args);
    free(args);
    return rc;
}

int cmd_tenant(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *what = argv[1];
    if (!strcmp(what, "set"))
        return set(argc - 1, argv + 1);
    if (!strcmp(what, "admit") || !strcmp(what, "members") || !strcmp(what, "del"))
        return simple(what, argc - 1, argv + 1);
    fprintf(stderr, "kairos tenant: unknown subcommand '%s' (set, admit, members, del)\n", what);
    return 2;
}
