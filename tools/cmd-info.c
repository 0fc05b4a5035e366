/* cmd-info.c -- placeholder until the subcommand lands. */
#include "commands.h"

#include <stdio.h>

int loom_cmd_info(int argc, char ** argv) {
    (void)argc;
    fprintf(stderr, "loom %s: not built yet\n", argv[0]);
    return 1;
}
