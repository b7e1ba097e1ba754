/* cmd_trace.c - `kairos trace`: an strace for the GPU driver boundary.
 *
 *   kairos trace [--output FILE] [--json] [--summary] [--record FILE] -- CMD [ARGS]
 *   kairos trace [--output FILE] [--json] [--summary] --replay FILE
 *
 * Live: CMD runs with libkairos.so preloaded in trace mode; the shim sends one
 * recording line per event over a SOCK_SEQPACKET socket (one message per line, so
 * the lines of many threads and processes never interleave), and this process
 * decodes them as they come. Replay: the same decoding over a recorded file. Both
 * go through one trace session, so they print the same thing for the same calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/shim_path.h"
#include "cli/trace_print.h"
#include "core/trace_record.h"
#include "core/trace_session.h"

struct trace_opts {
    const char *output;
    const char *record;
    const char *replay;
    bool json;
    bool summary_only;
    char **command;
};

/* What one run reads lines into and feeds. */
struct reader {
    struct trace_session *session;
    struct trace_printer printer;
    FILE *record;
    const char *source;
    unsigned line_no, bad_lines;
    uint8_t *bytes;
    size_t bytes_len;
    bool started; /* the command ran or the recording opened: a summary follows */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos trace [options] -- CMD [ARGS...]\n"
            "       kairos trace [options] --replay FILE\n"
            "\n"
            "Decodes every call CMD (and its children) makes to the NVIDIA kernel driver:\n"
            "one line per ioctl, mmap, open and close on /dev/nvidia*, then a summary.\n"
            "\n"
            "options:\n"
            "      --output FILE   write the decoded trace to FILE instead of stdout\n"
            "  -j, --json          JSON Lines: one object per event, then a summary object\n"
            "      --summary       print only the summary\n"
            "  -r, --record FILE   also save the raw recording (replayable with --replay)\n"
            "  -R, --replay FILE   decode a recording instead of running a command\n"
            "                      ('-' reads standard input)\n"
            "  -h, --help          show this text\n"
            "\n"
            "environment: KAIROS_SHIM=/path/to/libkairos.so overrides where the shim is found.\n"
            "exit status: CMD's own (128+N if killed by signal N), 1 when CMD cannot be\n"
            "started; with --replay 0, or 1 when FILE cannot be opened or some lines could\n"
            "not be read.\n");
}

static int parse_args(int argc, char **argv, struct trace_opts *o)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
        {"summary", no_argument, NULL, 's'},      {"record", required_argument, NULL, 'r'},
        {"replay", required_argument, NULL, 'R'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+jr:R:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            o->output = optarg;
            break;
        case 'j':
            o->json = true;
            break;
        case 's':
            o->summary_only = true;
            break;
        case 'r':
            o->record = optarg;
            break;
        case 'R':
            o->replay = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (optind < argc)
        o->command = &argv[optind];
    if (!o->replay == !o->command) {
        fprintf(stderr, "kairos trace: give either a command after '--' or --replay FILE\n");
        usage(stderr);
        return -1;
    }
    if (o->replay && o->record) {
        fprintf(stderr, "kairos trace: --record goes with a command, not with --replay\n");
        return -1;
    }
    return 0;
}

/* ---- feeding lines ------------------------------------------------------------------ */

static int feed_line(struct reader *r, const char *line)
{
    r->line_no++;
    if (r->record)
        fputs(line, r->record);
    struct trace_rec rec;
    char why[160];
    if (trace_parse_line(line, &rec, r->bytes, r->bytes_len, why, sizeof why)) {
        r->bad_lines++;
        trace_print_bad_line(&r->printer, r->source, r->line_no, why);
        return 0;
    }
    if (trace_session_feed(r->session, &rec)) {
        fprintf(stderr, "kairos trace: out of memory at %s:%u\n", r->source, r->line_no);
        return -1;
    }
    return 0;
}

static int replay_stream(struct reader *r, FILE *in)
{
    size_t cap = TRACE_MAX_LINE + 2;
    char *line = malloc(cap);
    if (!line)
        return -1;
    int rc = 0;
    while (rc == 0 && fgets(line, (int)cap, in)) {
        size_t n = strlen(line);
        if (n == cap - 1 && line[n - 1] != '\n') {
            /* longer than any valid line: report and skip the rest of it */
            int ch;
            while ((ch = fgetc(in)) != EOF && ch != '\n')
                ;
            r->line_no++;
            r->bad_lines++;
            trace_print_bad_line(&r->printer, r->source, r->line_no, "line too long");
            continue;
        }
        rc = feed_line(r, line);
    }
    free(line);
    return rc;
}

/* ---- running a command ---------------------------------------------------------------- */

/* In the child: exec command; when that fails, its errno goes up err_fd (closed
 * on a successful exec, so the parent reads nothing). */
static void exec_traced(char **command, const char *shim, int trace_fd, int err_fd)
{
    char fd_text[16];
    snprintf(fd_text, sizeof fd_text, "%d", trace_fd);
    int e = shim_path_preload(shim) ? ENOMEM : 0;
    if (!e) {
        setenv("KAIROS_TRACE_FD", fd_text, 1);
        execvp(command[0], command);
        e = errno;
    }
    ssize_t n = write(err_fd, &e, sizeof e);
    (void)n;
    _exit(127);
}

/* The child's exec failure (an errno), or 0 once it has exec'd. */
static int exec_result(int err_fd)
{
    int e = 0;
    ssize_t n;
    while ((n = read(err_fd, &e, sizeof e)) < 0 && errno == EINTR)
        ;
    return n == (ssize_t)sizeof e ? e : 0;
}

static int receive_lines(struct reader *r, int sock)
{
    size_t cap = TRACE_MAX_LINE + 1;
    char *msg = malloc(cap);
    if (!msg)
        return -1;
    int rc = 0;
    for (;;) {
        ssize_t n = recv(sock, msg, cap - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        msg[n] = 0;
        if ((rc = feed_line(r, msg)))
            break;
    }
    free(msg);
    return rc;
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

static int run_traced(struct reader *r, char **command)
{
    char shim[PATH_MAX];
    if (shim_path_find(shim, sizeof shim)) {
        fprintf(stderr,
                "kairos trace: cannot find libkairos.so next to kairos; build it, or set "
                "KAIROS_SHIM=/path/to/libkairos.so\n");
        return 1;
    }
    int sv[2], ep[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
        fprintf(stderr, "kairos trace: socketpair: %s\n", strerror(errno));
        return 1;
    }
    if (pipe2(ep, O_CLOEXEC)) {
        fprintf(stderr, "kairos trace: pipe: %s\n", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return 1;
    }
    int sndbuf = 4 * TRACE_MAX_LINE;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "kairos trace: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        close(sv[0]);
        close(ep[0]);
        int fd = dup(sv[1]); /* without CLOEXEC: the traced program inherits it */
        exec_traced(command, shim, fd < 0 ? sv[1] : fd, ep[1]);
    }
    close(sv[1]);
    close(ep[1]);
    int e = exec_result(ep[0]);
    close(ep[0]);
    if (e) {
        close(sv[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        fprintf(stderr, "kairos trace: cannot run '%s': %s\n", command[0], strerror(e));
        return 1;
    }
    r->started = true;
    signal(SIGINT, SIG_IGN); /* ^C goes to the traced command; we print what it did */
    int rc = receive_lines(r, sv[0]);
    close(sv[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return rc ? 1 : exit_code_of(status);
}

/* ---- the command ------------------------------------------------------------------------ */

static int run(const struct trace_opts *o, struct reader *r)
{
    if (o->command)
        return run_traced(r, o->command);
    FILE *in = strcmp(o->replay, "-") ? fopen(o->replay, "r") : stdin;
    if (!in) {
        fprintf(stderr, "kairos trace: cannot open '%s': %s\n", o->replay, strerror(errno));
        return 1;
    }
    r->started = true;
    int rc = replay_stream(r, in);
    if (in != stdin)
        fclose(in);
    return rc || r->bad_lines ? 1 : 0;
}

static int open_outputs(const struct trace_opts *o, struct reader *r)
{
    r->printer.out = stdout;
    if (o->output && !(r->printer.out = fopen(o->output, "w"))) {
        fprintf(stderr, "kairos trace: cannot write '%s': %s\n", o->output, strerror(errno));
        return -1;
    }
    if (o->record && !(r->record = fopen(o->record, "w"))) {
        fprintf(stderr, "kairos trace: cannot write '%s': %s\n", o->record, strerror(errno));
        return -1;
    }
    return 0;
}

int cmd_trace(int argc, char **argv)
{
    struct trace_opts o = {0};
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : 2;
    struct reader r = {.source = o.replay ? o.replay : "live"};
    r.printer.json = o.json;
    r.printer.quiet = o.summary_only;
    r.bytes_len = 3 * TRACE_MAX_BYTES;
    r.bytes = malloc(r.bytes_len);
    r.session = trace_session_new(trace_print_event, &r.printer);
    int rc = 1;
    if (r.bytes && r.session && open_outputs(&o, &r) == 0) {
        rc = run(&o, &r);
        struct trace_summary sum;
        trace_session_summary(r.session, &sum);
        if (r.started) /* nothing ran: no summary that would look like a result */
            trace_print_summary(&r.printer, &sum, r.bad_lines);
    }
    if (r.printer.out && r.printer.out != stdout)
        fclose(r.printer.out);
    if (r.record)
        fclose(r.record);
    trace_session_free(r.session);
    free(r.bytes);
    return rc;
}
