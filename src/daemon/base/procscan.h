/* procscan.h - the processes that hold a device node of the NVIDIA driver open,
 * found through /proc/PID/fd (the link of every descriptor), with their uid, their
 * command and whether they are exiting. It is what the audit can see of a process
 * that uses a GPU without the shim and without a CUDA context, which NVML does not
 * list, and all it can see when NVML is absent.
 *
 * kairosd as root sees every process; as another user only its own (the kernel
 * hides other users' descriptors), which the tests use. The cost is one readlink
 * per descriptor of every process, and a kcmp(2) per thread, since a thread may have
 * a descriptor table of its own (docs/audit.md has the figures); it is bounded by a
 * budget of descriptors per scan, and a scan cut short says so.
 *
 * Thread rules: no shared state.
 */
#ifndef KAIROS_DAEMON_PROCSCAN_H
#define KAIROS_DAEMON_PROCSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kairos/proto.h"

#define PROCSCAN_COMM_MAX 16 /* /proc/PID/comm: TASK_COMM_LEN */

struct procscan_proc {
    uint32_t pid;
    uint32_t uid;                 /* real uid */
    uint32_t ppid;                /* its parent; 0 when unknown */
    char comm[PROCSCAN_COMM_MAX]; /* "?" when unknown */
    bool exists;                  /* /proc/PID was there */
    bool exiting;                 /* PF_EXITING: in exit, its descriptors being closed */
};

struct procscan_opener {
    struct procscan_proc proc;
    uint32_t gpus;  /* bit g: the device node of GPU g is open */
    bool driver;    /* another node of the driver (nvidiactl, nvidia-uvm, ...) is open */
};

/* The device nodes to look for: node[g] the path of GPU g's ("/dev/nvidia0"), and
 * the prefix every node of the driver starts with ("/dev/nvidia"). */
struct procscan_nodes {
    char node[KAIROS_MAX_GPUS][64];
    unsigned n;
    char prefix[64];
};

struct procscan {
    struct procscan_opener *v;
    size_t n, cap;
    size_t processes, descriptors; /* looked at in the last scan */
    bool cut;                      /* the budget ran out: processes after it unseen */
};

/* Scans proc_root ("/proc") for openers of nodes, reading at most budget
 * descriptors. Replaces s's previous result. 0 or -errno (proc_root unreadable). */
int procscan_run(struct procscan *s, const char *proc_root, const struct procscan_nodes *nodes,
                 size_t budget);
void procscan_fini(struct procscan *s);

/* What /proc says of one process (for a pid NVML lists). */
void procscan_describe(const char *proc_root, uint32_t pid, struct procscan_proc *out);

/* The opener pid in s, or NULL. */
const struct procscan_opener *procscan_find(const struct procscan *s, uint32_t pid);

#endif /* KAIROS_DAEMON_PROCSCAN_H */
