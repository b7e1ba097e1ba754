/* commands.h - the subcommands of the kairos CLI, one file each (cmd_<name>.c).
 *
 * Each takes the arguments after its name (argv[0] is the subcommand) and returns
 * the process exit code: 0 success, 1 runtime error, 2 usage error.
 */
#ifndef KAIROS_CLI_COMMANDS_H
#define KAIROS_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_cdi(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_tenant(int argc, char **argv);
int cmd_shim(int argc, char **argv);
/* kairos tenant set: kairos run's tenant settings without a command (cmd_run.c). */
int cmd_run_tenant_set(int argc, char **argv);
/* Whether kairos run could start a command now (cmd_run.c): the shim found, and the
 * kairosd its settings name listening. 0, or run's exit code after a message that
 * begins with prog and says what to do (how to start kairosd). */
int cmd_run_daemon_check(const char *prog);

#endif /* KAIROS_CLI_COMMANDS_H */
