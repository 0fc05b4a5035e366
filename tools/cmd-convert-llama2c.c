/* cmd-convert-llama2c.c -- placeholder until the subcommand lands. */
#include "commands.h"

#include <stdio.h>

int loom_cmd_convert_llama2c(int argc, char ** argv) {
    (void)argc;
    fprintf(stderr, "loom %s: not built yet\n", argv[0]);
    return 1;
}
