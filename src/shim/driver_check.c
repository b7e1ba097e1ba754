/* driver_check.c - the verdict on the running driver's version, from its version
 * handshake and the node's shim.conf (see driver_check.h). */
#include "shim/driver_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/driver_version.h"
#include "core/rm_abi.h"
#include "shim/settings.h"

enum verdict {
    VERDICT_UNKNOWN = 0, /* no handshake seen yet: read as on a supported driver */
    VERDICT_SUPPORTED,
    VERDICT_REFUSED,
    VERDICT_PASSTHROUGH,
};

#define PROC_VERSION_PATH "/proc/driver/nvidia/version"

static _Atomic int verdict = VERDICT_UNKNOWN;
static _Atomic bool proc_read; /* the /proc file was tried (once a process) */

static void say_refused(const struct driver_version *v)
{
    dprintf(2, "kairos[%d]: GPU access refused: NVIDIA driver %s is not a release this "
            "Kairos was built for (branch " DRIVER_BRANCHES_SUPPORTED ", tested on "
            DRIVER_VERSION_TESTED "): its argument layouts could be misread. Install a "
            "Kairos built for this driver, or have an administrator set "
            "unsupported_driver: passthrough in the node's shim.conf (no quotas).\n",
            (int)getpid(), v->text[0] ? v->text : "(unreadable version)");
}

static void say_passthrough(const struct driver_version *v)
{
    dprintf(2, "kairos[%d]: WARNING: NVIDIA driver %s is not a release this Kairos was "
            "built for (branch " DRIVER_BRANCHES_SUPPORTED "); as the node's shim.conf "
            "says (unsupported_driver: passthrough), this process uses the GPU with NO "
            "memory quota and no time control.\n",
            (int)getpid(), v->text[0] ? v->text : "(unreadable version)");
}

/* The verdict for the version v (zeroed: found, but unreadable). */
static enum verdict judge(const struct driver_version *v)
{
    if (driver_version_supported(v))
        return VERDICT_SUPPORTED;
    bool pass = settings_get()->driver_passthrough;
    if (pass)
        say_passthrough(v);
    else
        say_refused(v);
    return pass ? VERDICT_PASSTHROUGH : VERDICT_REFUSED;
}

/* The process's verdict once v is known: the first decision stands (one line on
 * stderr, one verdict for the process). */
static int decide(const struct driver_version *v)
{
    int now = atomic_load(&verdict);
    if (now == VERDICT_UNKNOWN) {
        int mine = judge(v);
        if (atomic_compare_exchange_strong(&verdict, &now, mine))
            now = mine;
    }
    return now;
}

int driver_check_open(const struct shim_real *r)
{
    int now = atomic_load(&verdict);
    if (now == VERDICT_UNKNOWN && !atomic_exchange(&proc_read, true)) {
        int fd = r->open(PROC_VERSION_PATH, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char text[512];
            ssize_t n = read(fd, text, sizeof text);
            r->close(fd);
            struct driver_version v = {.major = 0};
            if (n > 0)
                driver_version_parse(text, (size_t)n, &v);
            now = decide(&v);
        }
    }
    return now == VERDICT_REFUSED ? -1 : 0;
}

int driver_check_handshake(const void *answer, size_t len)
{
    struct driver_version v = {.major = 0};
    if (len == sizeof(struct rm_check_version_args)) {
        const struct rm_check_version_args *a = answer;
        driver_version_parse(a->version, sizeof a->version, &v);
    }
    if (decide(&v) == VERDICT_REFUSED) {
        errno = EINVAL; /* as the driver answers a handshake it does not accept */
        return -1;
    }
    return 0;
}

bool driver_check_passthrough(void)
{
    return atomic_load_explicit(&verdict, memory_order_relaxed) == VERDICT_PASSTHROUGH;
}
