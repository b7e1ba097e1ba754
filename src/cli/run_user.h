/* run_user.h - who `kairos run` runs its command as. Root is asked for by name
 * only: `sudo kairos run ... -- CMD` runs CMD as the user who ran sudo
 * (SUDO_UID, SUDO_GID), `--user NAME` (root only) as NAME, and CMD runs as root
 * only when root ran kairos without sudo or asked --user root. The switch happens
 * after kairosd admitted this process (its pid stays CMD's), and cannot be undone
 * by CMD (the saved ids change too).
 *
 * Thread rules: the CLI's one thread, before exec.
 */
#ifndef KAIROS_CLI_RUN_USER_H
#define KAIROS_CLI_RUN_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct run_user {
    bool change;       /* false: run as this process is */
    uid_t uid;
    gid_t gid;
    char name[64];     /* "" when the uid has no passwd entry */
    char home[256];
    const char *why;   /* "--user", "sudo" */
};

/* Decides from --user (may be NULL) and the environment. 0, or -1 with err set. */
int run_user_resolve(const char *user_opt, struct run_user *u, char *err, size_t err_len);

/* Becomes u (groups, gid, uid; USER, LOGNAME, HOME); 0, or -1 with err set. */
int run_user_switch(const struct run_user *u, char *err, size_t err_len);

#endif /* KAIROS_CLI_RUN_USER_H */
