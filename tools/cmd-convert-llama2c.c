/* cmd-convert-llama2c.c -- `loom convert-llama2c`: a llama2.c checkpoint + tokenizer -> GGUF. */
#include "cli-util.h"
#include "commands.h"
#include "loom-convert.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE * f) {
    fprintf(f, "usage: loom convert-llama2c --model CHECKPOINT.bin --tokenizer TOKENIZER.bin -o OUT.gguf\n");
}

int loom_cmd_convert_llama2c(int argc, char ** argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"tokenizer", required_argument, 0, 'k'},
        {"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *model = NULL, *tok = NULL, *out = NULL;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":m:o:h", opts)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'k': tok = optarg; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return cli_stdout_ok("convert-llama2c") ? 0 : 1;
        default: cli_option_error("convert-llama2c", c); return 1; /* ':' or '?' */
        }
    }
    if (!cli_no_more_args("convert-llama2c", argc, argv)) return 1;
    if (!model || !tok || !out) {
        fprintf(stderr, "loom convert-llama2c: need --model, --tokenizer and -o (see -h)\n");
        return 1;
    }
    cli_log_setup(LOOM_LOG_WARN);
    if (loom_convert_llama2c(model, tok, out) != LOOM_OK) {
        fprintf(stderr, "loom convert-llama2c: %s\n", cli_last_error("conversion failed"));
        return 1;
    }
    fprintf(stderr, "wrote %s\n", out);
    return 0;
}
