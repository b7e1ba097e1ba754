/* main.c - the kairos command line: one table of subcommands, dispatch, usage.
 *
 * Every subcommand lives in its own cmd_<name>.c; this file only knows their names
 * and one-line descriptions, which are also what `kairos help` prints.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"run", cmd_run, "start a command as a tenant with a GPU memory quota"},
    {"tenant", cmd_tenant, "set a tenant's quota, policy and members; admit a process"},
    {"ps", cmd_ps, "list tenants, their processes, GPU memory held and quotas"},
    {"top", cmd_top, "watch tenants' time shares and memory per GPU, live"},
    {"trace", cmd_trace, "decode the GPU driver boundary of a command, or replay a recording"},
    {"plan", cmd_plan, "pack workloads onto MIG slices and time shares on the fewest GPUs"},
    {"cdi", cmd_cdi, "write the CDI specification that gives containers their tenant"},
    {"profile", cmd_profile, "measure a workload's throughput per GPU fraction for kairos plan"},
    {"shim", cmd_shim, "print the path of libkairos.so, for LD_PRELOAD by hand"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: kairos <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-8s %s\n", "help", "show this text; 'kairos help COMMAND' shows its usage");
    fprintf(out, "  %-8s %s\n", "version", "print the version");
    fprintf(out, "\n'kairos <command> --help' describes a command; man kairos-<command> has more.\n");
}

static const struct command *find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return &commands[i];
    return NULL;
}

static int unknown(const char *name)
{
    fprintf(stderr, "kairos: unknown command '%s'; 'kairos help' lists the commands\n", name);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        if (argc < 3 || strcmp(name, "help")) {
            usage(stdout);
            return 0;
        }
        if (argc > 3) {
            fprintf(stderr, "kairos help: give one command at most\n");
            return 2;
        }
        const struct command *cmd = find(argv[2]);
        if (!cmd)
            return unknown(argv[2]);
        char *help_argv[] = {argv[2], "--help", NULL};
        return cmd->run(2, help_argv);
    }
    if (!strcmp(name, "version") || !strcmp(name, "--version")) {
        printf("kairos %s\n", KAIROS_VERSION);
        return 0;
    }
    const struct command *cmd = find(name);
    return cmd ? cmd->run(argc - 1, argv + 1) : unknown(name);
}
