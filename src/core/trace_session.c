/* trace_session.c - replays recorded events through the decoder and object trees.
 *
 * Per process (pid) it keeps a descriptor table, rebuilt from the O/X/D lines: each
 * open makes a new file id, a dup shares it, and the close of a file's last
 * descriptor frees the clients made on it, as the kernel does. Device memory is
 * also summed over all processes, so the summary's peak is the peak of the whole
 * recording, not of one process.
 */
#include "core/trace_session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/rm_names.h"

struct fd_entry {
    int fd;
    uint64_t file_id;
    enum rm_node node;
};

struct file_ref {
    uint64_t file_id;
    uint32_t refs;
};

struct proc {
    int pid;
    struct objtree *tree;
    struct fd_entry *fds;
    size_t n_fds, cap_fds;
    struct file_ref *files;
    size_t n_files, cap_files;
};

struct trace_session {
    trace_event_fn fn;
    void *ctx;
    struct proc *procs;
    size_t n_procs, cap_procs;
    int current_pid;          /* pid of the last S line, for lines without p= */
    uint64_t next_file_id;
    bool have_t0;
    double t0_us;
    double last_rel_us;
    int64_t vidmem_now;
    struct trace_summary sum;
    size_t cap_escapes, cap_classes;
};

static int grow(void **items, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    void *p = realloc(*items, n * size);
    if (!p)
        return -ENOMEM;
    *items = p;
    *cap = n;
    return 0;
}

/* ---- processes and descriptors ----------------------------------------------------- */

static struct proc *find_proc(struct trace_session *s, int pid, bool create)
{
    for (size_t i = 0; i < s->n_procs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    if (!create || grow((void **)&s->procs, &s->cap_procs, s->n_procs + 1, sizeof *s->procs))
        return NULL;
    struct proc *p = &s->procs[s->n_procs];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->tree = objtree_new();
    if (!p->tree)
        return NULL;
    s->n_procs++;
    s->sum.processes++;
    return p;
}

static struct fd_entry *find_fd(struct proc *p, int fd)
{
    for (size_t i = 0; i < p->n_fds; i++)
        if (p->fds[i].fd == fd)
            return &p->fds[i];
    return NULL;
}

static struct file_ref *find_file(struct proc *p, uint64_t file_id)
{
    for (size_t i = 0; i < p->n_files; i++)
        if (p->files[i].file_id == file_id)
            return &p->files[i];
    return NULL;
}

static void account(struct trace_session *s, const struct objtree_effect *e)
{
    s->vidmem_now += e->vidmem_delta;
    if (s->vidmem_now > (int64_t)s->sum.vidmem_peak)
        s->sum.vidmem_peak = (uint64_t)s->vidmem_now;
}

/* Drops descriptor fd; the close of a file's last descriptor frees its clients. */
static void drop_fd(struct trace_session *s, struct proc *p, int fd, struct objtree_effect *e)
{
    memset(e, 0, sizeof *e);
    struct fd_entry *ent = find_fd(p, fd);
    if (!ent)
        return;
    uint64_t file_id = ent->file_id;
    *ent = p->fds[--p->n_fds];
    struct file_ref *f = find_file(p, file_id);
    if (f && --f->refs == 0) {
        *f = p->files[--p->n_files];
        objtree_close_file(p->tree, file_id, e);
        account(s, e);
    }
}

static int add_fd(struct proc *p, int fd, uint64_t file_id, enum rm_node node)
{
    if (grow((void **)&p->fds, &p->cap_fds, p->n_fds + 1, sizeof *p->fds))
        return -ENOMEM;
    struct file_ref *f = find_file(p, file_id);
    if (!f) {
        if (grow((void **)&p->files, &p->cap_files, p->n_files + 1, sizeof *p->files))
            return -ENOMEM;
        f = &p->files[p->n_files++];
        *f = (struct file_ref){file_id, 0};
    }
    f->refs++;
    p->fds[p->n_fds++] = (struct fd_entry){fd, file_id, node};
    return 0;
}

static enum rm_node node_of_path(const char *path)
{
    if (!strcmp(path, "/dev/nvidiactl"))
        return RM_NODE_CTL;
    if (!strncmp(path, "/dev/nvidia-uvm", 15))
        return RM_NODE_UVM;
    if (!strncmp(path, "/dev/nvidia", 11))
        return RM_NODE_DEV;
    return RM_NODE_NONE;
}

/* The file id of fd, creating one for a descriptor whose open was not recorded. */
static uint64_t file_of(struct trace_session *s, struct proc *p, int fd, enum rm_node node)
{
    struct fd_entry *ent = find_fd(p, fd);
    if (ent)
        return ent->file_id;
    uint64_t id = ++s->next_file_id;
    return add_fd(p, fd, id, node) ? 0 : id;
}

/* ---- summary counters -------------------------------------------------------------- */

static int count_escape(struct trace_session *s, enum rm_node node, const char *name)
{
    struct trace_summary *sum = &s->sum;
    for (size_t i = 0; i < sum->n_escapes; i++)
        if (sum->escapes[i].node == node && !strcmp(sum->escapes[i].name, name)) {
            sum->escapes[i].calls++;
            return 0;
        }
    if (grow((void **)&sum->escapes, &s->cap_escapes, sum->n_escapes + 1, sizeof *sum->escapes))
        return -ENOMEM;
    sum->escapes[sum->n_escapes++] = (struct trace_escape_count){node, name, 1};
    return 0;
}

/* ---- feeding ------------------------------------------------------------------------- */

/* Events without a time of their own (opens, mmaps) take the last time seen. */
static void relative_time(struct trace_session *s, const struct trace_rec *rec,
                          struct trace_event *ev)
{
    if (rec->kind == TREC_IOCTL && rec->t_us > 0) {
        if (!s->have_t0) {
            s->have_t0 = true;
            s->t0_us = rec->t_us;
        }
        s->last_rel_us = rec->t_us - s->t0_us;
    }
    ev->t_rel_us = s->last_rel_us;
}

static int feed_ioctl(struct trace_session *s, struct proc *p, const struct trace_rec *rec,
                      struct trace_event *ev, struct rm_op *op)
{
    struct rm_call call = {
        .node = rec->node,
        .fd = rec->fd,
        .request = rec->request,
        .xfer = rec->xfer,
        .arg = rec->after,
        .arg_len = rec->after_len,
        .params = rec->params,
        .params_len = rec->params_len,
        .ret = rec->ret,
        .err = rec->err,
    };
    rm_decode(&call, op);
    ev->op = op;
    s->sum.ioctls++;
    if (op->problem != RM_PROBLEM_NONE && op->problem != RM_PROBLEM_TRUNCATED)
        s->sum.problems++;
    if (count_escape(s, rec->node, op->name))
        return -ENOMEM;
    struct objtree_ref ref;
    if (op->kind == RM_OP_FREE && objtree_lookup(p->tree, op->h_client, op->h_object, &ref))
        ev->freed_class = ref.h_class;
    uint64_t file_id = file_of(s, p, rec->fd, rec->node);
    uint64_t map_file = 0;
    if (op->kind == RM_OP_MAP && op->ok && op->map_fd >= 0)
        map_file = file_of(s, p, op->map_fd, RM_NODE_DEV);
    int rc = objtree_apply(p->tree, file_id, map_file, op, &ev->effect);
    account(s, &ev->effect);
    return rc;
}

static int feed_by_kind(struct trace_session *s, struct proc *p, const struct trace_rec *rec,
                        struct trace_event *ev, struct rm_op *op)
{
    switch (rec->kind) {
    case TREC_OPEN:
        drop_fd(s, p, rec->fd, &ev->effect); /* a reused number: the old file is gone */
        return add_fd(p, rec->fd, ++s->next_file_id, node_of_path(rec->path));
    case TREC_CLOSE:
        drop_fd(s, p, rec->fd, &ev->effect);
        return 0;
    case TREC_DUP: {
        struct objtree_effect e;
        struct fd_entry *src = find_fd(p, rec->fd);
        uint64_t id = src ? src->file_id : 0;
        enum rm_node node = src ? src->node : RM_NODE_NONE;
        drop_fd(s, p, rec->new_fd, &e);
        return id ? add_fd(p, rec->new_fd, id, node) : 0;
    }
    case TREC_IOCTL:
        return feed_ioctl(s, p, rec, ev, op);
    case TREC_MMAP:
        s->sum.mmaps++;
        ev->map_kind = objtree_mmap(p->tree, file_of(s, p, rec->fd, rec->node), rec->addr,
                                    rec->len);
        return 0;
    case TREC_MUNMAP:
        objtree_munmap(p->tree, rec->addr, rec->len);
        return 0;
    default:
        return 0;
    }
}

int trace_session_feed(struct trace_session *s, const struct trace_rec *rec)
{
    if (rec->kind == TREC_SKIP)
        return 0;
    if (rec->kind == TREC_START)
        s->current_pid = rec->pid;
    int pid = rec->pid ? rec->pid : s->current_pid;
    struct proc *p = find_proc(s, pid, true);
    if (!p)
        return -ENOMEM;
    struct trace_event ev = {.rec = rec, .pid = pid};
    struct rm_op op;
    relative_time(s, rec, &ev);
    s->sum.events++;
    int rc = feed_by_kind(s, p, rec, &ev, &op);
    ev.tree = p->tree;
    if (s->fn)
        s->fn(&ev, s->ctx);
    return rc;
}

/* ---- summary ------------------------------------------------------------------------- */

static int cmp_escape(const void *a, const void *b)
{
    const struct trace_escape_count *x = a, *y = b;
    if (x->node != y->node)
        return (int)x->node - (int)y->node;
    return strcmp(x->name, y->name);
}

static void merge_class(uint32_t h_class, uint32_t live, uint32_t created, void *ctx)
{
    struct trace_session *s = ctx;
    struct trace_summary *sum = &s->sum;
    for (size_t i = 0; i < sum->n_classes; i++)
        if (sum->classes[i].h_class == h_class) {
            sum->classes[i].live += live;
            sum->classes[i].created += created;
            return;
        }
    if (grow((void **)&sum->classes, &s->cap_classes, sum->n_classes + 1, sizeof *sum->classes))
        return;
    sum->classes[sum->n_classes++] = (struct trace_class_count){h_class, created, live};
}

static int cmp_class(const void *a, const void *b)
{
    const struct trace_class_count *x = a, *y = b;
    return x->h_class < y->h_class ? -1 : x->h_class > y->h_class;
}

int trace_session_summary(struct trace_session *s, struct trace_summary *out)
{
    struct trace_summary *sum = &s->sum;
    sum->vidmem_allocated = sum->vidmem_freed = 0;
    sum->vidmem_allocs = sum->vidmem_frees = 0;
    sum->channel_groups = sum->channels = sum->usermode = sum->doorbell_mappings = 0;
    sum->n_classes = 0;
    for (size_t i = 0; i < s->n_procs; i++) {
        struct objtree_stats st;
        objtree_stats(s->procs[i].tree, &st);
        sum->vidmem_allocated += st.vidmem_allocated;
        sum->vidmem_freed += st.vidmem_freed;
        sum->vidmem_allocs += st.vidmem_allocs;
        sum->vidmem_frees += st.vidmem_frees;
        sum->channel_groups += st.created_channel_groups;
        sum->channels += st.created_channels;
        sum->usermode += st.created_usermode;
        sum->doorbell_mappings += st.doorbell_mappings;
        objtree_foreach_class(s->procs[i].tree, merge_class, s);
    }
    sum->vidmem_now = s->vidmem_now > 0 ? (uint64_t)s->vidmem_now : 0;
    if (sum->n_escapes > 1)
        qsort(sum->escapes, sum->n_escapes, sizeof *sum->escapes, cmp_escape);
    if (sum->n_classes > 1)
        qsort(sum->classes, sum->n_classes, sizeof *sum->classes, cmp_class);
    *out = *sum;
    return 0;
}

/* ---- life cycle ---------------------------------------------------------------------- */

struct trace_session *trace_session_new(trace_event_fn fn, void *ctx)
{
    struct trace_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->fn = fn;
    s->ctx = ctx;
    return s;
}

void trace_session_free(struct trace_session *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_procs; i++) {
        objtree_free(s->procs[i].tree);
        free(s->procs[i].fds);
        free(s->procs[i].files);
    }
    free(s->procs);
    free(s->sum.escapes);
    free(s->sum.classes);
    free(s);
}
