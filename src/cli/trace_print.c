/* trace_print.c - text and JSON Lines rendering of trace events and summaries.
 *
 * Each event is first described as a list of fields (key, value), once; the text
 * printer writes them as key=value and the JSON printer as members of an object,
 * so the two formats can never disagree about what a call was.
 */
#include "cli/trace_print.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "core/rm_names.h"

#define MAX_FIELDS 16

struct field {
    const char *key;
    char text[80];    /* the value as text shows it */
    bool numeric;     /* JSON: number instead of string */
    bool named;       /* JSON: "key": name or null, and "key_id": number */
    const char *name;
    uint64_t number;
};

struct fields {
    struct field f[MAX_FIELDS];
    size_t n;
};

static void add_text(struct fields *fs, const char *key, const char *value)
{
    if (fs->n == MAX_FIELDS)
        return;
    struct field *f = &fs->f[fs->n++];
    f->key = key;
    f->numeric = false;
    f->named = false;
    size_t n = strnlen(value, sizeof f->text - 1);
    memcpy(f->text, value, n);
    f->text[n] = 0;
}

static void add_handle(struct fields *fs, const char *key, uint32_t h)
{
    char buf[16];
    snprintf(buf, sizeof buf, "0x%08" PRIx32, h);
    add_text(fs, key, buf);
}

static void add_number(struct fields *fs, const char *key, uint64_t v, bool hex)
{
    if (fs->n == MAX_FIELDS)
        return;
    struct field *f = &fs->f[fs->n++];
    f->key = key;
    f->numeric = true;
    f->number = v;
    snprintf(f->text, sizeof f->text, hex ? "0x%" PRIx64 : "%" PRIu64, v);
}

static void add_named(struct fields *fs, const char *key, const char *name, uint32_t id)
{
    char buf[80];
    if (name)
        snprintf(buf, sizeof buf, "%s(0x%" PRIx32 ")", name, id);
    else
        snprintf(buf, sizeof buf, "0x%" PRIx32, id);
    add_text(fs, key, buf);
    if (fs->f[fs->n - 1].key == key) {
        fs->f[fs->n - 1].named = true;
        fs->f[fs->n - 1].name = name;
        fs->f[fs->n - 1].number = id;
    }
}

static void add_bytes(struct fields *fs, const char *key, uint64_t bytes)
{
    if (fs->n == MAX_FIELDS)
        return;
    struct field *f = &fs->f[fs->n++];
    f->key = key;
    f->numeric = true;
    f->number = bytes;
    if (bytes >= (1u << 20))
        snprintf(f->text, sizeof f->text, "0x%" PRIx64 "(%.1fMiB)", bytes,
                 (double)bytes / (1 << 20));
    else
        snprintf(f->text, sizeof f->text, "0x%" PRIx64, bytes);
}

/* ---- describing a call ------------------------------------------------------------- */

static void describe_alloc(struct fields *fs, const struct rm_op *op)
{
    add_handle(fs, "client", op->h_client);
    add_handle(fs, "parent", op->h_parent);
    add_handle(fs, "object", op->h_object);
    add_named(fs, "class", rm_class_name(op->h_class), op->h_class);
    if (op->kind == RM_OP_VIDHEAP_ALLOC)
        add_number(fs, "function", op->cmd, false);
    if (op->vidmem || op->kind != RM_OP_ALLOC)
        add_bytes(fs, "size", op->bytes);
    if (op->vidmem)
        add_text(fs, "mem", "vidmem");
}

static void describe_rm(struct fields *fs, const struct trace_event *ev)
{
    const struct rm_op *op = ev->op;
    switch (op->kind) {
    case RM_OP_ALLOC:
    case RM_OP_ALLOC_MEMORY:
    case RM_OP_VIDHEAP_ALLOC:
        describe_alloc(fs, op);
        break;
    case RM_OP_FREE:
    case RM_OP_VIDHEAP_FREE:
        add_handle(fs, "client", op->h_client);
        add_handle(fs, "object", op->h_object);
        if (ev->freed_class)
            add_named(fs, "class", rm_class_name(ev->freed_class), ev->freed_class);
        break;
    case RM_OP_CONTROL:
        add_handle(fs, "client", op->h_client);
        add_handle(fs, "object", op->h_object);
        add_named(fs, "cmd", rm_control_name(op->cmd), op->cmd);
        add_number(fs, "params", op->params_size, false);
        break;
    case RM_OP_DUP:
        add_handle(fs, "client", op->h_client);
        add_handle(fs, "object", op->h_object);
        add_handle(fs, "src_client", op->h_client_src);
        add_handle(fs, "src_object", op->h_object_src);
        break;
    case RM_OP_MAP:
    case RM_OP_UNMAP:
    case RM_OP_MAP_DMA:
    case RM_OP_UNMAP_DMA:
        add_handle(fs, "client", op->h_client);
        add_handle(fs, "memory", op->h_memory);
        if (op->kind == RM_OP_MAP || op->kind == RM_OP_MAP_DMA)
            add_bytes(fs, "length", op->bytes);
        if (op->kind == RM_OP_MAP)
            add_number(fs, "map_fd", (uint64_t)op->map_fd, false);
        break;
    case RM_OP_REGISTER_FD:
        add_number(fs, "ctl_fd", (uint64_t)op->map_fd, false);
        break;
    case RM_OP_OS_EVENT:
        add_handle(fs, "client", op->h_client);
        add_number(fs, "event_fd", (uint64_t)op->map_fd, false);
        break;
    default:
        break;
    }
}

static const char *problem_text(enum rm_problem p)
{
    switch (p) {
    case RM_PROBLEM_TRUNCATED:
        return "truncated";
    case RM_PROBLEM_WRONG_SIZE:
        return "wrong-size";
    case RM_PROBLEM_WRONG_NODE:
        return "wrong-node";
    case RM_PROBLEM_UNKNOWN:
        return "unknown-request";
    case RM_PROBLEM_NONE:
        break;
    }
    return NULL;
}

static void describe_status(struct fields *fs, const struct trace_rec *rec, const struct rm_op *op)
{
    if (rec->ret != 0) {
        add_number(fs, "ret", (uint64_t)(int64_t)rec->ret, false);
        add_number(fs, "errno", (uint64_t)rec->err, false);
    }
    if (op->has_status)
        add_named(fs, "status", rm_status_name(op->status), op->status);
    const char *problem = problem_text(op->problem);
    if (problem && op->problem != RM_PROBLEM_TRUNCATED)
        add_text(fs, "problem", problem);
    if (rec->xfer)
        add_text(fs, "via", "xfer");
}

static const char *map_kind_text(enum objtree_map_kind k)
{
    switch (k) {
    case OBJTREE_MAP_MEMORY:
        return "memory";
    case OBJTREE_MAP_DOORBELL:
        return "doorbell";
    case OBJTREE_MAP_OTHER:
        return "object";
    case OBJTREE_MAP_NONE:
        break;
    }
    return "unpaired";
}

static void node_label(const struct trace_rec *rec, char out[16])
{
    if (rec->node == RM_NODE_DEV && rec->dev_minor >= 0)
        snprintf(out, 16, "dev%d", rec->dev_minor);
    else if (rec->node == RM_NODE_DEV)
        snprintf(out, 16, "dev");
    else
        snprintf(out, 16, "%s", rec->node == RM_NODE_UVM ? "uvm" : "ctl");
}

/* Name of the event and its fields. */
static const char *describe(const struct trace_event *ev, struct fields *fs)
{
    const struct trace_rec *rec = ev->rec;
    if (rec->kind == TREC_START)
        return "start";
    add_number(fs, "fd", (uint64_t)rec->fd, false);
    switch (rec->kind) {
    case TREC_OPEN:
        add_text(fs, "path", rec->path);
        return "open";
    case TREC_CLOSE:
        if (ev->effect.objects_freed)
            add_number(fs, "objects_freed", ev->effect.objects_freed, false);
        if (ev->effect.vidmem_delta)
            add_bytes(fs, "vidmem_freed", (uint64_t)-ev->effect.vidmem_delta);
        return "close";
    case TREC_DUP:
        add_number(fs, "new_fd", (uint64_t)rec->new_fd, false);
        return "dup";
    case TREC_MMAP:
        add_bytes(fs, "length", rec->len);
        add_number(fs, "addr", rec->addr, true);
        add_text(fs, "maps", map_kind_text(ev->map_kind));
        return "mmap";
    case TREC_MUNMAP:
        add_number(fs, "addr", rec->addr, true);
        add_bytes(fs, "length", rec->len);
        return "munmap";
    case TREC_IOCTL:
        describe_rm(fs, ev);
        describe_status(fs, rec, ev->op);
        return ev->op->name;
    case TREC_START:
    case TREC_SKIP:
        break;
    }
    return "note";
}

/* ---- printers ---------------------------------------------------------------------- */

static void print_text(FILE *out, const struct trace_event *ev, const char *name,
                       const struct fields *fs)
{
    const struct trace_rec *rec = ev->rec;
    char node[16] = "-";
    if (rec->kind == TREC_IOCTL || rec->kind == TREC_MMAP)
        node_label(rec, node);
    char tid[24] = "-";
    if (rec->tid)
        snprintf(tid, sizeof tid, "%ld", rec->tid);
    fprintf(out, "%12.6f %7d %7s %-5s %-24s", ev->t_rel_us / 1e6, ev->pid, tid, node, name);
    for (size_t i = 0; i < fs->n; i++)
        fprintf(out, " %s=%s", fs->f[i].key, fs->f[i].text);
    if (rec->kind == TREC_IOCTL)
        fprintf(out, " %.1fus", rec->dt_us);
    fputc('\n', out);
}

static void add_json_field(json_t *o, const struct field *f)
{
    if (f->named) {
        char id_key[48];
        snprintf(id_key, sizeof id_key, "%s_id", f->key);
        json_object_set_new(o, f->key, f->name ? json_string(f->name) : json_null());
        json_object_set_new(o, id_key, json_integer((json_int_t)f->number));
    } else if (f->numeric) {
        json_object_set_new(o, f->key, json_integer((json_int_t)f->number));
    } else {
        json_object_set_new(o, f->key, json_string(f->text));
    }
}

static void print_json(FILE *out, const struct trace_event *ev, const char *name,
                       const struct fields *fs)
{
    const struct trace_rec *rec = ev->rec;
    json_t *o = json_object();
    json_object_set_new(o, "t_us", json_real(ev->t_rel_us));
    json_object_set_new(o, "pid", json_integer(ev->pid));
    if (rec->kind == TREC_IOCTL) {
        char node[16];
        node_label(rec, node);
        json_object_set_new(o, "tid", json_integer(rec->tid));
        json_object_set_new(o, "node", json_string(node));
        json_object_set_new(o, "dt_us", json_real(rec->dt_us));
    }
    json_object_set_new(o, "event", json_string(rec->kind == TREC_IOCTL ? "ioctl" : name));
    if (rec->kind == TREC_IOCTL)
        json_object_set_new(o, "escape", json_string(name));
    for (size_t i = 0; i < fs->n; i++)
        add_json_field(o, &fs->f[i]);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (s)
        fprintf(out, "%s\n", s);
    free(s);
    json_decref(o);
}

void trace_print_event(const struct trace_event *ev, void *ctx)
{
    const struct trace_printer *p = ctx;
    if (p->quiet || ev->rec->kind == TREC_SKIP)
        return;
    struct fields fs = {.n = 0};
    const char *name = describe(ev, &fs);
    if (p->json)
        print_json(p->out, ev, name, &fs);
    else
        print_text(p->out, ev, name, &fs);
}

void trace_print_bad_line(const struct trace_printer *p, const char *source, unsigned line_no,
                          const char *why)
{
    fprintf(stderr, "kairos trace: %s:%u: %s (line skipped)\n", source, line_no, why);
    if (p->json) {
        json_t *o = json_pack("{s:s, s:s, s:i, s:s}", "event", "error", "source", source, "line",
                              (int)line_no, "error", why);
        char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
        if (s)
            fprintf(p->out, "%s\n", s);
        free(s);
        json_decref(o);
    }
}

/* ---- summary -------------------------------------------------------------------------- */

static double mib(uint64_t bytes)
{
    return (double)bytes / (1 << 20);
}

static void summary_text(FILE *out, const struct trace_summary *sum, unsigned bad_lines)
{
    fprintf(out, "\n--- summary: %u process(es), %" PRIu64 " ioctls, %" PRIu64 " mmaps",
            sum->processes, sum->ioctls, sum->mmaps);
    if (bad_lines)
        fprintf(out, ", %u unreadable line(s)", bad_lines);
    if (sum->problems)
        fprintf(out, ", %" PRIu64 " call(s) flagged by the decoder", sum->problems);
    fprintf(out, "\ncalls per escape:\n");
    for (size_t i = 0; i < sum->n_escapes; i++)
        fprintf(out, "  %-10s %-34s %6u\n", rm_node_name(sum->escapes[i].node),
                sum->escapes[i].name, sum->escapes[i].calls);
    fprintf(out,
            "device memory: %u allocations, %.1f MiB allocated, %.1f MiB freed, %.1f MiB peak, "
            "%.1f MiB held when the recording ended\n",
            sum->vidmem_allocs, mib(sum->vidmem_allocated), mib(sum->vidmem_freed),
            mib(sum->vidmem_peak), mib(sum->vidmem_now));
    fprintf(out, "channel groups: %u, channels: %u, doorbell objects: %u, doorbell mappings: %u\n",
            sum->channel_groups, sum->channels, sum->usermode, sum->doorbell_mappings);
    fprintf(out, "objects by class (created, still live):\n");
    for (size_t i = 0; i < sum->n_classes; i++) {
        const char *name = rm_class_name(sum->classes[i].h_class);
        char id[16];
        snprintf(id, sizeof id, "0x%04" PRIx32, sum->classes[i].h_class);
        fprintf(out, "  %-8s %-34s %6u %6u\n", id, name ? name : "?", sum->classes[i].created,
                sum->classes[i].live);
    }
}

static void summary_json(FILE *out, const struct trace_summary *sum, unsigned bad_lines)
{
    json_t *escapes = json_array();
    for (size_t i = 0; i < sum->n_escapes; i++)
        json_array_append_new(escapes, json_pack("{s:s, s:s, s:i}", "node",
                                                 rm_node_name(sum->escapes[i].node), "escape",
                                                 sum->escapes[i].name, "calls",
                                                 (json_int_t)sum->escapes[i].calls));
    json_t *classes = json_array();
    for (size_t i = 0; i < sum->n_classes; i++) {
        const char *name = rm_class_name(sum->classes[i].h_class);
        json_array_append_new(classes,
                              json_pack("{s:i, s:s, s:i, s:i}", "class",
                                        (json_int_t)sum->classes[i].h_class, "name",
                                        name ? name : "", "created",
                                        (json_int_t)sum->classes[i].created, "live",
                                        (json_int_t)sum->classes[i].live));
    }
    json_t *vidmem = json_pack("{s:i, s:I, s:I, s:I, s:I}", "allocations",
                               (json_int_t)sum->vidmem_allocs, "allocated_bytes",
                               (json_int_t)sum->vidmem_allocated, "freed_bytes",
                               (json_int_t)sum->vidmem_freed, "peak_bytes",
                               (json_int_t)sum->vidmem_peak, "held_bytes",
                               (json_int_t)sum->vidmem_now);
    json_t *o = json_pack(
        "{s:s, s:i, s:I, s:I, s:I, s:i, s:o, s:o, s:i, s:i, s:i, s:i, s:o}", "event", "summary",
        "processes", (json_int_t)sum->processes, "ioctls", (json_int_t)sum->ioctls, "mmaps",
        (json_int_t)sum->mmaps, "problems", (json_int_t)sum->problems, "unreadable_lines",
        (json_int_t)bad_lines, "calls", escapes, "vidmem", vidmem, "channel_groups",
        (json_int_t)sum->channel_groups, "channels", (json_int_t)sum->channels,
        "doorbell_objects", (json_int_t)sum->usermode, "doorbell_mappings",
        (json_int_t)sum->doorbell_mappings, "objects", classes);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (s)
        fprintf(out, "%s\n", s);
    free(s);
    json_decref(o);
}

void trace_print_summary(const struct trace_printer *p, const struct trace_summary *sum,
                         unsigned bad_lines)
{
    if (p->json)
        summary_json(p->out, sum, bad_lines);
    else
        summary_text(p->out, sum, bad_lines);
}
