/* loom.c -- the `loom` command line: dispatches to one subcommand. */
#include "cli-devices.h"
#include "cli-util.h"
#include "commands.h"
#include "loom-sim.h"

#include <stdio.h>

#ifndef LOOM_VERSION
#define LOOM_VERSION "0.1.0"
#endif
#include <string.h>
#include <unistd.h>

struct command {
    const char * name;
    int (*fn)(int argc, char ** argv);
    const char * help;
};

static const struct command commands[] = {
    {"run", loom_cmd_run, "generate text with a GGUF model"},
    {"chat", loom_cmd_chat, "chat with a GGUF model in its chat template"},
    {"serve", loom_cmd_serve, "serve a GGUF model over HTTP (OpenAI's API)"},
    {"info", loom_cmd_info, "print a GGUF file's header, metadata and tensors"},
    {"tokenize", loom_cmd_tokenize, "print the token ids and pieces of a text"},
    {"convert-llama2c", loom_cmd_convert_llama2c, "convert a llama2.c checkpoint and tokenizer to GGUF"},
    {"gen-model", loom_cmd_gen_model, "write a llama or qwen2 GGUF with random weights"},
    {"perplexity", loom_cmd_perplexity, "measure a model's perplexity on a text"},
    {"quantize", loom_cmd_quantize, "write a model with quantized weights (Q4_K_M, Q8_0, ...)"},
    {"bench", loom_cmd_bench, "measure prompt processing and generation speed"},
    {"test-ops", loom_cmd_test_ops, "check every op of a device against a reference"},
};

static void usage(FILE * f) {
    fprintf(f, "usage: loom COMMAND [options]   (loom COMMAND -h for a command's options)\n"
               "       loom --list-devices [--json]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        fprintf(f, "  %-16s %s\n", commands[i].name, commands[i].help);
    }
}

int main(int argc, char ** argv) {
    /* output to a file or pipe is written in one go where it fits 64 KiB (help texts, listings), so
     * that a failed write happens in cli_flush, which keeps its errno for the message ("No space
     * left on device"), not inside a printf that leaves only stdout's error flag */
    static char stdout_buf[1 << 16]; /* glibc takes the size only with a buffer */
    if (!isatty(STDOUT_FILENO)) setvbuf(stdout, stdout_buf, _IOFBF, sizeof stdout_buf);
    (void)loom_sim_register_env_devices(); /* LOOM_SIM_DEVICES=N: sim0.. for tests of offload without a GPU */
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("loom %s\n", LOOM_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "help") && argc > 2) {
        /* `loom help CMD` is `loom CMD -h` */
        char * h[] = {argv[2], "-h", NULL};
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
            if (!strcmp(argv[2], commands[i].name)) return commands[i].fn(2, h);
        }
        fprintf(stderr, "loom help: unknown command '%s' (see loom -h)\n", argv[2]);
        return 1;
    }
    if (!strcmp(argv[1], "--list-devices")) { /* as every command's --list-devices */
        const bool json = argc == 3 && !strcmp(argv[2], "--json");
        if (argc > 3 || (argc == 3 && !json)) {
            fprintf(stderr, "loom: --list-devices takes only --json\n");
            return 1;
        }
        cli_list_devices(json);
        return cli_stdout_ok("--list-devices") ? 0 : 1;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return cli_stdout_ok("help") ? 0 : 1;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "loom: unknown command '%s' (see loom -h)\n", argv[1]);
    return 1;
}
