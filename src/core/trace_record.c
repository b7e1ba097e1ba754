/* trace_record.c - parser and formatters of the recording format (see trace_record.h).
 *
 * The parser takes hostile input: every number is range-checked, hex must be
 * well-formed and fit the caller's buffer, and an unknown line kind is an error
 * with a reason, never a crash. The formatters write with snprintf into a caller's
 * buffer and allocate nothing, so the shim can use them.
 */
#include "core/trace_record.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 32

struct tokens {
    const char *start[MAX_TOKENS];
    size_t len[MAX_TOKENS];
    size_t n;
};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int tokenize(const char *line, struct tokens *tk)
{
    tk->n = 0;
    const char *p = line;
    for (;;) {
        while (is_space(*p))
            p++;
        if (!*p)
            return 0;
        if (tk->n == MAX_TOKENS)
            return -1;
        tk->start[tk->n] = p;
        while (*p && !is_space(*p))
            p++;
        tk->len[tk->n] = (size_t)(p - tk->start[tk->n]);
        tk->n++;
    }
}

/* Value of key=... among the tokens, or NULL; *len gets its length. */
static const char *value_of(const struct tokens *tk, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    for (size_t i = 1; i < tk->n; i++)
        if (tk->len[i] > klen && tk->start[i][klen] == '=' && !memcmp(tk->start[i], key, klen)) {
            *len = tk->len[i] - klen - 1;
            return tk->start[i] + klen + 1;
        }
    return NULL;
}

static int fail(char *err, size_t err_len, const char *msg, const char *what)
{
    if (err && err_len)
        snprintf(err, err_len, "%s%s%s", msg, what ? ": " : "", what ? what : "");
    return -1;
}

/* Parses an integer (decimal or 0x hex) of exactly len characters into [lo, hi]. */
static int parse_int(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 0);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, size_t len, uint64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf || s[0] == '-')
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, size_t len, double *out)
{
    char buf[40];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !(v >= 0.0 && v < 1e18))
        return -1;
    *out = v;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes hex into out (at most cap bytes); returns the byte count or -1. */
static long parse_hex(const char *s, size_t len, uint8_t *out, size_t cap)
{
    if (len % 2 || len / 2 > cap)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return (long)(len / 2);
}

static int get_int(const struct tokens *tk, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    size_t len;
    const char *v = value_of(tk, key, &len);
    if (!v)
        return -2;
    return parse_int(v, len, lo, hi, out);
}

static int require_int(const struct tokens *tk, const char *key, int64_t lo, int64_t hi,
                       int64_t *out, char *err, size_t err_len)
{
    int rc = get_int(tk, key, lo, hi, out);
    if (rc == -2)
        return fail(err, err_len, "missing field", key);
    if (rc)
        return fail(err, err_len, "bad value for field", key);
    return 0;
}

static int optional_pid(const struct tokens *tk, struct trace_rec *rec, char *err, size_t err_len)
{
    int64_t v;
    int rc = get_int(tk, "p", 0, INT32_MAX, &v);
    if (rc == -1)
        return fail(err, err_len, "bad value for field", "p");
    rec->pid = rc == 0 ? (int)v : 0;
    return 0;
}

/* The node tag of I and M lines: c, u, or a device minor number. */
static int parse_node(const char *s, size_t len, struct trace_rec *rec)
{
    int64_t minor;
    if (len == 1 && s[0] == 'c') {
        rec->node = RM_NODE_CTL;
    } else if (len == 1 && s[0] == 'u') {
        rec->node = RM_NODE_UVM;
    } else if (len == 1 && s[0] == 'd') {
        rec->node = RM_NODE_DEV; /* device of unknown minor (the fixture's counts) */
        rec->dev_minor = -1;
    } else if (!parse_int(s, len, 0, 254, &minor)) {
        rec->node = RM_NODE_DEV;
        rec->dev_minor = (int)minor;
    } else {
        return -1;
    }
    return 0;
}

/* Finds the first bare token (no '=') after the kind letter. */
static int bare_token(const struct tokens *tk, size_t from)
{
    for (size_t i = from; i < tk->n; i++)
        if (!memchr(tk->start[i], '=', tk->len[i]))
            return (int)i;
    return -1;
}

static long take_hex(const struct tokens *tk, const char *key, uint8_t *out, size_t cap,
                     bool *present)
{
    size_t len;
    const char *v = value_of(tk, key, &len);
    *present = v != NULL;
    if (!v)
        return 0;
    return parse_hex(v, len, out, cap);
}

static int parse_ioctl_bytes(const struct tokens *tk, struct trace_rec *rec, uint8_t *buf,
                             size_t buf_len, char *err, size_t err_len)
{
    static const char *const keys[3] = {"B", "A", "P"};
    const uint8_t **dst[3] = {&rec->before, &rec->after, &rec->params};
    size_t *lens[3] = {&rec->before_len, &rec->after_len, &rec->params_len};
    size_t used = 0;
    for (int i = 0; i < 3; i++) {
        size_t cap = buf_len - used < TRACE_MAX_BYTES ? buf_len - used : TRACE_MAX_BYTES;
        bool present;
        long n = take_hex(tk, keys[i], buf + used, cap, &present);
        if (n < 0)
            return fail(err, err_len, "bad hex bytes (odd length, non-hex or too long) in field",
                        keys[i]);
        *dst[i] = present ? buf + used : NULL;
        *lens[i] = (size_t)n;
        used += (size_t)n;
        if (i == 2)
            rec->has_params = present;
    }
    return 0;
}

static int parse_ioctl(const struct tokens *tk, struct trace_rec *rec, uint8_t *buf,
                       size_t buf_len, char *err, size_t err_len)
{
    int64_t v;
    size_t len;
    const char *s;
    int node_tok = bare_token(tk, 1);
    if (node_tok < 0 || parse_node(tk->start[node_tok], tk->len[node_tok], rec))
        return fail(err, err_len, "missing or bad node tag (c, u or a device number)", NULL);
    if (require_int(tk, "fd", 0, INT32_MAX, &v, err, err_len))
        return -1;
    rec->fd = (int)v;
    int64_t nr, sz;
    if (require_int(tk, "nr", 0, 0xff, &nr, err, err_len) ||
        require_int(tk, "sz", 0, 0x3fff, &sz, err, err_len))
        return -1;
    rec->request = trace_request_of(rec->node, (uint32_t)nr, (uint32_t)sz);
    if ((s = value_of(tk, "rq", &len))) {
        uint64_t rq;
        if (parse_u64(s, len, &rq) || rq > UINT32_MAX)
            return fail(err, err_len, "bad value for field", "rq");
        rec->request = (uint32_t)rq;
    }
    if (require_int(tk, "r", INT32_MIN, INT32_MAX, &v, err, err_len))
        return -1;
    rec->ret = (int)v;
    rec->err = get_int(tk, "e", 0, 4095, &v) == 0 ? (int)v : 0;
    rec->tid = get_int(tk, "tid", 0, INT32_MAX, &v) == 0 ? (long)v : 0;
    rec->xfer = get_int(tk, "x", 0, 1, &v) == 0 && v == 1;
    if ((s = value_of(tk, "t", &len)) && parse_double(s, len, &rec->t_us))
        return fail(err, err_len, "bad value for field", "t");
    if ((s = value_of(tk, "dt", &len)) && parse_double(s, len, &rec->dt_us))
        return fail(err, err_len, "bad value for field", "dt");
    return parse_ioctl_bytes(tk, rec, buf, buf_len, err, err_len);
}

static int parse_mmap(const struct tokens *tk, struct trace_rec *rec, char *err, size_t err_len)
{
    int64_t v;
    size_t len;
    const char *s;
    if (require_int(tk, "fd", 0, INT32_MAX, &v, err, err_len))
        return -1;
    rec->fd = (int)v;
    int node_tok = bare_token(tk, 1);
    if (node_tok < 0 || parse_node(tk->start[node_tok], tk->len[node_tok], rec))
        return fail(err, err_len, "missing or bad node tag (c, u or a device number)", NULL);
    if (!(s = value_of(tk, "len", &len)) || parse_u64(s, len, &rec->len))
        return fail(err, err_len, "missing or bad field", "len");
    if ((s = value_of(tk, "off", &len)) && parse_u64(s, len, &rec->off))
        return fail(err, err_len, "bad value for field", "off");
    rec->prot = get_int(tk, "prot", 0, 0xff, &v) == 0 ? (int)v : 0;
    rec->flags = get_int(tk, "flags", 0, INT32_MAX, &v) == 0 ? (int)v : 0;
    /* "-> 0xADDR" closes the line */
    if (tk->n < 2 || tk->len[tk->n - 2] != 2 || memcmp(tk->start[tk->n - 2], "->", 2) ||
        parse_u64(tk->start[tk->n - 1], tk->len[tk->n - 1], &rec->addr))
        return fail(err, err_len, "missing '-> ADDRESS' at the end of the mmap line", NULL);
    return 0;
}

static int parse_open(const struct tokens *tk, struct trace_rec *rec, char *err, size_t err_len)
{
    int64_t v;
    if (require_int(tk, "fd", 0, INT32_MAX, &v, err, err_len))
        return -1;
    rec->fd = (int)v;
    int path_tok = bare_token(tk, 1);
    if (path_tok < 0)
        return fail(err, err_len, "missing path in open line", NULL);
    size_t n = tk->len[path_tok];
    if (n >= sizeof rec->path)
        return fail(err, err_len, "path too long in open line", NULL);
    memcpy(rec->path, tk->start[path_tok], n);
    rec->path[n] = 0;
    return 0;
}

static int parse_by_kind(char kind, const struct tokens *tk, struct trace_rec *rec, uint8_t *buf,
                         size_t buf_len, char *err, size_t err_len)
{
    int64_t v;
    size_t len;
    const char *s;
    switch (kind) {
    case 'S':
        rec->kind = TREC_START;
        if ((s = value_of(tk, "pid", &len)) && !parse_int(s, len, 0, INT32_MAX, &v))
            rec->pid = (int)v;
        return 0;
    case 'O':
        rec->kind = TREC_OPEN;
        return parse_open(tk, rec, err, err_len);
    case 'X':
        rec->kind = TREC_CLOSE;
        if (require_int(tk, "fd", 0, INT32_MAX, &v, err, err_len))
            return -1;
        rec->fd = (int)v;
        return 0;
    case 'D':
        rec->kind = TREC_DUP;
        if (require_int(tk, "fd", 0, INT32_MAX, &v, err, err_len))
            return -1;
        rec->fd = (int)v;
        if (require_int(tk, "new", 0, INT32_MAX, &v, err, err_len))
            return -1;
        rec->new_fd = (int)v;
        return 0;
    case 'I':
        rec->kind = TREC_IOCTL;
        return parse_ioctl(tk, rec, buf, buf_len, err, err_len);
    case 'M':
        rec->kind = TREC_MMAP;
        return parse_mmap(tk, rec, err, err_len);
    case 'U':
        rec->kind = TREC_MUNMAP;
        if (!(s = value_of(tk, "addr", &len)) || parse_u64(s, len, &rec->addr))
            return fail(err, err_len, "missing or bad field", "addr");
        if (!(s = value_of(tk, "len", &len)) || parse_u64(s, len, &rec->len))
            return fail(err, err_len, "missing or bad field", "len");
        return 0;
    case 'C':
    case 'G':
    case '#':
        rec->kind = TREC_SKIP;
        return 0;
    default:
        return fail(err, err_len, "unknown line kind (expected S, O, X, D, I, M, U, C, G or #)",
                    NULL);
    }
}

int trace_parse_line(const char *line, struct trace_rec *rec, uint8_t *buf, size_t buf_len,
                     char *err, size_t err_len)
{
    memset(rec, 0, sizeof *rec);
    rec->dev_minor = -1;
    struct tokens tk;
    if (tokenize(line, &tk))
        return fail(err, err_len, "too many fields on the line", NULL);
    if (tk.n == 0 || tk.start[0][0] == '#') {
        rec->kind = TREC_SKIP;
        return 0;
    }
    if (tk.len[0] != 1)
        return fail(err, err_len, "a line starts with a one-letter kind", NULL);
    char kind = tk.start[0][0];
    if (parse_by_kind(kind, &tk, rec, buf, buf_len, err, err_len))
        return -1;
    if (kind != 'S' && kind != 'C' && kind != 'G')
        return optional_pid(&tk, rec, err, err_len);
    return 0;
}

uint32_t trace_request_of(enum rm_node node, uint32_t nr, uint32_t size)
{
    if (node == RM_NODE_UVM)
        return (size & 0x3fffu) << 16 | (nr & 0xffu);
    return RM_IOWR(nr & 0xffu, size & 0x3fffu);
}

/* ---- formatters ------------------------------------------------------------------- */

/* Appends formatted text at *pos; returns false once the buffer is full. */
static bool put(char *out, size_t cap, size_t *pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool put(char *out, size_t cap, size_t *pos, const char *fmt, ...)
{
    if (*pos >= cap)
        return false;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *pos, cap - *pos, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *pos) {
        *pos = cap;
        return false;
    }
    *pos += (size_t)n;
    return true;
}

static bool put_hex(char *out, size_t cap, size_t *pos, const char *key, const uint8_t *bytes,
                    size_t n)
{
    static const char digits[] = "0123456789abcdef";
    if (!put(out, cap, pos, " %s=", key))
        return false;
    if (n > TRACE_MAX_BYTES)
        n = TRACE_MAX_BYTES;
    if (cap - *pos <= 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        out[(*pos)++] = digits[bytes[i] >> 4];
        out[(*pos)++] = digits[bytes[i] & 15];
    }
    out[*pos] = 0;
    return true;
}

static size_t finish(char *out, size_t cap, size_t pos, bool ok)
{
    if (!ok || pos + 2 > cap)
        return 0;
    out[pos++] = '\n';
    out[pos] = 0;
    return pos;
}

static void node_tag(enum rm_node node, int minor, char tag[16])
{
    if (node == RM_NODE_DEV && minor >= 0)
        snprintf(tag, 16, "%d", minor);
    else if (node == RM_NODE_DEV)
        snprintf(tag, 16, "d");
    else
        snprintf(tag, 16, "%c", node == RM_NODE_UVM ? 'u' : 'c');
}

size_t trace_format_start(char *out, size_t cap, int pid, const char *extra)
{
    size_t pos = 0;
    bool ok = put(out, cap, &pos, "S start pid=%d%s%s", pid, extra && *extra ? " " : "",
                  extra ? extra : "");
    return finish(out, cap, pos, ok);
}

size_t trace_format_open(char *out, size_t cap, int pid, int fd, const char *path)
{
    size_t pos = 0;
    bool ok = put(out, cap, &pos, "O p=%d fd=%d %s", pid, fd, path);
    return finish(out, cap, pos, ok);
}

size_t trace_format_close(char *out, size_t cap, int pid, int fd)
{
    size_t pos = 0;
    return finish(out, cap, pos, put(out, cap, &pos, "X p=%d fd=%d", pid, fd));
}

size_t trace_format_dup(char *out, size_t cap, int pid, int fd, int new_fd)
{
    size_t pos = 0;
    return finish(out, cap, pos, put(out, cap, &pos, "D p=%d fd=%d new=%d", pid, fd, new_fd));
}

size_t trace_format_ioctl(char *out, size_t cap, int pid, const struct trace_rec *rec)
{
    char tag[16];
    node_tag(rec->node, rec->dev_minor, tag);
    size_t pos = 0;
    bool ok = put(out, cap, &pos,
                  "I t=%.0f tid=%ld %s fd=%d nr=0x%x sz=%u r=%d e=%d dt=%.1f", rec->t_us,
                  rec->tid, tag, rec->fd, rec->request & 0xffu, (rec->request >> 16) & 0x3fffu,
                  rec->ret, rec->err, rec->dt_us);
    ok = ok && put_hex(out, cap, &pos, "B", rec->before, rec->before ? rec->before_len : 0);
    ok = ok && put_hex(out, cap, &pos, "A", rec->after, rec->after ? rec->after_len : 0);
    if (ok && rec->params)
        ok = put_hex(out, cap, &pos, "P", rec->params, rec->params_len);
    ok = ok && put(out, cap, &pos, " rq=0x%" PRIx32 "%s p=%d", rec->request,
                   rec->xfer ? " x=1" : "", pid);
    return finish(out, cap, pos, ok);
}

size_t trace_format_mmap(char *out, size_t cap, int pid, const struct trace_rec *rec)
{
    char tag[16];
    node_tag(rec->node, rec->dev_minor, tag);
    size_t pos = 0;
    bool ok = put(out, cap, &pos,
                  "M p=%d fd=%d %s len=0x%" PRIx64 " prot=%d flags=0x%x off=0x%" PRIx64
                  " -> 0x%" PRIx64,
                  pid, rec->fd, tag, rec->len, rec->prot, (unsigned)rec->flags, rec->off,
                  rec->addr);
    return finish(out, cap, pos, ok);
}

size_t trace_format_munmap(char *out, size_t cap, int pid, uint64_t addr, uint64_t len)
{
    size_t pos = 0;
    bool ok = put(out, cap, &pos, "U p=%d addr=0x%" PRIx64 " len=0x%" PRIx64, pid, addr, len);
    return finish(out, cap, pos, ok);
}
