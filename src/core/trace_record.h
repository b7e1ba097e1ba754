/* trace_record.h - the recording format of the driver boundary: parse and format.
 *
 * A recording is text, one event per line, so it can be read, grepped, diffed and
 * committed as a test fixture. The format is a superset of the traces in the
 * shared fixtures (recorded by the experiment tracer), so both replay the same way:
 *
 *   S start pid=P [key=value ...]            a process starts recording
 *   O [p=P] fd=N PATH                        open of an NVIDIA node
 *   X [p=P] fd=N                             close
 *   D [p=P] fd=N new=M                       dup/dup2/dup3/F_DUPFD: M now shares N's file
 *   I t=US tid=T K fd=N nr=0xNR sz=SIZE r=RET e=ERRNO dt=US B=HEX A=HEX [P=HEX]
 *     [rq=0xREQUEST] [x=1] [p=P]             one ioctl: K is c (nvidiactl), a device
 *                                            minor (nvidiaN) or u (nvidia-uvm); B and A
 *                                            the argument before and after (a prefix or
 *                                            whole), P the RM_ALLOC/RM_CONTROL params
 *                                            after; x=1 when it came through XFER
 *   M [p=P] fd=N K len=0xL prot=P flags=0xF off=0xO -> 0xADDR
 *   U [p=P] addr=0xA len=0xL                 munmap of a range that held a mapping
 *   C counts ...   G ...   # ...             summaries, notes, comments: skipped
 *
 * Kairos's own recordings (libkairos.so in trace mode) write whole arguments and
 * parameters (up to TRACE_MAX_BYTES), p= on every line, and rq= for the request.
 *
 * Thread rules: no state; safe from any thread. The formatters use no allocation
 * and are used inside the shim.
 */
#ifndef KAIROS_CORE_TRACE_RECORD_H
#define KAIROS_CORE_TRACE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rm_abi.h"

#define TRACE_MAX_BYTES 16384u   /* largest argument or params block recorded */
#define TRACE_MAX_LINE (2 * 3 * TRACE_MAX_BYTES + 512)

enum trace_rec_kind {
    TREC_SKIP = 0,   /* blank, comment, summary or note */
    TREC_START,
    TREC_OPEN,
    TREC_CLOSE,
    TREC_DUP,
    TREC_IOCTL,
    TREC_MMAP,
    TREC_MUNMAP,
};

struct trace_rec {
    enum trace_rec_kind kind;
    int pid;                 /* p= (0: the pid of the last S line) */
    int fd;
    int new_fd;              /* TREC_DUP */
    char path[128];          /* TREC_OPEN */
    /* TREC_IOCTL */
    double t_us, dt_us;
    long tid;
    enum rm_node node;
    int dev_minor;           /* for RM_NODE_DEV */
    uint32_t request;
    bool xfer;
    int ret, err;
    const uint8_t *before, *after, *params;  /* point into the parse buffer */
    size_t before_len, after_len, params_len;
    bool has_params;
    /* TREC_MMAP / TREC_MUNMAP */
    uint64_t addr, len, off;
    int prot, flags;
};

/* Parses one line (without or with its newline). Byte fields are decoded into buf
 * (needs up to 3 * TRACE_MAX_BYTES). Returns 0, or -1 with a message in err. */
int trace_parse_line(const char *line, struct trace_rec *rec, uint8_t *buf, size_t buf_len,
                     char *err, size_t err_len);

/* Formatters: write one line, newline included, into out; return its length, or 0
 * when it does not fit (callers size out with TRACE_MAX_LINE). */
size_t trace_format_start(char *out, size_t cap, int pid, const char *extra);
size_t trace_format_open(char *out, size_t cap, int pid, int fd, const char *path);
size_t trace_format_close(char *out, size_t cap, int pid, int fd);
size_t trace_format_dup(char *out, size_t cap, int pid, int fd, int new_fd);
size_t trace_format_ioctl(char *out, size_t cap, int pid, const struct trace_rec *rec);
size_t trace_format_mmap(char *out, size_t cap, int pid, const struct trace_rec *rec);
size_t trace_format_munmap(char *out, size_t cap, int pid, uint64_t addr, uint64_t len);

/* Builds the request word a line implies when it has no rq=: nvidia nodes use
 * _IOWR('F', nr, sz), UVM the plain number (sz << 16 | nr). */
uint32_t trace_request_of(enum rm_node node, uint32_t nr, uint32_t size);

#endif /* KAIROS_CORE_TRACE_RECORD_H */
