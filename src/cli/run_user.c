/* run_user.c - the user `kairos run` runs its command as (see run_user.h). */
#include "cli/run_user.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A whole number below 2^32 - 1 in text; false when it is not one. */
static bool parse_id(const char *text, unsigned long *out)
{
    if (!text || !*text || text[0] == '-')
        return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (*end || errno || v >= 0xffffffffUL)
        return false;
    *out = v;
    return true;
}

static void take_passwd(struct run_user *u, const struct passwd *pw)
{
    snprintf(u->name, sizeof u->name, "%s", pw->pw_name);
    snprintf(u->home, sizeof u->home, "%s", pw->pw_dir ? pw->pw_dir : "");
}

static int by_option(const char *user_opt, struct run_user *u, char *err, size_t err_len)
{
    if (geteuid() != 0) {
        snprintf(err, err_len, "--user %s: only root runs a command as another user (sudo "
                 "kairos run --user %s ...)", user_opt, user_opt);
        return -1;
    }
    struct passwd pw, *found = NULL;
    char buf[4096];
    unsigned long id;
    if (parse_id(user_opt, &id))
        getpwuid_r((uid_t)id, &pw, buf, sizeof buf, &found);
    else
        getpwnam_r(user_opt, &pw, buf, sizeof buf, &found);
    if (!found) {
        snprintf(err, err_len, "--user %s: no such user", user_opt);
        return -1;
    }
    u->change = true;
    u->uid = found->pw_uid;
    u->gid = found->pw_gid;
    u->why = "--user";
    take_passwd(u, found);
    return 0;
}

int run_user_resolve(const char *user_opt, struct run_user *u, char *err, size_t err_len)
{
    memset(u, 0, sizeof *u);
    if (user_opt)
        return by_option(user_opt, u, err, err_len);
    unsigned long uid, gid;
    if (geteuid() != 0 || !parse_id(getenv("SUDO_UID"), &uid) || uid == 0)
        return 0; /* not under sudo, or sudo from root: stay as we are */
    struct passwd pw, *found = NULL;
    char buf[4096];
    getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &found);
    u->change = true;
    u->uid = (uid_t)uid;
    u->gid = parse_id(getenv("SUDO_GID"), &gid) ? (gid_t)gid
             : found                            ? found->pw_gid
                                                : (gid_t)uid;
    u->why = "sudo";
    if (found)
        take_passwd(u, found);
    return 0;
}

int run_user_switch(const struct run_user *u, char *err, size_t err_len)
{
    if (!u->change || u->uid == 0)
        return 0;
    int rc = u->name[0] ? initgroups(u->name, u->gid) : setgroups(1, &u->gid);
    if (rc || setresgid(u->gid, u->gid, u->gid) || setresuid(u->uid, u->uid, u->uid)) {
        snprintf(err, err_len, "cannot become uid %u (gid %u): %s", (unsigned)u->uid,
                 (unsigned)u->gid, strerror(errno));
        return -1;
    }
    if (setuid(0) == 0) { /* must be impossible now */
        snprintf(err, err_len, "could still become root after switching to uid %u; refusing "
                 "to run the command", (unsigned)u->uid);
        return -1;
    }
    if (u->name[0]) {
        setenv("USER", u->name, 1);
        setenv("LOGNAME", u->name, 1);
    }
    if (u->home[0])
        setenv("HOME", u->home, 1);
    return 0;
}
