/* cli-split.h -- the multi-device options the model-loading commands share: -sm/--split-mode,
 * -ts/--tensor-split, -mg/--main-gpu (as the field spells them) and the -dev list check. */
#ifndef LOOM_TOOLS_CLI_SPLIT_H
#define LOOM_TOOLS_CLI_SPLIT_H

#include "loom-llama.h"

#include <getopt.h>
#include <stdbool.h>

enum { CLI_OPT_SPLIT_MODE = 1000, CLI_OPT_TENSOR_SPLIT, CLI_OPT_MAIN_GPU };

/* Entries for a command's getopt table. */
#define CLI_SPLIT_LONG_OPTS                                                                                           \
    {"split-mode", required_argument, 0, CLI_OPT_SPLIT_MODE}, {"sm", required_argument, 0, CLI_OPT_SPLIT_MODE},       \
    {"tensor-split", required_argument, 0, CLI_OPT_TENSOR_SPLIT}, {"ts", required_argument, 0, CLI_OPT_TENSOR_SPLIT}, \
    {"main-gpu", required_argument, 0, CLI_OPT_MAIN_GPU}, {"mg", required_argument, 0, CLI_OPT_MAIN_GPU}

/* Lines for a command's help. */
#define CLI_SPLIT_HELP                                                                                        \
    "  -sm, --split-mode MODE    several devices: layer (default: layers spread over them, a prompt\n"        \
    "                            pipelined), row (tensor parallelism: heads and feed-forward rows split,\n"   \
    "                            partial sums all-reduced; NCCL on CUDA), none (only the main device)\n"      \
    "  -ts, --tensor-split A,B,..  each device's share (default: in proportion to free memory)\n"             \
    "  -mg, --main-gpu I         the device (index into -dev's list) of -sm none, and the output's with row\n"

struct cli_split {
    enum loom_split_mode mode;
    float ts[LOOM_MAX_DEVICES];
    long long main_gpu;
};

/* Defaults: LAYER, shares by free memory, main device 0. */
void cli_split_init(struct cli_split * s);
/* Handles option 'c' (one of CLI_OPT_*) with value 'arg'; false (reported, naming 'cmd') for a bad value. */
bool cli_split_option(const char * cmd, int c, const char * arg, struct cli_split * s);
/* Copies the options into the model parameters. */
void cli_split_apply(const struct cli_split * s, struct loom_model_params * mp);
/* Checks a -dev list: each comma-separated name a registered device other than the CPU, none twice.
 * False (one line reported) otherwise. */
bool cli_check_devices(const char * cmd, const char * list);

#endif
