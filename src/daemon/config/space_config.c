/* space_config.c - reading the space block of the configuration (see space_config.h). */
#include "daemon/config/space_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tenant_name.h"

void space_config_defaults(struct space_config *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->mps_control, sizeof s->mps_control, "%s", SPACE_DEFAULT_MPS_CONTROL);
    s->client_check_ms = SPACE_DEFAULT_CLIENT_CHECK_MS;
    s->end_strangers = true;
    s->fault_recovery_ms = SPACE_DEFAULT_FAULT_RECOVERY_MS;
}

static int parse_mps_control(struct ydoc *p, const yaml_node_t *v, struct space_config *s)
{
    if (v->type != YAML_SCALAR_NODE || ydoc_text(v)[0] != '/')
        return ydoc_fail(p, v, "mps_control: expected the absolute path of "
                         "nvidia-cuda-mps-control, e.g. /usr/bin/nvidia-cuda-mps-control");
    if (strlen(ydoc_text(v)) >= sizeof s->mps_control)
        return ydoc_fail(p, v, "mps_control: the path is too long");
    snprintf(s->mps_control, sizeof s->mps_control, "%s", ydoc_text(v));
    return 0;
}

static int parse_domain(struct ydoc *p, const yaml_node_t *k, const yaml_node_t *v,
                        struct space_config *s)
{
    if (k->type != YAML_SCALAR_NODE || !tenant_name_valid(ydoc_text(k)))
        return ydoc_fail(p, k, "a fault domain's name must be 1-63 characters of A-Z a-z 0-9 "
                         ". _ - (not starting with . or -)");
    if (s->n_domains >= SPACE_MAX_DOMAINS)
        return ydoc_fail(p, k, "at most %d fault domains", SPACE_MAX_DOMAINS);
    struct space_domain_config *d = &s->domains[s->n_domains++];
    snprintf(d->name, sizeof d->name, "%s", ydoc_text(k));
    if (v->type == YAML_SCALAR_NODE && !ydoc_text(v)[0])
        return 0; /* "inference-a:" with nothing: the defaults */
    if (v->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, v, "fault domain '%s': expected { shared_uids: true|false }",
                         d->name);
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *dk = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *dv = yaml_document_get_node(p->doc, pr->value);
        if (dk->type != YAML_SCALAR_NODE || strcmp(ydoc_text(dk), "shared_uids"))
            return ydoc_fail(p, dk, "unknown key in fault domain '%s' (expected shared_uids)",
                             d->name);
        if (dv->type != YAML_SCALAR_NODE ||
            (strcmp(ydoc_text(dv), "true") && strcmp(ydoc_text(dv), "false")))
            return ydoc_fail(p, dv, "shared_uids: expected true (the domain's users share one "
                             "multi-user MPS server and its fate) or false (one server per "
                             "user, the default)");
        d->shared_uids = !strcmp(ydoc_text(dv), "true");
    }
    return 0;
}

static int parse_domains(struct ydoc *p, const yaml_node_t *n, struct space_config *s)
{
    if (n->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, n, "domains: expected a mapping of fault domain names, e.g. "
                         "{ inference-a: { shared_uids: false } }");
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        int rc = parse_domain(p, yaml_document_get_node(p->doc, pr->key),
                              yaml_document_get_node(p->doc, pr->value), s);
        if (rc)
            return rc;
    }
    return 0;
}

/* Milliseconds from 0 to 3600000 (an hour), read into *ms; false when v is none. */
static bool read_ms(const yaml_node_t *v, unsigned *ms)
{
    char *end = NULL;
    unsigned long n = v->type == YAML_SCALAR_NODE ? strtoul(ydoc_text(v), &end, 10) : 0;
    if (!end || end == ydoc_text(v) || *end || ydoc_text(v)[0] == '-' || n > 3600000)
        return false;
    *ms = (unsigned)n;
    return true;
}

/* client_check_ms: N (0: never; else at least SPACE_MIN_CLIENT_CHECK_MS). */
static int parse_client_check(struct ydoc *p, const yaml_node_t *v, struct space_config *s)
{
    unsigned ms;
    if (!read_ms(v, &ms) || (ms && ms < SPACE_MIN_CLIENT_CHECK_MS))
        return ydoc_fail(p, v, "client_check_ms: expected 0 (never) or milliseconds from %d "
                         "to 3600000", SPACE_MIN_CLIENT_CHECK_MS);
    s->client_check_ms = ms;
    return 0;
}

/* fault_recovery_ms: N (0: never). */
static int parse_fault_recovery(struct ydoc *p, const yaml_node_t *v, struct space_config *s)
{
    if (!read_ms(v, &s->fault_recovery_ms))
        return ydoc_fail(p, v, "fault_recovery_ms: expected 0 (a fault's clients are never "
                         "ended) or milliseconds up to 3600000 after which the clients a "
                         "fault left without their work have their MPS clients ended");
    return 0;
}

/* strangers: end (their MPS clients ended) or report (logged only). */
static int parse_strangers(struct ydoc *p, const yaml_node_t *v, struct space_config *s)
{
    const char *t = v->type == YAML_SCALAR_NODE ? ydoc_text(v) : "";
    if (strcmp(t, "end") && strcmp(t, "report"))
        return ydoc_fail(p, v, "strangers: expected end (a client of a domain's MPS server "
                         "that is no member of the domain has its MPS client ended) or report "
                         "(it is only logged)");
    s->end_strangers = !strcmp(t, "end");
    return 0;
}

int space_config_parse(struct ydoc *p, const yaml_node_t *n, struct space_config *s)
{
    if (n->type != YAML_MAPPING_NODE)
        return ydoc_fail(p, n, "space: expected a mapping { mps_control: PATH, domains: "
                         "{...} }");
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        int rc;
        if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "mps_control"))
            rc = parse_mps_control(p, v, s);
        else if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "domains"))
            rc = parse_domains(p, v, s);
        else if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "client_check_ms"))
            rc = parse_client_check(p, v, s);
        else if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "strangers"))
            rc = parse_strangers(p, v, s);
        else if (k->type == YAML_SCALAR_NODE && !strcmp(ydoc_text(k), "fault_recovery_ms"))
            rc = parse_fault_recovery(p, v, s);
        else
            rc = ydoc_fail(p, k, "unknown key in space (expected mps_control, domains, "
                           "client_check_ms, strangers or fault_recovery_ms)");
        if (rc)
            return rc;
    }
    return 0;
}

const struct space_domain_config *space_config_domain(const struct space_config *s,
                                                      const char *name)
{
    for (size_t i = 0; i < s->n_domains; i++)
        if (!strcmp(s->domains[i].name, name))
            return &s->domains[i];
    return NULL;
}
