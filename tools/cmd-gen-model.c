/* cmd-gen-model.c -- placeholder until the subcommand lands. */
#include "commands.h"

#include <stdio.h>

int loom_cmd_gen_model(int argc, char ** argv) {
    (void)argc;
    fprintf(stderr, "loom %s: not built yet\n", argv[0]);
    return 1;
}
