/* node_fakes.c - the in-memory GPUs, the clock and the captured log of the linger
 * and audit tests (see node_fakes.h). */
#include "node_fakes.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

struct fake_gpu fake_gpus[KAIROS_MAX_GPUS];
uint64_t fake_now;

static int fake_status(struct gpu_backend *b, unsigned index, struct gpu_status *out)
{
    (void)b;
    if (index >= KAIROS_MAX_GPUS)
        return -ENODEV;
    const struct fake_gpu *g = &fake_gpus[index];
    if (g->status_fails)
        return -EIO;
    *out = (struct gpu_status){.memory_valid = g->memory_valid, .memory_used = g->used};
    return 0;
}

static int fake_processes(struct gpu_backend *b, unsigned index, struct gpu_proc *out,
                          size_t cap, size_t *n)
{
    (void)b;
    *n = 0;
    if (index >= KAIROS_MAX_GPUS)
        return -ENODEV;
    const struct fake_gpu *g = &fake_gpus[index];
    if (g->list_fails)
        return -EIO;
    *n = g->n_procs;
    if (g->n_procs > cap)
        return -E2BIG;
    if (g->n_procs)
        memcpy(out, g->procs, g->n_procs * sizeof *out);
    return 0;
}

static const struct gpu_ops fake_ops = {
    .name = "in-memory",
    .status = fake_status,
    .processes = fake_processes,
};

struct gpu_backend fake_gpu_backend = {.ops = &fake_ops};

void fake_gpu_free(void)
{
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        free(fake_gpus[g].procs);
    memset(fake_gpus, 0, sizeof fake_gpus);
}

void fake_gpu_reset(void)
{
    fake_gpu_free();
    for (unsigned g = 0; g < KAIROS_MAX_GPUS; g++)
        fake_gpus[g].memory_valid = true;
}

static struct gpu_proc *find(unsigned g, uint32_t pid)
{
    for (size_t i = 0; i < fake_gpus[g].n_procs; i++)
        if (fake_gpus[g].procs[i].pid == pid)
            return &fake_gpus[g].procs[i];
    return NULL;
}

static struct gpu_proc *slot(unsigned g, uint32_t pid)
{
    struct fake_gpu *f = &fake_gpus[g];
    struct gpu_proc *p = find(g, pid);
    if (p)
        return p;
    if (f->n_procs == f->cap_procs) {
        f->cap_procs = f->cap_procs ? 2 * f->cap_procs : 16;
        f->procs = realloc(f->procs, f->cap_procs * sizeof *f->procs);
        assert_non_null(f->procs);
    }
    p = &f->procs[f->n_procs++];
    p->pid = pid;
    return p;
}

void fake_gpu_list(unsigned g, uint32_t pid, uint64_t used)
{
    struct gpu_proc *p = slot(g, pid);
    p->used = used;
    p->used_valid = true;
}

void fake_gpu_list_unknown(unsigned g, uint32_t pid)
{
    struct gpu_proc *p = slot(g, pid);
    p->used = 0;
    p->used_valid = false;
}

void fake_gpu_forget(unsigned g, uint32_t pid)
{
    struct fake_gpu *f = &fake_gpus[g];
    struct gpu_proc *p = find(g, pid);
    if (p)
        *p = f->procs[--f->n_procs];
}

uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static int saved_stderr = -1;
static FILE *capture;
static char *captured;

void log_capture_begin(void)
{
    fflush(stderr);
    capture = tmpfile();
    assert_non_null(capture);
    saved_stderr = dup(2);
    assert_true(saved_stderr >= 0);
    assert_int_equal(dup2(fileno(capture), 2), 2);
}

void log_capture_end(void)
{
    fflush(stderr);
    assert_int_equal(dup2(saved_stderr, 2), 2);
    close(saved_stderr);
    long len = ftell(capture);
    assert_true(len >= 0);
    free(captured);
    captured = calloc(1, (size_t)len + 1);
    assert_non_null(captured);
    rewind(capture);
    assert_int_equal(fread(captured, 1, (size_t)len, capture), (size_t)len);
    fclose(capture);
    capture = NULL;
}

const char *log_captured(void)
{
    return captured ? captured : "";
}

unsigned log_count(const char *first, ...)
{
    unsigned n = 0;
    for (const char *line = log_captured(); *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        bool all = true;
        va_list ap;
        va_start(ap, first);
        for (const char *s = first; s && all; s = va_arg(ap, const char *)) {
            const char *hit = memmem(line, len, s, strlen(s));
            all = hit != NULL;
        }
        va_end(ap);
        n += all;
        line += len + (end ? 1 : 0);
    }
    return n;
}
