/* cmd-gen-model.c -- `loom gen-model`: write a llama or qwen2 GGUF with random weights of a named or given shape. */
#include "cli-util.h"
#include "commands.h"
#include "loom-convert.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom gen-model (--preset NAME | --dim N --hidden N --layers N --heads N [--kv-heads N] --vocab N --ctx N)\n"
            "                      [--type f32|f16|bf16] [--tied] [--seed N] [--tokenizer TOKENIZER.bin | --vocab-from VOCAB.gguf]\n"
            "                      [--arch llama|qwen2] [--rope-freq-base N] [--rope-scaling none|linear|yarn] [--rope-scale N]\n"
            "                      [--yarn-orig-ctx N] [--rope-freqs] [--chat-template TEXT] -o OUT.gguf\n"
            "  presets: 260k, 15m, 110m (llama2.c family), 1b (TinyLlama 1.1B), 7b (Llama-2 7B)\n"
            "  --tokenizer takes a llama2.c tokenizer file (e.g. the Llama-2 vocabulary tokenizer.bin);\n"
            "  --vocab-from copies the tokenizer.* keys of a GGUF file (e.g. ggml-vocab-llama-bpe.gguf) and\n"
            "  sizes the model's vocabulary by it (--vocab, if given, must agree); without either the\n"
            "  vocabulary is byte-level. --arch qwen2 adds q/k/v biases (and the file's RoPE is NeoX-paired);\n"
            "  --rope-scaling writes the scaling type with --rope-scale as its factor (default 4), --yarn-orig-ctx\n"
            "  the original context (default --ctx); --rope-freqs writes a rope_freqs.weight of Llama 3.1's shape.\n");
}

int loom_cmd_gen_model(int argc, char ** argv) {
    enum { O_PRESET = 256, O_TYPE, O_TIED, O_SEED, O_TOK, O_DIM, O_HID, O_LAYERS, O_HEADS, O_KV, O_VOCAB, O_CTX,
           O_ARCH, O_BASE, O_SCALING, O_SCALE, O_ORIG, O_FREQS, O_TMPL, O_VFROM };
    static const struct option opts[] = {
        {"preset", required_argument, 0, O_PRESET}, {"type", required_argument, 0, O_TYPE},
        {"tied", no_argument, 0, O_TIED},          {"seed", required_argument, 0, O_SEED},
        {"tokenizer", required_argument, 0, O_TOK}, {"vocab-from", required_argument, 0, O_VFROM},
        {"dim", required_argument, 0, O_DIM},
        {"hidden", required_argument, 0, O_HID},   {"layers", required_argument, 0, O_LAYERS},
        {"heads", required_argument, 0, O_HEADS},  {"kv-heads", required_argument, 0, O_KV},
        {"vocab", required_argument, 0, O_VOCAB},  {"ctx", required_argument, 0, O_CTX},
        {"arch", required_argument, 0, O_ARCH},    {"rope-freq-base", required_argument, 0, O_BASE},
        {"rope-scaling", required_argument, 0, O_SCALING}, {"rope-scale", required_argument, 0, O_SCALE},
        {"yarn-orig-ctx", required_argument, 0, O_ORIG}, {"rope-freqs", no_argument, 0, O_FREQS},
        {"chat-template", required_argument, 0, O_TMPL},
        {"output", required_argument, 0, 'o'},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct loom_gen_params p = {0};
    p.type = LOOM_TYPE_F32;
    p.seed = 42;
    const char * out = NULL;
    bool have_preset = false, have_scale = false;
    long long v;
    double d;
    long long dims[7] = {0};  /* dim hidden layers heads kv vocab ctx */
    static const char * const size_opts[7] = {"--dim", "--hidden", "--layers", "--heads", "--kv-heads", "--vocab", "--ctx"};
    opterr = 0;
    optind = 1;
    int c;
    cli_log_setup(LOOM_LOG_WARN);
    while ((c = cli_getopt(argc, argv, ":o:h", opts)) != -1) {
        bool ok = true;
        switch (c) {
        case O_PRESET:
            ok = loom_gen_preset(optarg, &p) == LOOM_OK;
            if (!ok) fprintf(stderr, "loom gen-model: %s\n", cli_last_error("unknown preset"));
            have_preset = true;
            break;
        case O_TYPE:
            if (!strcmp(optarg, "f32")) p.type = LOOM_TYPE_F32;
            else if (!strcmp(optarg, "f16")) p.type = LOOM_TYPE_F16;
            else if (!strcmp(optarg, "bf16")) p.type = LOOM_TYPE_BF16;
            else {
                fprintf(stderr, "loom gen-model: invalid value '%s' for --type (f32, f16, bf16)\n", optarg);
                ok = false;
            }
            break;
        case O_TIED: p.tied = true; break;
        case O_SEED: ok = cli_parse_u64("gen-model", "--seed", optarg, UINT64_MAX, &p.seed); break;
        case O_TOK: p.tokenizer_path = optarg; break;
        case O_VFROM: p.vocab_path = optarg; break;
        case O_TMPL: p.chat_template = optarg; break;
        case O_FREQS: p.rope_freqs = true; break;
        case O_ARCH:
            if (!strcmp(optarg, "llama")) p.arch = LOOM_ARCH_LLAMA;
            else if (!strcmp(optarg, "qwen2")) p.arch = LOOM_ARCH_QWEN2;
            else {
                fprintf(stderr, "loom gen-model: invalid value '%s' for --arch (llama, qwen2)\n", optarg);
                ok = false;
            }
            break;
        case O_SCALING:
            if (!strcmp(optarg, "none")) p.rope_scaling = LOOM_ROPE_SCALING_NONE;
            else if (!strcmp(optarg, "linear")) p.rope_scaling = LOOM_ROPE_SCALING_LINEAR;
            else if (!strcmp(optarg, "yarn")) p.rope_scaling = LOOM_ROPE_SCALING_YARN;
            else {
                fprintf(stderr, "loom gen-model: invalid value '%s' for --rope-scaling (none, linear, yarn)\n", optarg);
                ok = false;
            }
            break;
        case O_BASE:
            ok = cli_parse_float("gen-model", "--rope-freq-base", optarg, 1.0, 1e11, &d);
            p.rope_freq_base = (float)d;
            break;
        case O_SCALE:
            ok = cli_parse_float("gen-model", "--rope-scale", optarg, 1e-3, 1e5, &d);
            p.rope_scale = (float)d;
            have_scale = true;
            break;
        case O_ORIG:
            ok = cli_parse_int("gen-model", "--yarn-orig-ctx", optarg, 1, 1 << 24, &v);
            p.n_ctx_orig = (int32_t)v;
            break;
        case O_DIM: case O_HID: case O_LAYERS: case O_HEADS: case O_KV: case O_VOCAB: case O_CTX:
            ok = cli_parse_int("gen-model", size_opts[c - O_DIM], optarg, 1, 1 << 24, &v);
            dims[c - O_DIM] = v;
            break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return cli_stdout_ok("gen-model") ? 0 : 1;
        default: cli_option_error("gen-model", c); return 1; /* ':' or '?' */
        }
        if (!ok) return 1;
    }
    /* explicit sizes override the preset's */
    int32_t * fields[7] = {&p.n_embd, &p.n_ff, &p.n_layer, &p.n_head, &p.n_head_kv, &p.n_vocab, &p.n_ctx};
    for (int i = 0; i < 7; i++) {
        if (dims[i]) *fields[i] = (int32_t)dims[i];
    }
    if (!dims[4] && dims[3] && !have_preset) p.n_head_kv = p.n_head;
    if (p.vocab_path && !dims[5]) p.n_vocab = 0; /* the vocabulary file's size */
    if (!cli_no_more_args("gen-model", argc, argv)) return 1;
    if (!have_scale) p.rope_scale = 4.0f;
    if (p.tokenizer_path && p.vocab_path) {
        fprintf(stderr, "loom gen-model: --tokenizer and --vocab-from both give the vocabulary: pass one\n");
        return 1;
    }
    if (p.rope_freqs && p.arch != LOOM_ARCH_LLAMA) {
        fprintf(stderr, "loom gen-model: --rope-freqs is for --arch llama (Llama 3.1's tensor)\n");
        return 1;
    }
    if (!out) {
        fprintf(stderr, "loom gen-model: need -o OUT.gguf (see -h)\n");
        return 1;
    }
    if (!have_preset && (!p.n_embd || !p.n_ff || !p.n_layer || !p.n_head || (!p.n_vocab && !p.vocab_path) || !p.n_ctx)) {
        fprintf(stderr, "loom gen-model: give --preset or all of --dim --hidden --layers --heads --vocab (or --vocab-from) --ctx\n");
        return 1;
    }
    int64_t t0 = loom_time_us();
    const enum loom_status st = loom_gen_model(&p, out);
    if (st != LOOM_OK) {
        fprintf(stderr, "loom gen-model: %s\n", cli_last_error(st == LOOM_ERR_OOM ? "cannot write the model: out of memory" : "cannot write the model"));
        return 1;
    }
    fprintf(stderr, "wrote %s in %.1f s\n", out, (loom_time_us() - t0) / 1e6);
    return 0;
}
