/* admissions_file.c - admissions kept across a restart (see admissions_file.h). */
#include "daemon/tenants/admissions_file.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tenant_name.h"

void admissions_file_path(const char *state_path, char *out, size_t cap)
{
    snprintf(out, cap, "%s.admissions", state_path);
}

int admissions_save(const struct admissions *a, const char *path)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < a->n; i++)
        json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:I}", "tenant",
                                              a->list[i].tenant, "pid",
                                              (json_int_t)a->list[i].pid, "start",
                                              (json_int_t)a->list[i].start, "by",
                                              (json_int_t)a->list[i].by_uid));
    json_t *root = list ? json_pack("{s:i, s:o}", "version", 1, "admissions", list) : NULL;
    if (!root)
        return -ENOMEM;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = json_dump_file(root, tmp, JSON_COMPACT) ? -EIO : 0;
    json_decref(root);
    if (!rc && (chmod(tmp, 0600) || rename(tmp, path)))
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

int admissions_load(struct admissions *a, const char *path)
{
    json_error_t jerr;
    struct stat st;
    if (stat(path, &st))
        return 0;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    json_t *list = json_object_get(root, "admissions");
    if (!json_is_array(list)) {
        json_decref(root);
        return -EINVAL;
    }
    int kept = 0;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *tenant = json_string_value(json_object_get(e, "tenant"));
        json_t *pid = json_object_get(e, "pid"), *start = json_object_get(e, "start");
        json_t *by = json_object_get(e, "by");
        if (!tenant || strlen(tenant) >= KAIROS_NAME_MAX || !tenant_name_valid(tenant) ||
            !json_is_integer(pid) || json_integer_value(pid) <= 1 ||
            json_integer_value(pid) > INT32_MAX || !json_is_integer(start) ||
            json_integer_value(start) < 0)
            continue;
        uint32_t by_uid = json_is_integer(by) && json_integer_value(by) >= 0 &&
                                  json_integer_value(by) < UINT32_MAX
                              ? (uint32_t)json_integer_value(by)
                              : 0;
        if (admissions_restore(a, tenant, (uint32_t)json_integer_value(pid),
                               (uint64_t)json_integer_value(start), by_uid) == 0)
            kept++;
    }
    json_decref(root);
    return kept;
}
