/* cmd_top.c - `kairos top`: kairosd's tenants per GPU, live, in the terminal
 * (ncurses): target against achieved time share, policy, pauses, what held each
 * back, memory. It asks kairosd with the same PS request as kairos ps (ps_view.c)
 * every interval (without the hold figures once a kairosd of before refused them)
 * and draws the frame of top_frame.c cut to the window, which may be resized at
 * any time; q quits. With --once, or when standard output is not a terminal, it prints
 * one frame as plain text and exits.
 *
 *   kairos top [--interval SECONDS] [--once] [--columns LIST | --wide] [--socket PATH]
 */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/columns.h"
#include "cli/commands.h"
#include "cli/ps_view.h"
#include "cli/top_frame.h"

#define INTERVAL_MIN 0.1
#define INTERVAL_MAX 3600.0

static volatile sig_atomic_t stop_requested;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos top [options]\n"
            "\n"
            "Shows kairosd's tenants per GPU, refreshed live: target against achieved share\n"
            "of the GPU's time (last 100 ms, last minute), share, limit, GPU memory held and\n"
            "quota, processes (--wide adds priority, pause window, pauses, and the part of\n"
            "the last minute each was held back and why). q quits.\n"
            "\n"
            "options:\n"
            "  -i, --interval SECONDS  refresh every SECONDS (default 1, 0.1 to 3600)\n"
            "  -1, --once              print one frame as plain text and exit (also when\n"
            "                          standard output is not a terminal)\n"
            "  -o, --columns LIST      the columns to show, comma separated (default:\n"
            "                          " COLUMNS_TOP_DEFAULT ")\n"
            "  -w, --wide              every column top knows (adds prio, window, pauses,\n"
            "                          hold, why)\n"
            "  -s, --socket PATH       kairosd's socket (default $KAIROS_SOCKET or "
            KAIROS_DEFAULT_SOCKET ")\n"
            "  -h, --help              show this text\n"
            "\n"
            "columns:\n");
    columns_print_known(out, 2);
}

/* What is on the screen: the last figures kairosd gave, and the last error. */
struct top_view {
    const char *socket_path;
    struct columns cols;
    double interval;
    struct ps_snapshot snap;
    bool old_daemon; /* kairosd knew no hold figures: not asked for them again */
    char when[16];  /* time of snap, HH:MM:SS */
    char err[512];  /* the last fetch failed: why ("" when it did not) */
};

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

/* Asks kairosd again; on failure keeps the old figures and remembers why. */
static void view_fetch(struct top_view *v)
{
    struct ps_snapshot next;
    if (ps_fetch(v->socket_path, !v->old_daemon, &next, v->err, sizeof v->err))
        return;
    v->old_daemon = !next.holds;
    ps_snapshot_free(&v->snap);
    v->snap = next;
    v->err[0] = 0;
    time_t t = time(NULL);
    struct tm tm;
    strftime(v->when, sizeof v->when, "%H:%M:%S", localtime_r(&t, &tm));
}

/* The frame's lines, malloc'd text (NULL when out of memory). */
static char *frame_text(const struct top_view *v)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    top_frame_write(f, &v->snap, &v->cols);
    fclose(f);
    return buf;
}

/* One line of text at row, cut to the window's width. */
static void put_line(int row, const char *text, size_t len)
{
    size_t cols = COLS > 0 ? (size_t)COLS : 0;
    mvaddnstr(row, 0, text, (int)(len < cols ? len : cols));
}

static void draw(const struct top_view *v)
{
    erase();
    char status[256];
    snprintf(status, sizeof status, "kairos top - every %.1f s - %s - q quits", v->interval,
             v->when[0] ? v->when : "--:--:--");
    attron(A_REVERSE);
    mvhline(0, 0, ' ', COLS);
    put_line(0, status, strlen(status));
    attroff(A_REVERSE);
    int row = 1;
    if (v->err[0]) {
        attron(A_BOLD);
        put_line(row++, v->err, strlen(v->err));
        attroff(A_BOLD);
    }
    char *text = frame_text(v);
    const char *line = text ? text : "out of memory\n";
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (row == LINES - 1 && end && end[1]) {
            const char *more = "(more below: enlarge the terminal)";
            put_line(row, more, strlen(more));
            break;
        }
        if (row >= LINES)
            break;
        put_line(row++, line, len);
        line += len + (end ? 1 : 0);
    }
    free(text);
    refresh();
}

/* Until q or a signal. 0, or -ENOTTY when the terminal is unknown to ncurses. */
static int interactive(struct top_view *v)
{
    setlocale(LC_ALL, "");
    SCREEN *screen = newterm(NULL, stdout, stdin);
    if (!screen)
        return -ENOTTY;
    struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: getch returns */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    cbreak();
    noecho();
    curs_set(0);
    keypad(stdscr, TRUE);
    long long interval_ms = llround(v->interval * 1000), next = now_ms() + interval_ms;
    while (!stop_requested) {
        if (now_ms() >= next) {
            view_fetch(v);
            next = now_ms() + interval_ms;
        }
        draw(v);
        long long left = next - now_ms();
        timeout(left > 0 ? (int)left : 0);
        int ch = getch();
        if (ch == 'q' || ch == 'Q')
            break;
        if (ch == ' ' || ch == 'r')
            next = 0; /* refresh now; KEY_RESIZE and the rest only redraw */
    }
    endwin();
    delscreen(screen);
    return 0;
}

static int parse_interval(const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= INTERVAL_MIN && v <= INTERVAL_MAX)) {
        fprintf(stderr, "kairos top: --interval %s: give seconds from %.1f to %.0f\n", text,
                INTERVAL_MIN, INTERVAL_MAX);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

int cmd_top(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"once", no_argument, NULL, '1'},
        {"socket", required_argument, NULL, 's'},
        {"columns", required_argument, NULL, 'o'},
        {"wide", no_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct top_view v = {.interval = 1.0};
    const char *socket_path = NULL, *chosen = COLUMNS_TOP_DEFAULT;
    bool once = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:1s:o:wh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            chosen = optarg;
            break;
        case 'w':
            chosen = COLUMNS_TOP_WIDE;
            break;
        case 'i':
            if (parse_interval(optarg, &v.interval))
                return 2;
            break;
        case '1':
            once = true;
            break;
        case 's':
            socket_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kairos top: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (columns_parse(chosen, &v.cols, v.err, sizeof v.err)) {
        fprintf(stderr, "kairos top: --columns: %s\n", v.err);
        return 2;
    }
    v.socket_path = client_socket_path(socket_path);
    view_fetch(&v);
    if (v.err[0]) {
        fprintf(stderr, "kairos top: %s\n", v.err);
        return 1;
    }
    bool plain = once || !isatty(STDOUT_FILENO);
    if (!plain && interactive(&v)) {
        const char *term = getenv("TERM");
        fprintf(stderr, "kairos top: terminal type '%s' unknown to ncurses; one frame follows\n",
                term ? term : "");
        plain = true;
    }
    int rc = plain && top_frame_write(stdout, &v.snap, &v.cols) ? 1 : 0;
    ps_snapshot_free(&v.snap);
    return rc;
}
