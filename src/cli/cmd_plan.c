/* cmd_plan.c - `kairos plan`: placeholder until the planner lands (issue 5). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_plan(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kairos plan: not available in this build yet\n");
    return 1;
}
