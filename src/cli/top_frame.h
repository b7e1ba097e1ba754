/* top_frame.h - one frame of `kairos top` as plain text: per GPU its tenants with
 * the columns chosen (columns.h): by default target against achieved share (last
 * 100 ms, last minute), share, limit and memory. No terminal here: cmd_top.c draws the lines with ncurses (cut
 * to the window's size) or prints them as they are (--once), and tests read them.
 *
 * Thread rules: no state.
 */
#ifndef KAIROS_CLI_TOP_FRAME_H
#define KAIROS_CLI_TOP_FRAME_H

#include <stdio.h>

#include "cli/columns.h"
#include "cli/ps_view.h"

/* Writes the frame of s to out with the columns cols (their name width is fitted
 * to s's tenants), lines ending in '\n'. 0 or -EIO. */
int top_frame_write(FILE *out, const struct ps_snapshot *s, const struct columns *cols);

#endif /* KAIROS_CLI_TOP_FRAME_H */
