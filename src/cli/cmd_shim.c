/* cmd_shim.c - `kairos shim`: prints the path of the libkairos.so that kairos run
 * and kairos trace preload (cli/shim_path.h), so that a recipe can preload it by
 * hand on a source build and on a packaged node alike:
 *   KAIROS_MEM=8G LD_PRELOAD="$(kairos shim)" CMD
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/shim_path.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kairos shim\n"
            "\n"
            "Prints the absolute path of libkairos.so, the shim that kairos run and kairos\n"
            "trace preload: $KAIROS_SHIM when set, else the one built or installed with\n"
            "this kairos. For a process that caps itself without a daemon:\n"
            "  KAIROS_MEM=8G LD_PRELOAD=\"$(kairos shim)\" CMD\n"
            "\n"
            "options:\n"
            "  -h, --help   show this text\n");
}

int cmd_shim(int argc, char **argv)
{
    static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "kairos shim: takes no arguments ('%s')\n", argv[optind]);
        return 2;
    }
    char path[PATH_MAX];
    if (shim_path_find(path, sizeof path) != 0) {
        fprintf(stderr, "kairos shim: cannot find libkairos.so next to kairos nor at its "
                "install path; build it, reinstall the kairos package, or set "
                "KAIROS_SHIM=/path/to/libkairos.so\n");
        return 1;
    }
    char real[PATH_MAX];
    printf("%s\n", realpath(path, real) ? real : path);
    return 0;
}
