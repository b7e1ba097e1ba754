/* state.c - the state file of run-time tenants: atomic JSON writes, and reads that
 * set a corrupt file aside instead of failing. See state.h. */
#include "daemon/state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATE_VERSION 1

static json_t *state_json(const struct ledger *l)
{
    json_t *root = json_object(), *list = json_array();
    if (!root || !list)
        goto fail;
    json_object_set_new(root, "version", json_integer(STATE_VERSION));
    for (size_t i = 0; i < l->n_tenants; i++) {
        const struct ledger_tenant *t = l->tenants[i];
        if (t->flags & LEDGER_TENANT_CONFIG)
            continue;
        json_t *quota = json_object(), *jt = json_object();
        if (!quota || !jt) {
            json_decref(quota);
            json_decref(jt);
            goto fail;
        }
        for (unsigned g = 0; g < l->n_gpus; g++) {
            char key[16];
            snprintf(key, sizeof key, "%u", g);
            json_object_set_new(quota, key, json_integer((json_int_t)t->quota[g]));
        }
        json_object_set_new(jt, "name", json_string(t->name));
        json_object_set_new(jt, "ephemeral", json_boolean(t->flags & LEDGER_TENANT_EPHEMERAL));
        json_object_set_new(jt, "quota", quota);
        if (t->owner_pid)
            json_object_set_new(jt, "owner_pid", json_integer(t->owner_pid));
        json_array_append_new(list, jt);
    }
    json_object_set_new(root, "tenants", list);
    return root;
fail:
    json_decref(list);
    json_decref(root);
    return NULL;
}

int state_save(const char *path, const struct ledger *l, char *err, size_t err_len)
{
    int rc = 0, fd = -1;
    char tmp[PATH_MAX], dir[PATH_MAX];
    char *text = NULL;
    json_t *root = state_json(l);
    if (!root) {
        rc = -ENOMEM;
        snprintf(err, err_len, "out of memory");
        goto out;
    }
    text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text) {
        rc = -ENOMEM;
        snprintf(err, err_len, "out of memory");
        goto out;
    }
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        rc = -ENAMETOOLONG;
        snprintf(err, err_len, "%s: path too long", path);
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    size_t len = strlen(text), done = 0;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
            goto out;
        }
        done += (size_t)n;
    }
    if (write(fd, "\n", 1) != 1 || fsync(fd)) {
        rc = -errno;
        snprintf(err, err_len, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, path)) {
        rc = -errno;
        snprintf(err, err_len, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    snprintf(dir, sizeof dir, "%s", path);
    fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        fsync(fd); /* the rename itself is durable; failure here is not worth a refusal */
out:
    if (fd >= 0)
        close(fd);
    if (rc)
        unlink(tmp);
    free(text);
    json_decref(root);
    return rc;
}

static int set_aside(const char *path, char *out, size_t out_len)
{
    snprintf(out, out_len, "%s.corrupt-%lld", path, (long long)time(NULL));
    return rename(path, out) ? -errno : 0;
}

/* Validates the whole document first, so a bad file adds nothing. */
static int state_check(json_t *root, unsigned n_gpus, char *err, size_t err_len)
{
    if (!json_is_object(root)) {
        snprintf(err, err_len, "the top level is not an object");
        return -EINVAL;
    }
    json_t *v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != STATE_VERSION) {
        snprintf(err, err_len, "\"version\" is missing or not %d", STATE_VERSION);
        return -EINVAL;
    }
    json_t *list = json_object_get(root, "tenants");
    if (!json_is_array(list)) {
        snprintf(err, err_len, "\"tenants\" is missing or not a list");
        return -EINVAL;
    }
    size_t i;
    json_t *jt;
    json_array_foreach(list, i, jt) {
        json_t *name = json_object_get(jt, "name"), *quota = json_object_get(jt, "quota");
        json_t *eph = json_object_get(jt, "ephemeral");
        if (!json_is_object(jt) || !json_is_string(name) ||
            !ledger_name_valid(json_string_value(name)) || !json_is_object(quota) ||
            (eph && !json_is_boolean(eph))) {
            snprintf(err, err_len, "tenant %zu: needs a valid \"name\" and a \"quota\" object", i);
            return -EINVAL;
        }
        const char *key;
        json_t *q;
        json_object_foreach(quota, key, q) {
            char *end;
            unsigned long g = strtoul(key, &end, 10);
            if (!*key || *end || g >= KAIROS_MAX_GPUS || !json_is_integer(q) ||
                json_integer_value(q) < 0 ||
                (uint64_t)json_integer_value(q) > KAIROS_BYTES_MAX) {
                snprintf(err, err_len, "tenant '%s': quota \"%s\" is not a GPU index with a byte "
                         "count", json_string_value(name), key);
                return -EINVAL;
            }
            if (g >= n_gpus && json_integer_value(q) > 0) {
                snprintf(err, err_len, "tenant '%s': GPU %lu does not exist on this node",
                         json_string_value(name), g);
                return -EINVAL;
            }
        }
    }
    return 0;
}

int state_load(const char *path, struct ledger *l, char *err, size_t err_len, char *aside,
               size_t aside_len)
{
    json_error_t jerr;
    int rc = 0, added = 0;
    aside[0] = 0;
    struct stat st;
    if (stat(path, &st)) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        return -errno;
    }
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    char why[200];
    if (!root) {
        snprintf(why, sizeof why, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
        rc = -EINVAL;
    } else {
        rc = state_check(root, l->n_gpus, why, sizeof why);
    }
    if (rc) {
        int r2 = set_aside(path, aside, aside_len);
        snprintf(err, err_len, "state file %s is corrupt (%s); %s%s", path, why,
                 r2 ? "could not set it aside: " : "set aside as ", r2 ? strerror(-r2) : aside);
        json_decref(root);
        return -EINVAL;
    }
    size_t i;
    json_t *jt;
    json_array_foreach(json_object_get(root, "tenants"), i, jt) {
        const char *name = json_string_value(json_object_get(jt, "name"));
        if (ledger_tenant_find(l, name))
            continue;
        uint64_t quota[KAIROS_MAX_GPUS] = {0};
        const char *key;
        json_t *q;
        json_object_foreach(json_object_get(jt, "quota"), key, q) quota[strtoul(key, NULL, 10)] =
            (uint64_t)json_integer_value(q);
        unsigned flags = json_is_true(json_object_get(jt, "ephemeral")) ? LEDGER_TENANT_EPHEMERAL
                                                                        : 0;
        struct ledger_tenant *t;
        if (ledger_tenant_add(l, name, quota, flags, &t) == 0) {
            json_t *owner = json_object_get(jt, "owner_pid");
            if (json_is_integer(owner) && json_integer_value(owner) > 0 &&
                json_integer_value(owner) <= INT32_MAX)
                t->owner_pid = (uint32_t)json_integer_value(owner); /* server checks if alive */
            added++;
        }
    }
    json_decref(root);
    return added;
}
