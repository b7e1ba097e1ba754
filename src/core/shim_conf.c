/* shim_conf.c - reading the node's shim settings (see shim_conf.h). Only libc:
 * the shim carries this code. */
#include "core/shim_conf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kairos/proto.h"

#define SHIM_CONF_KEYS "socket, on_daemon_down, register, unsupported_driver"

static void set_defaults(struct shim_conf *c)
{
    snprintf(c->socket_path, sizeof c->socket_path, "%s", KAIROS_DEFAULT_SOCKET);
    c->fail_open = false;
    c->register_always = false;
    c->driver_passthrough = false;
}

static void trim(char **start, char **end)
{
    while (*start < *end && isspace((unsigned char)**start))
        (*start)++;
    while (*end > *start && isspace((unsigned char)(*end)[-1]))
        (*end)--;
}

static int bad_line(struct shim_conf *c, unsigned line, const char *why)
{
    snprintf(c->problem, sizeof c->problem, "%s line %u: %s", c->source, line, why);
    set_defaults(c);
    return -1;
}

/* One "key: value" line into c; 0 or -1 after bad_line. seen: keys already set. */
static int parse_line(struct shim_conf *c, unsigned line, char *p, char *end, unsigned *seen)
{
    char *hash = memchr(p, '#', (size_t)(end - p));
    if (hash)
        end = hash;
    trim(&p, &end);
    if (p == end)
        return 0;
    char *colon = memchr(p, ':', (size_t)(end - p));
    if (!colon)
        return bad_line(c, line, "expected 'key: value' (keys: " SHIM_CONF_KEYS ")");
    char *key = p, *key_end = colon, *val = colon + 1, *val_end = end;
    trim(&key, &key_end);
    trim(&val, &val_end);
    size_t klen = (size_t)(key_end - key), vlen = (size_t)(val_end - val);
    unsigned bit;
    if (klen == 6 && !memcmp(key, "socket", 6)) {
        bit = 1;
        if (vlen == 0 || val[0] != '/' || vlen >= sizeof c->socket_path || memchr(val, 0, vlen))
            return bad_line(c, line, "socket: give an absolute path shorter than 108 bytes");
        memcpy(c->socket_path, val, vlen);
        c->socket_path[vlen] = 0;
    } else if (klen == 14 && !memcmp(key, "on_daemon_down", 14)) {
        bit = 2;
        if (vlen == 4 && !memcmp(val, "open", 4))
            c->fail_open = true;
        else if (vlen == 6 && !memcmp(val, "closed", 6))
            c->fail_open = false;
        else
            return bad_line(c, line, "on_daemon_down: write closed or open");
    } else if (klen == 8 && !memcmp(key, "register", 8)) {
        bit = 4;
        if (vlen == 6 && !memcmp(val, "always", 6))
            c->register_always = true;
        else if (vlen == 5 && !memcmp(val, "asked", 5))
            c->register_always = false;
        else
            return bad_line(c, line, "register: write asked or always");
    } else if (klen == 18 && !memcmp(key, "unsupported_driver", 18)) {
        bit = 8;
        if (vlen == 11 && !memcmp(val, "passthrough", 11))
            c->driver_passthrough = true;
        else if (vlen == 6 && !memcmp(val, "refuse", 6))
            c->driver_passthrough = false;
        else
            return bad_line(c, line, "unsupported_driver: write refuse or passthrough");
    } else {
        return bad_line(c, line, "unknown key (keys: " SHIM_CONF_KEYS ")");
    }
    if (*seen & bit)
        return bad_line(c, line, "key given twice");
    *seen |= bit;
    return 0;
}

int shim_conf_parse(struct shim_conf *c, const char *text, size_t len)
{
    set_defaults(c);
    c->problem[0] = 0;
    char buf[SHIM_CONF_MAX_BYTES + 1];
    if (len > SHIM_CONF_MAX_BYTES)
        return bad_line(c, 0, "larger than 4096 bytes");
    memcpy(buf, text, len);
    buf[len] = 0;
    unsigned seen = 0, line = 1;
    for (char *p = buf; p < buf + len; line++) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        char *end = nl ? nl : buf + len;
        if (parse_line(c, line, p, end, &seen))
            return -1;
        p = end + 1;
    }
    return 0;
}

/* Reads the open file fd (at most SHIM_CONF_MAX_BYTES + 1 bytes). -errno or length. */
static ssize_t read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    return (ssize_t)n;
}

/* Why the open override fd may not be trusted, or NULL when it may. */
static const char *untrusted(int fd, uid_t lib_owner, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(fd, &st))
        return "cannot be examined";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (st.st_uid != 0 && st.st_uid != lib_owner) {
        snprintf(why, why_len, "owned by uid %u, neither root nor the owner of libkairos.so "
                 "(uid %u)", (unsigned)st.st_uid, (unsigned)lib_owner);
        return why;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return "writable by its group or by others (chmod go-w)";
    return NULL;
}

/* Parses the open file fd as c->source. */
static void parse_fd(struct shim_conf *c, int fd)
{
    char buf[SHIM_CONF_MAX_BYTES + 1];
    ssize_t n = read_all(fd, buf, sizeof buf);
    if (n < 0) {
        snprintf(c->problem, sizeof c->problem, "cannot read %s: %s", c->source,
                 strerror((int)-n));
        set_defaults(c);
        return;
    }
    shim_conf_parse(c, buf, (size_t)n);
}

/* The override when trusted: true when it was read (well or not). */
static bool load_override(struct shim_conf *c, const char *path, uid_t lib_owner)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    char why[160];
    const char *reason = fd < 0 ? strerror(errno) : untrusted(fd, lib_owner, why, sizeof why);
    if (reason) {
        snprintf(c->note, sizeof c->note, "KAIROS_SHIM_CONF=%.160s ignored (%.160s); using %s",
                 path, reason, SHIM_CONF_NODE_PATH);
        if (fd >= 0)
            close(fd);
        return false;
    }
    snprintf(c->source, sizeof c->source, "%s", path);
    parse_fd(c, fd);
    close(fd);
    return true;
}

void shim_conf_load(struct shim_conf *c, const char *override, uid_t lib_owner)
{
    memset(c, 0, sizeof *c);
    set_defaults(c);
    if (override && *override && load_override(c, override, lib_owner))
        return;
    snprintf(c->source, sizeof c->source, "%s", SHIM_CONF_NODE_PATH);
    int fd = open(SHIM_CONF_NODE_PATH, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) {
        snprintf(c->source, sizeof c->source, "defaults (no %s)", SHIM_CONF_NODE_PATH);
        return;
    }
    if (fd < 0) {
        snprintf(c->problem, sizeof c->problem, "cannot open %s: %s", SHIM_CONF_NODE_PATH,
                 strerror(errno));
        return;
    }
    parse_fd(c, fd);
    close(fd);
}
