/* membership.c - which tenant a peer joins, admissions and members rules at run
 * time (see membership.h). */
#include "daemon/tenants/membership.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/tenants/admissions_file.h"
#include "daemon/base/log.h"
#include "daemon/tenants/registry.h"

void membership_init(struct membership *m, struct tenants *ts, const struct config *cfg)
{
    memset(m, 0, sizeof *m);
    m->ts = ts;
    m->cfg = cfg;
    admissions_init(&m->admissions, NULL);
    admissions_file_path(cfg->state, m->path, sizeof m->path);
    int kept = admissions_load(&m->admissions, m->path);
    if (kept < 0)
        log_warn("%s is corrupt; admissions made before the restart are lost (their "
                 "processes are refused until admitted again)", m->path);
    else if (kept)
        log_info("%d admission(s) of live processes kept from before the restart", kept);
}

void membership_fini(struct membership *m)
{
    admissions_fini(&m->admissions);
}

/* The admissions on disk for the next kairosd. */
static void save(struct membership *m)
{
    int rc = admissions_save(&m->admissions, m->path);
    if (rc)
        log_warn("cannot write %s (%s): processes admitted now will be refused if kairosd "
                 "restarts before they exit", m->path, strerror(-rc));
}

/* Whether p may join t; when not, the refusal is logged and in msg. */
static bool may_join(struct membership *m, const struct peer_cred *p,
                     const struct ledger_tenant *t, char *msg, size_t msg_len)
{
    struct member_peer peer = {.pid = p->pid, .uid = p->uid, .gid = p->gid};
    const char *config = m->cfg->path[0] ? m->cfg->path : "the configuration";
    bool admin = members_is_admin(m->cfg, p->uid, p->cgroup);
    const struct member_rules *rules = &tenants_settings_of(m->ts, t)->members;
    const char *reason = members_may_join(&m->admissions, rules, t->name,
                                          t->flags & LEDGER_TENANT_CONFIG, admin, &peer, config,
                                          msg, msg_len);
    if (reason) {
        log_debug("tenant %s: pid %u (uid %u) may join: %s", t->name, p->pid, p->uid, reason);
        return true;
    }
    log_about_warn(t->name, p->pid, -1, "pid %u (uid %u): refused: %s", p->pid, p->uid, msg);
    return false;
}

/* The tenant an admission (of the peer or an ancestor) or a cgroups rule binds the
 * peer to, when it asked for another (members.h); NULL when none or the same. */
static struct ledger_tenant *bound_tenant(struct membership *m, const struct peer_cred *p,
                                          const char *asked)
{
    char name[KAIROS_NAME_MAX];
    const struct ledger *l = &m->ts->ledger;
    uint32_t via = admissions_tenant_of(&m->admissions, p->pid, name);
    if (via) {
        struct ledger_tenant *t = strcmp(name, asked) ? ledger_tenant_find(l, name) : NULL;
        if (t)
            log_info("pid %u (uid %u) asked for tenant %s; it is a member of %s, to which pid "
                     "%u was admitted", p->pid, p->uid, asked[0] ? asked : "(none)", name, via);
        return t;
    }
    struct member_peer peer = {.pid = p->pid, .uid = p->uid, .gid = p->gid};
    members_peer_read(&peer, NULL);
    struct ledger_tenant *best = NULL;
    size_t rank = 0;
    for (size_t i = 0; peer.cgroup[0] && i < l->n_tenants; i++) {
        size_t r = members_cgroup_rank(&tenants_settings_of(m->ts, l->tenants[i])->members,
                                       peer.cgroup);
        if (r > rank) {
            rank = r;
            best = l->tenants[i];
        }
    }
    if (!best || !strcmp(best->name, asked))
        return NULL;
    log_info("pid %u (uid %u) asked for tenant %s; its cgroup %s is tenant %s's (members "
             "cgroups)", p->pid, p->uid, asked[0] ? asked : "(none)", peer.cgroup, best->name);
    return best;
}

struct ledger_tenant *membership_hello(struct membership *m, const struct peer_cred *p,
                                       const char *asked, uint32_t *code, char *msg,
                                       size_t msg_len)
{
    struct ledger_tenant *t = bound_tenant(m, p, asked);
    if (!t && !asked[0]) {
        snprintf(msg, msg_len,
                 "this process belongs to no tenant: nothing admitted it (kairos run, kairos "
                 "tenant admit) and no tenant's members cgroups match its cgroup; run it with "
                 "kairos run --tenant NAME or set KAIROS_TENANT=NAME");
        log_warn("pid %u (uid %u): refused: named no tenant and none is its by admission or "
                 "cgroup", p->pid, p->uid);
        *code = KAIROS_ERR_NO_TENANT;
        return NULL;
    }
    if (!t)
        t = ledger_tenant_find(&m->ts->ledger, asked);
    if (!t) {
        snprintf(msg, msg_len,
                 "no tenant '%s' on this node; an administrator creates it with 'kairos run "
                 "--tenant %s --mem SIZE -- CMD' or declares it in the kairosd configuration",
                 asked, asked);
        log_about_warn(asked, p->pid, -1, "pid %u (uid %u): refused: no tenant '%s'", p->pid,
                       p->uid, asked);
        *code = KAIROS_ERR_NO_TENANT;
        return NULL;
    }
    if (!may_join(m, p, t, msg, msg_len)) {
        *code = KAIROS_ERR_PERMISSION;
        return NULL;
    }
    return t;
}

int membership_admit(struct membership *m, const struct peer_cred *p,
                     const struct kairos_tenant_admit *a, char *msg, size_t msg_len)
{
    uint32_t pid = a->pid ? a->pid : p->pid;
    struct ledger_tenant *t = ledger_tenant_find(&m->ts->ledger, a->tenant);
    if (!t) {
        snprintf(msg, msg_len, "no tenant '%s' on this node; 'kairos ps' lists the tenants",
                 a->tenant);
        return KAIROS_ERR_NO_TENANT;
    }
    if (!tenants_joinable(t, m->cfg, msg, msg_len))
        return KAIROS_ERR_NO_TENANT;
    bool admin = members_is_admin(m->cfg, p->uid, p->cgroup);
    if (!admin && pid != p->pid) {
        snprintf(msg, msg_len, "permission denied: only root or an administrator admits "
                 "another process (pid %u) to a tenant; you may admit yourself (pid 0)", pid);
        log_warn("uid %u (pid %u): TENANT_ADMIT of pid %u refused: not an administrator",
                 p->uid, p->pid, pid);
        return KAIROS_ERR_PERMISSION;
    }
    if (!admin && !may_join(m, p, t, msg, msg_len))
        return KAIROS_ERR_PERMISSION;
    size_t mine = admin ? 0 : admissions_count_by(&m->admissions, p->uid);
    if (mine >= MEMBERS_MAX_ADMISSIONS_PER_USER) {
        snprintf(msg, msg_len, "uid %u already has %zu admitted processes alive (at most %d); "
                 "wait for some to end", p->uid, mine, MEMBERS_MAX_ADMISSIONS_PER_USER);
        return KAIROS_ERR_BUSY;
    }
    int rc = admissions_add(&m->admissions, t->name, pid, p->uid);
    if (rc) {
        snprintf(msg, msg_len, "cannot admit pid %u to tenant %s: %s", pid, t->name,
                 rc == -ESRCH    ? "no such process"
                 : rc == -ENOSPC ? "too many processes admitted and alive; try again later"
                                 : "kairosd is out of memory");
        return rc == -ENOSPC ? KAIROS_ERR_BUSY : KAIROS_ERR_INVALID;
    }
    log_info("tenant %s: pid %u and its descendants admitted by uid %u (pid %u)", t->name, pid,
             p->uid, p->pid);
    save(m);
    return 0;
}

int membership_set_rules(struct membership *m, const struct peer_cred *p,
                         const struct kairos_tenant_members *r, char *msg, size_t msg_len)
{
    struct ledger_tenant *t = ledger_tenant_find(&m->ts->ledger, r->tenant);
    if (!t) {
        snprintf(msg, msg_len, "no tenant '%s'; create it first (kairos tenant set %s --mem "
                 "SIZE, or the configuration)", r->tenant, r->tenant);
        return KAIROS_ERR_NO_TENANT;
    }
    if (t->flags & LEDGER_TENANT_CONFIG) {
        snprintf(msg, msg_len, "tenant '%s' is declared in %s: its members rules are there "
                 "(members: under the tenant; see kairosd.conf(5))", t->name,
                 m->cfg->path[0] ? m->cfg->path : "the configuration");
        return KAIROS_ERR_INVALID;
    }
    char rules[200], why[256];
    const struct tenant_settings *now = tenants_settings_of(m->ts, t);
    struct member_rules previous = now->members, rules_set;
    uint8_t previous_src = now->src.members;
    members_rules_from_wire(&rules_set, r);
    if (registry_set_members(&m->ts->settings, t, &rules_set, SETTING_RUNTIME)) {
        snprintf(msg, msg_len, "tenant '%s': members rules not set: kairosd is out of memory; "
                 "nothing changed", t->name);
        return KAIROS_ERR_BUSY;
    }
    if (tenants_save_state(m->ts, NULL, why, sizeof why)) {
        registry_set_members(&m->ts->settings, t, &previous, previous_src);
        snprintf(msg, msg_len, "tenant '%s': members rules not set: kairosd cannot write its "
                 "state file (%s); nothing changed. Free space or fix 'state:' in the "
                 "configuration, then retry", t->name, why);
        return KAIROS_ERR_BUSY;
    }
    members_rules_describe(&tenants_settings_of(m->ts, t)->members, rules, sizeof rules);
    log_info("tenant %s: members rules set by uid %u: %s", t->name, p->uid, rules);
    return 0;
}

void membership_tenant_removed(struct membership *m, const char *tenant)
{
    admissions_forget_tenant(&m->admissions, tenant);
    save(m);
}
