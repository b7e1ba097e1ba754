/* cmd_plan.h - helpers shared by `kairos plan` (cmd_plan.c) and its benchmark
 * (cmd_plan_bench.c). */
#ifndef KAIROS_CLI_CMD_PLAN_H
#define KAIROS_CLI_CMD_PLAN_H

#include "kairos/plan.h"

int plan_cli_error(enum plan_format fmt, const char *msg, int code);
int plan_report_online(const struct plan_input *in, const struct plan *p,
                       const struct plan_moves *mv, enum plan_format fmt);
int plan_bench(int argc, char **argv);

#endif /* KAIROS_CLI_CMD_PLAN_H */
