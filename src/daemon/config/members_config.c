/* members_config.c - reading members: { users, groups, cgroups } from the
 * configuration (see members_config.h). */
#include "daemon/config/members_config.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number below UINT32_MAX, or a user (group) name resolved; 0 or -EINVAL. */
static int parse_id(struct ydoc *p, const yaml_node_t *n, bool group, uint32_t *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return ydoc_fail(p, n, "expected a %s name or number", group ? "group" : "user");
    const char *s = ydoc_text(n);
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s && !*end && !errno && s[0] != '-' && v < UINT32_MAX) {
        *out = (uint32_t)v;
        return 0;
    }
    char buf[4096];
    if (group) {
        struct group gr, *found = NULL;
        if (getgrnam_r(s, &gr, buf, sizeof buf, &found) || !found)
            return ydoc_fail(p, n, "group '%s' is neither a gid nor a known group name", s);
        *out = found->gr_gid;
    } else {
        struct passwd pw, *found = NULL;
        if (getpwnam_r(s, &pw, buf, sizeof buf, &found) || !found)
            return ydoc_fail(p, n, "user '%s' is neither a uid nor a known user name", s);
        *out = found->pw_uid;
    }
    return 0;
}

static int parse_ids(struct ydoc *p, const yaml_node_t *n, bool group, uint32_t *ids,
                     uint32_t *count)
{
    const char *what = group ? "groups" : "users";
    if (n->type != YAML_SEQUENCE_NODE)
        return ydoc_fail(p, n, "expected members %s as a list, e.g. [alice, 1001]", what);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(p->doc, *it);
        if (*count >= KAIROS_MEMBERS_MAX_IDS)
            return ydoc_fail(p, item, "at most %u %s per tenant", KAIROS_MEMBERS_MAX_IDS, what);
        if (parse_id(p, item, group, &ids[*count]))
            return -EINVAL;
        (*count)++;
    }
    return 0;
}

static int parse_cgroups(struct ydoc *p, const yaml_node_t *n, struct member_rules *r)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return ydoc_fail(p, n, "expected members cgroups as a list, e.g. [/slurm/job_*]");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(p->doc, *it);
        if (r->n_cgroups >= KAIROS_MEMBERS_MAX_CGROUPS)
            return ydoc_fail(p, item, "at most %u cgroups per tenant",
                             KAIROS_MEMBERS_MAX_CGROUPS);
        if (item->type != YAML_SCALAR_NODE || ydoc_text(item)[0] != '/' ||
            strlen(ydoc_text(item)) >= KAIROS_CGROUP_MAX)
            return ydoc_fail(p, item, "expected a cgroup path pattern beginning with '/' "
                             "(at most %d characters), e.g. /slurm/job_*", KAIROS_CGROUP_MAX - 1);
        snprintf(r->cgroups[r->n_cgroups++], KAIROS_CGROUP_MAX, "%s", ydoc_text(item));
    }
    return 0;
}

int members_config_parse(struct ydoc *p, const yaml_node_t *n, struct member_rules *r)
{
    memset(r, 0, sizeof *r);
    if (n->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, n, "expected members as a mapping { users: [...], groups: [...], "
                         "cgroups: [...] }");
    unsigned seen = 0;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        if (k->type != YAML_SCALAR_NODE)
            return ydoc_fail(p, k, "expected users, groups or cgroups");
        const char *key = ydoc_text(k);
        unsigned bit = !strcmp(key, "users") ? 1 : !strcmp(key, "groups") ? 2
                                                 : !strcmp(key, "cgroups") ? 4 : 0;
        if (!bit)
            return ydoc_fail(p, k, "unknown key '%s' in members (expected users, groups or "
                             "cgroups)", key);
        if (seen & bit)
            return ydoc_fail(p, k, "'%s' appears twice in members", key);
        seen |= bit;
        int rc = bit == 1   ? parse_ids(p, v, false, r->users, &r->n_users)
                 : bit == 2 ? parse_ids(p, v, true, r->groups, &r->n_groups)
                            : parse_cgroups(p, v, r);
        if (rc)
            return rc;
    }
    return 0;
}
