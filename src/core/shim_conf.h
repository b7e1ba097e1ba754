/* shim_conf.h - the node's settings for the shim: which kairosd it registers with
 * and what it does when that daemon cannot be reached. They are the node's choice,
 * never the tenant's, so they come from a file an administrator owns,
 * /etc/kairos/shim.conf, and not from the tenant process's environment:
 *
 *     # /etc/kairos/shim.conf
 *     socket: /run/kairos/kairosd.sock
 *     on_daemon_down: closed          # or open
 *     register: asked                 # or always
 *     unsupported_driver: refuse      # or passthrough
 *
 * register: asked (the default) registers a process with kairosd when it names a
 * tenant (KAIROS_TENANT); always registers every process that opens the GPU, one
 * naming none being placed by kairosd (admission, cgroups rule) or refused, so
 * that unsetting KAIROS_TENANT is no way around a quota (kairos containers, Slurm
 * nodes).
 *
 * unsupported_driver: what the shim does when the driver's version handshake names
 * a branch whose layouts Kairos does not know (core/driver_version.h): refuse (the
 * default) fails the handshake, so no GPU use; passthrough lets every driver call
 * through untouched, with no quota and a warning on stderr (docs/drivers.md).
 *
 * One "key: value" per line, '#' comments, blank lines; an unknown key, a
 * repeated key or a bad value makes the whole file unusable (the shim then fails
 * closed). No file: the defaults above.
 *
 * KAIROS_SHIM_CONF=PATH names another file (tests, developer builds); it is
 * honoured only when PATH is a regular file owned by root or by the owner of
 * libkairos.so itself and writable by no one else. Otherwise it is ignored (with
 * a note) and the node's file is read.
 *
 * Shared by the shim (which links only libc) and `kairos run`/`kairos cdi`, which
 * must know where a command's shim will register. Thread rules: no state.
 */
#ifndef KAIROS_CORE_SHIM_CONF_H
#define KAIROS_CORE_SHIM_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SHIM_CONF_NODE_PATH "/etc/kairos/shim.conf"
#define SHIM_CONF_MAX_BYTES 4096

struct shim_conf {
    char socket_path[108];  /* sun_path's size */
    bool fail_open;         /* on_daemon_down: open */
    bool register_always;   /* register: always */
    bool driver_passthrough; /* unsupported_driver: passthrough */
    char source[300];       /* the file read, or what stood for it */
    char note[400];         /* an override that was ignored, and why ("" if none) */
    char problem[400];      /* the settings could not be used: fail closed ("" if none) */
};

/* Parses text (len bytes) over the defaults. 0, or -1 with c->problem set (the
 * line and what to write instead); c->socket_path and c->fail_open then stay at
 * the defaults (closed). */
int shim_conf_parse(struct shim_conf *c, const char *text, size_t len);

/* The settings in force: override (KAIROS_SHIM_CONF, may be NULL) when it is
 * trusted (see above; lib_owner is the owner of libkairos.so), else the node's
 * file, else the defaults. Never fails: a problem is in c->problem. */
void shim_conf_load(struct shim_conf *c, const char *override, uid_t lib_owner);

#endif /* KAIROS_CORE_SHIM_CONF_H */
