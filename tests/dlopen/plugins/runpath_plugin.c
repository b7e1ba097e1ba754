/* runpath_plugin.c - a library found only through dlopen_app's RUNPATH ($ORIGIN/plugins). */
#include <stdio.h>

int runpath_main(int argc, char **argv);

int runpath_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("runpath_plugin: ran\n");
    return fflush(stdout); /* in a new namespace, a libc of its own that exit() never flushes */
}
