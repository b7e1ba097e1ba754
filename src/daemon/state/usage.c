/* usage.c - the tenants' chargeback counters: the book of them by tenant id, adding to
 * them, publishing them at a save, and their saved form, read part by part so that one
 * bad field loses only itself (see usage.h). */
#include "daemon/state/usage.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_SINCE_MIN 946684800.0 /* 2000-01-01: an earlier "since" is not believed */
#define USAGE_SINCE_AHEAD 86400.0   /* nor one more than a day ahead of the clock */

void usage_begin(struct usage *u, double now)
{
    if (u->since <= 0)
        u->since = now;
}

void usage_add_gpu(struct usage *u, unsigned gpu, uint64_t us)
{
    if (gpu >= KAIROS_MAX_GPUS)
        return;
    u->gpu_us[gpu] = u->gpu_us[gpu] > UINT64_MAX - us ? UINT64_MAX : u->gpu_us[gpu] + us;
}

void usage_add_memory(struct usage *u, const uint64_t *held, unsigned n_gpus, double dt_s)
{
    if (!(dt_s > 0) || !isfinite(dt_s))
        return;
    for (unsigned g = 0; g < n_gpus && g < KAIROS_MAX_GPUS; g++)
        u->mem_byte_s[g] += (double)held[g] * dt_s;
}

void usage_publish(struct usage *u)
{
    memcpy(u->shown_gpu_us, u->gpu_us, sizeof u->shown_gpu_us);
    memcpy(u->shown_mem_byte_s, u->mem_byte_s, sizeof u->shown_mem_byte_s);
}

void usage_book_init(struct usage_book *b)
{
    id_book_init(&b->ids, sizeof(struct usage_entry), SIZE_MAX);
}

void usage_book_fini(struct usage_book *b)
{
    id_book_fini(&b->ids);
}

const struct usage *usage_book_find(const struct usage_book *b, uint32_t tenant)
{
    const struct usage_entry *e = id_book_find(&b->ids, tenant);
    return e ? &e->u : NULL;
}

struct usage *usage_book_get(struct usage_book *b, uint32_t tenant)
{
    int rc = 0;
    struct usage_entry *e = id_book_get(&b->ids, tenant, &rc);
    return e ? &e->u : NULL;
}

int usage_book_keep(struct usage_book *b, const uint32_t *live, size_t n)
{
    return id_book_keep(&b->ids, live, n);
}

void usage_book_publish(struct usage_book *b)
{
    for (size_t i = 0; i < b->ids.n; i++)
        usage_publish(&((struct usage_entry *)id_book_at(&b->ids, i))->u);
}

json_t *usage_json(const struct usage *u, const uint64_t *refusals, unsigned n_gpus)
{
    json_t *gpus = json_object();
    json_t *root = json_object();
    if (!gpus || !root)
        goto fail;
    for (unsigned g = 0; g < n_gpus && g < KAIROS_MAX_GPUS; g++) {
        if (!u->gpu_us[g] && !u->mem_byte_s[g] && !refusals[g])
            continue;
        char key[16];
        snprintf(key, sizeof key, "%u", g);
        /* json_int_t is signed: a counter beyond it is saved at its largest */
        json_int_t us = u->gpu_us[g] > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)u->gpu_us[g];
        json_int_t ref = refusals[g] > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)refusals[g];
        json_t *one = json_pack("{s:I, s:f, s:I}", "gpu_us", us, "memory_byte_seconds",
                                u->mem_byte_s[g], "refusals", ref);
        if (!one || json_object_set_new(gpus, key, one))
            goto fail;
    }
    if (json_object_set_new(root, "since", json_real(u->since)) ||
        json_object_set_new(root, "gpus", gpus))
        goto fail_root;
    return root;
fail:
    json_decref(gpus);
fail_root:
    json_decref(root);
    return NULL;
}

/* The first problem found is the one reported. */
static int refuse(char *why, size_t why_len, int *rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(char *why, size_t why_len, int *rc, const char *fmt, ...)
{
    if (!*rc) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    *rc = -EINVAL;
    return *rc;
}

/* A whole number >= 0 into *out; false when v is not one. */
static bool whole(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* One GPU's entry: each counter taken when it is well formed. */
static void parse_gpu(json_t *one, const char *key, unsigned g, struct usage *u,
                      uint64_t *refusals, char *why, size_t why_len, int *rc)
{
    if (!json_is_object(one)) {
        refuse(why, why_len, rc, "GPU \"%.16s\" is not an object", key);
        return;
    }
    json_t *us = json_object_get(one, "gpu_us"), *mem = json_object_get(one,
                                                                         "memory_byte_seconds");
    json_t *ref = json_object_get(one, "refusals");
    uint64_t n;
    if (us && whole(us, &n))
        u->gpu_us[g] = u->shown_gpu_us[g] = n;
    else if (us)
        refuse(why, why_len, rc, "GPU %u: \"gpu_us\" is not a whole number >= 0", g);
    double d = json_is_number(mem) ? json_number_value(mem) : -1;
    if (mem && isfinite(d) && d >= 0)
        u->mem_byte_s[g] = u->shown_mem_byte_s[g] = d;
    else if (mem)
        refuse(why, why_len, rc, "GPU %u: \"memory_byte_seconds\" is not a number >= 0", g);
    if (ref && whole(ref, &n))
        refusals[g] = n;
    else if (ref)
        refuse(why, why_len, rc, "GPU %u: \"refusals\" is not a whole number >= 0", g);
}

int usage_parse(json_t *j, unsigned n_gpus, double now, struct usage *u, uint64_t *refusals,
                char *why, size_t why_len)
{
    int rc = 0;
    if (!json_is_object(j))
        return refuse(why, why_len, &rc, "not an object {\"since\": TIME, \"gpus\": {...}}");
    json_t *since = json_object_get(j, "since");
    double s = json_is_number(since) ? json_number_value(since) : -1;
    if (isfinite(s) && s >= USAGE_SINCE_MIN && s <= now + USAGE_SINCE_AHEAD)
        u->since = s;
    else {
        u->since = now;
        refuse(why, why_len, &rc, "\"since\" is not a time (seconds since the epoch); now "
               "instead");
    }
    json_t *gpus = json_object_get(j, "gpus");
    if (!json_is_object(gpus))
        return refuse(why, why_len, &rc, "\"gpus\" is not an object of GPU index to counters");
    const char *key;
    json_t *one;
    json_object_foreach(gpus, key, one) {
        char *end;
        unsigned long g = strtoul(key, &end, 10);
        if (!*key || *end || key[0] == '-' || g >= n_gpus || g >= KAIROS_MAX_GPUS) {
            refuse(why, why_len, &rc, "\"%.16s\" is not a GPU of this node", key);
            continue;
        }
        parse_gpu(one, key, (unsigned)g, u, refusals, why, why_len, &rc);
    }
    return rc;
}
