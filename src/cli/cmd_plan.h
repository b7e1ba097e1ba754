/* cmd_plan.h - helpers shared by `kairos plan` (cmd_plan.c), its benchmark
 * (cmd_plan_bench.c) and its trace replay (cmd_plan_trace.c). */
#ifndef KAIROS_CLI_CMD_PLAN_H
#define KAIROS_CLI_CMD_PLAN_H

#include "kairos/plan.h"

int plan_cli_error(enum plan_format fmt, const char *msg, int code);
int plan_report_online(const struct plan_input *in, const struct plan *p,
                       const struct plan_moves *mv, enum plan_format fmt);
int plan_bench(int argc, char **argv);
/* `kairos plan trace` (cmd_plan_trace.c). */
int plan_trace_cmd(int argc, char **argv);
/* `kairos plan bench --traces[=DIR]`: replay each DIR/<case>/{cluster,trace}.yaml. */
int plan_trace_bench(const char *dir);
/* Strict option values: a whole number in lo..hi / seconds in (0, 86400]; -EINVAL else. */
int plan_cli_count(const char *s, long lo, long hi, int *out);
int plan_cli_seconds(const char *s, double *out);
/* Seconds on the monotonic clock (for wall-clock timings). */
double plan_cli_monotonic(void);

#endif /* KAIROS_CLI_CMD_PLAN_H */
