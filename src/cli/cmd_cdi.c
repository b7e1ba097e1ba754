/* cmd_cdi.c - `kairos cdi`: writes the CDI specification of kairosd's tenants
 * (cdi_spec.c), for Podman, containerd, CRI-O and Docker, and the ld.so.preload
 * file it mounts into containers.
 *
 *   kairos cdi [--output FILE] [--preload-file PATH] [--shim PATH] [--dev-root DIR]
 *              [--tenant NAME]... [--socket PATH]
 *
 * Asks kairosd for its tenants (PS), writes the preload file (one line: the shim's
 * path in the container) and shim.conf beside it (the socket, the node's
 * on_daemon_down, register: always: what the container's shims read), then the
 * specification to FILE (through a temporary file renamed into place, so that a
 * runtime never reads half a file) or stdout.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cdi_spec.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/ps_view.h"
#include "cli/shim_path.h"

#define DEFAULT_PRELOAD "/var/lib/kairos/cdi/ld.so.preload"
#define MAX_TENANTS 256

enum { OPT_OUTPUT = 256, OPT_PRELOAD, OPT_SHIM, OPT_DEV_ROOT };

struct cdi_opts {
    const char *output;
    const char *preload;
    const char *shim;
    const char *dev_root;
    const char *socket;
    const char *tenants[MAX_TENANTS];
    size_t n_tenants;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos cdi [options]\n"
            "\n"
            "Writes a CDI specification of kind " CDI_KIND " with one device per kairosd\n"
            "tenant, named by the tenant, at the lowest cdiVersion that expresses it\n"
            "(" CDI_VERSION_BASE ", or " CDI_VERSION_DIGIT_NAMES " when a tenant's name begins with a digit,\n"
            "so that Debian 12's Podman reads it). A container started with\n"
            "--device " CDI_KIND "=NAME gets libkairos.so preloaded through its\n"
            "/etc/ld.so.preload, kairosd's socket and a shim.conf naming it at\n"
            "/etc/kairos/shim.conf, the NVIDIA device nodes of the tenant's GPUs and\n"
            "KAIROS_TENANT=NAME. Install it as /etc/cdi/kairos.json.\n"
            "\n"
            "options:\n"
            "      --output FILE        write the specification to FILE (default: stdout)\n"
            "      --preload-file PATH  the ld.so.preload file to write and mount (default\n"
            "                           " DEFAULT_PRELOAD ")\n"
            "      --shim PATH          libkairos.so on the host (default: the one kairos\n"
            "                           finds, see KAIROS_SHIM)\n"
            "      --dev-root DIR       the host's NVIDIA device nodes are under DIR/dev (a\n"
            "                           driver installed in a container, such as\n"
            "                           /run/nvidia/driver); writes cdiVersion "
            CDI_VERSION_DIGIT_NAMES "\n"
            "  -t, --tenant NAME        only this tenant (repeatable; default: every tenant)\n"
            "  -s, --socket PATH        kairosd's socket (default $KAIROS_SOCKET or "
            KAIROS_DEFAULT_SOCKET ")\n"
            "  -h, --help               show this text\n");
}

static int parse_args(int argc, char **argv, struct cdi_opts *o)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"preload-file", required_argument, NULL, OPT_PRELOAD},
        {"shim", required_argument, NULL, OPT_SHIM},
        {"dev-root", required_argument, NULL, OPT_DEV_ROOT},
        {"tenant", required_argument, NULL, 't'},
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->preload = DEFAULT_PRELOAD;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:s:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_OUTPUT:
            o->output = optarg;
            break;
        case OPT_PRELOAD:
            o->preload = optarg;
            break;
        case OPT_SHIM:
            o->shim = optarg;
            break;
        case OPT_DEV_ROOT:
            o->dev_root = optarg;
            break;
        case 't':
            if (o->n_tenants == MAX_TENANTS) {
                fprintf(stderr, "kairos cdi: more than %d --tenant\n", MAX_TENANTS);
                return 2;
            }
            o->tenants[o->n_tenants++] = optarg;
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
    if (optind < argc) {
        fprintf(stderr, "kairos cdi: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

/* An absolute path (a runtime resolves none): realpath of what exists, else path
 * itself when already absolute. 0, or 1 after a message. */
static int absolute(const char *what, const char *path, bool must_exist, char *out, size_t cap)
{
    char buf[PATH_MAX];
    if (realpath(path, buf)) {
        snprintf(out, cap, "%s", buf);
        return 0;
    }
    if (!must_exist && path[0] == '/') {
        snprintf(out, cap, "%s", path);
        return 0;
    }
    fprintf(stderr, "kairos cdi: %s %s: %s%s\n", what, path, strerror(errno),
            path[0] == '/' ? "" : " (give an absolute path)");
    return 1;
}

/* Writes text to path through path.tmp renamed into place. 0 or 1 after a message. */
static int write_atomically(const char *path, const char *text, mode_t mode)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "kairos cdi: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    bool ok = fputs(text, f) >= 0 && fchmod(fileno(f), mode) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        fprintf(stderr, "kairos cdi: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

/* shim.conf beside the preload file (in *out): the socket asked for, the node's
 * on_daemon_down (closed when the node's settings are unusable), and register:
 * always (a container's process that unsets KAIROS_TENANT registers all the same,
 * placed by kairosd or refused). 0 or 1. */
static int write_shim_conf(const char *preload, const char *shim, const char *socket,
                           char *out, size_t cap)
{
    char text[PATH_MAX + 128];
    const char *slash = strrchr(preload, '/');
    int dir_len = slash ? (int)(slash - preload) : 0;
    int n = snprintf(out, cap, "%.*s/shim.conf", dir_len, preload);
    if (n < 0 || (size_t)n >= cap) {
        fprintf(stderr, "kairos cdi: --preload-file %s: path too long\n", preload);
        return 1;
    }
    struct shim_conf node;
    shim_path_conf(shim, &node);
    snprintf(text, sizeof text,
             "# written by kairos cdi: the settings of the shims in kairos containers\n"
             "socket: %s\non_daemon_down: %s\nregister: always\n",
             socket, node.fail_open ? "open" : "closed");
    return write_atomically(out, text, 0644);
}

/* The preload file, its directory created when missing. 0 or 1 after a message. */
static int write_preload(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (mkdir(dir, 0755) && errno != EEXIST) {
            fprintf(stderr, "kairos cdi: cannot create %s: %s\n", dir, strerror(errno));
            return 1;
        }
    }
    return write_atomically(path, CDI_SHIM_IN_CONTAINER "\n", 0644);
}

/* --dev-root DIR made absolute into out, once DIR/dev/nvidiactl is a character device
 * (a runtime refuses a container whose device node is missing, so say it here). 0,
 * or 1 after a message. */
static int device_root(const char *dir, char *out, size_t cap)
{
    if (absolute("--dev-root", dir, true, out, cap))
        return 1;
    char ctl[PATH_MAX + 32];
    struct stat st;
    snprintf(ctl, sizeof ctl, "%s/dev/nvidiactl", out);
    bool found = stat(ctl, &st) == 0;
    if (!found || !S_ISCHR(st.st_mode)) {
        fprintf(stderr, "kairos cdi: --dev-root %s: %s: %s; give the directory that holds "
                "the driver's dev/ (NVIDIA's GPU Operator: /run/nvidia/driver)\n", dir, ctl,
                found ? "not a character device" : strerror(errno));
        return 1;
    }
    if (!strcmp(out, "/"))
        out[0] = 0; /* hostPath /dev/...: the same as no root, but said */
    return 0;
}

static void report_skipped(const char *tenant)
{
    fprintf(stderr, "kairos cdi: tenant '%s' left out: a CDI device name begins and ends "
            "with a letter or a digit\n", tenant);
}

static int write_spec(const struct cdi_opts *o, const struct cdi_params *p,
                      const struct ps_snapshot *snap)
{
    char err[512];
    json_t *spec = cdi_spec_build(p, snap, o->tenants, o->n_tenants, report_skipped, err,
                                  sizeof err);
    if (!spec) {
        fprintf(stderr, "kairos cdi: %s\n", err);
        return 1;
    }
    char *text = json_dumps(spec, JSON_INDENT(2));
    json_decref(spec);
    if (!text) {
        fprintf(stderr, "kairos cdi: out of memory\n");
        return 1;
    }
    int rc = 0;
    if (o->output) {
        size_t n = strlen(text);
        char *line = realloc(text, n + 2);
        if (line) {
            text = line;
            memcpy(text + n, "\n", 2);
        }
        rc = write_atomically(o->output, text, 0644);
    } else {
        puts(text);
    }
    free(text);
    return rc;
}

int cmd_cdi(int argc, char **argv)
{
    struct cdi_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    char shim[PATH_MAX], preload[PATH_MAX], socket[PATH_MAX], shim_conf[PATH_MAX], err[512];
    char dev_root[PATH_MAX];
    if (!o.shim && shim_path_find(shim, sizeof shim)) {
        fprintf(stderr, "kairos cdi: cannot find libkairos.so; give --shim PATH or set "
                        "KAIROS_SHIM\n");
        return 1;
    }
    if (absolute("--shim", o.shim ? o.shim : shim, true, shim, sizeof shim) ||
        absolute("--preload-file", o.preload, false, preload, sizeof preload) ||
        absolute("socket", client_socket_path(o.socket), false, socket, sizeof socket) ||
        (o.dev_root && device_root(o.dev_root, dev_root, sizeof dev_root)))
        return 1;
    struct ps_snapshot snap;
    if (ps_fetch(socket, false, &snap, err, sizeof err)) {
        fprintf(stderr, "kairos cdi: %s\n", err);
        return 1;
    }
    struct cdi_params p = {.shim = shim, .preload_file = preload, .socket = socket,
                           .shim_conf = shim_conf, .dev_root = o.dev_root ? dev_root : NULL};
    rc = write_preload(preload) ||
                 write_shim_conf(preload, shim, socket, shim_conf, sizeof shim_conf) ||
                 write_spec(&o, &p, &snap)
             ? 1
             : 0;
    ps_snapshot_free(&snap);
    return rc;
}
