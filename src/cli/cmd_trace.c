/* cmd_trace.c - `kairos trace` (being written). */
#include <stdio.h>

#include "cli/commands.h"

int cmd_trace(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kairos trace: not available in this build yet\n");
    return 1;
}
