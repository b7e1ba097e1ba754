/* mps_server.h - which processes are NVIDIA MPS servers (nvidia-cuda-mps-server, started
 * by nvidia-cuda-mps-control), told from /proc in a way a tenant cannot fake by naming
 * its own program so.
 *
 * A process is one when the name of /proc/PID/exe is nvidia-cuda-mps-server (a
 * " (deleted)" suffix aside: the driver was upgraded under it) and both that file (the
 * executable itself, through the link) and the folder /proc/PID/exe names it in (seen
 * through /proc/PID/root) belong to the expected owner (MPS_SERVER_OWNER, root; the
 * tests pass their own uid) and are not writable by group or others. A copy a user
 * made, or a program of its own renamed, is not root's; the folder check turns away a
 * hard link a user made, under that name and in a folder of its own, to another
 * root-owned program (where fs.protected_hardlinks allows one). A process kairosd may
 * not look into (another user's while kairosd is not root, a container's whose files
 * another uid owns) is not one: the answer fails closed.
 *
 * What this cannot tell (docs/security.md): a server started by a user from the real
 * binary, as that user, is one; its owner may ptrace it.
 *
 * Thread rules: no shared state.
 */
#ifndef KAIROS_DAEMON_MPS_SERVER_H
#define KAIROS_DAEMON_MPS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPS_SERVER_EXE "nvidia-cuda-mps-server"
#define MPS_SERVER_OWNER 0u /* who owns the real binary and its folder: root */
#define MPS_SERVERS_MAX 64  /* distinct uids remembered by one scan */

/* The uids that run an MPS server, each once. */
struct mps_servers {
    uint32_t uid[MPS_SERVERS_MAX];
    size_t n;
    bool cut; /* servers of more uids ran: those after the first MPS_SERVERS_MAX unseen */
};

/* Whether pid (under proc_root, "/proc") is an MPS server whose binary and folder
 * owner owns; *uid (may be NULL) its real uid then (UINT32_MAX: unknown). */
bool mps_server_is(const char *proc_root, uint32_t pid, uint32_t owner, uint32_t *uid);

/* The uids of the MPS servers under proc_root: 0, or -errno (proc_root unreadable). */
int mps_server_scan(const char *proc_root, uint32_t owner, struct mps_servers *out);

/* Whether a server of s runs as uid, or as root (a multi-user server, -M). */
bool mps_server_serves(const struct mps_servers *s, uint32_t uid);

#endif /* KAIROS_DAEMON_MPS_SERVER_H */
