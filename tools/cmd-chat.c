/* cmd-chat.c -- `loom chat` (and `loom run -cnv`): a conversation with a model in its chat template,
 * user turns read from a terminal or a pipe, replies streamed, the KV cache kept across turns. */
#include "cli-util.h"
#include "commands.h"
#include "gen-opts.h"
#include "loom-llama.h"
#include "loom-chat.h"
#include "loom-sampler.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The command the user typed, for messages: "chat", or "run" for `loom run -cnv`. */
static const char * g_cmd = "chat";

struct chat_opts {
    struct gen_opts g; /* what chat shares with run */
    const char * system;
    const char * system_file; /* -f: the system message read from a file (- : standard input) */
    const char * template_name;
    long long keep;
    bool context_shift;
};

static void usage(FILE * f) {
    fprintf(f,
            "usage: loom chat -m MODEL.gguf [options]      (also: loom run -cnv ...)\n"
            "\n"
            "Reads one user message per line from the terminal or a pipe and streams the model's reply;\n"
            "'/exit' or the end of the input ends the chat. Ctrl-C stops a reply; a second Ctrl-C (or one at\n"
            "the prompt) ends the chat, with status 130. Timings go to stderr at the end.\n"
            "\n"
            "  -m, --model FILE          GGUF model (required)\n"
            "  -sys, --system-prompt TEXT  the system message (also -p, --prompt; empty: none)\n"
            "  -f, --file FILE           read the system message from FILE (one trailing newline dropped)\n"
            "      --chat-template NAME  the format, overriding the file's tokenizer.chat_template: chatml,\n"
            "                            llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1,\n"
            "                            mistral-v3, mistral-v3-tekken, mistral-v7, llama3, phi3, gemma,\n"
            "                            zephyr, deepseek, deepseek2, deepseek3\n"
            "  -n, --n-predict N         tokens per reply at most (default -1: until the end of the turn; -2: also\n"
            "                            until the context is full, the chat going on; also --predict)\n"
            "  -c, --ctx-size N          context size in tokens (default: the training context, at most 4096)\n"
            "      --context-shift       when the context is full, drop the oldest turns (after --keep) and go on\n"
            "                            (a reply that fills it alone drops its own older half); without it the\n"
            "                            chat ends with a message\n"
            "      --keep N              tokens after BOS never dropped by a shift (default 0; -1: the whole first turn)\n"
            GEN_OPTS_HELP_CONTEXT
            GEN_OPTS_HELP_SAMPLING
            GEN_OPTS_HELP_CACHE
            "      --verbose-prompt      print, for every evaluation, the token ids evaluated and the position\n"
            "  -v, --verbose             print loading details\n"
            "  -h, --help                this help\n"
            "\n" CLI_LONG_OPTION_HELP);
}

enum { O_SYS = 256, O_TMPL, O_SHIFT, O_KEEP };

static const struct option long_opts[] = {
    GEN_OPTS_LONG_OPTS,
    {"sys", required_argument, 0, O_SYS},         {"system-prompt", required_argument, 0, O_SYS},
    {"prompt", required_argument, 0, 'p'},        {"chat-template", required_argument, 0, O_TMPL},
    {"file", required_argument, 0, 'f'},
    {"context-shift", no_argument, 0, O_SHIFT},   {"keep", required_argument, 0, O_KEEP},
    {"help", no_argument, 0, 'h'},                {0, 0, 0, 0},
};

/* Returns 0 to go on, 1 for an error (reported), 2 for -h. */
static int parse(int argc, char ** argv, struct chat_opts * o) {
    *o = (struct chat_opts){0};
    gen_opts_init(&o->g);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, ":" GEN_OPTS_SHORT "p:f:h", long_opts)) != -1) {
        const int shared = gen_opts_option(g_cmd, c, optarg, &o->g);
        if (shared < 0) return 1;
        if (shared) continue;
        bool ok = true;
        switch (c) {
        case 'p':
        case O_SYS: o->system = optarg; break;
        case 'f': o->system_file = optarg; break;
        case O_TMPL: o->template_name = optarg; break;
        case O_SHIFT: o->context_shift = true; break;
        case O_KEEP: ok = cli_parse_int(g_cmd, "--keep", optarg, -1, 1 << 24, &o->keep); break;
        case 'h': usage(stdout); return 2;
        default: cli_option_error(g_cmd, c); return 1;
        }
        if (!ok) return 1;
    }
    if (!cli_no_more_args(g_cmd, argc, argv)) return 1;
    if (o->system && o->system_file) {
        fprintf(stderr, "loom %s: give the system message with %s or -f, not both\n", g_cmd, strcmp(g_cmd, "run") ? "-sys/-p" : "-p");
        return 1;
    }
    if (o->system_file && !strcmp(o->system_file, "-")) {
        fprintf(stderr, "loom %s: -f - would read the system message from standard input, where the chat reads the user's "
                        "messages; give a file\n", g_cmd);
        return 1;
    }
    return gen_opts_check(g_cmd, &o->g) ? 0 : 1;
}

/* ---------------------------------------------------------------- Ctrl-C */

static volatile sig_atomic_t g_interrupts; /* Ctrl-C presses since the last user message */

static void on_sigint(int sig) {
    (void)sig;
    g_interrupts++;
}

/* ---------------------------------------------------------------- the conversation */

struct chat {
    const struct chat_opts * o;
    struct loom_model * model;
    const struct loom_vocab * vocab;
    struct loom_llama_context * lctx;
    struct loom_sampler * sampler;
    struct loom_detok * detok;
    float * logits;                  /* [n_vocab] scratch for --logit-bias and --ignore-eos, or NULL */
    enum loom_chat_template tmpl;
    int32_t eot_id;                  /* the template's end-of-turn token, or -1 */
    int32_t n_ctx, n_vocab, keep;    /* keep: tokens a shift never drops (BOS included; set by the first turn) */

    int32_t * tokens;                /* what the KV cache holds, in order */
    int32_t n_tokens, cap_tokens;
    int32_t * turn_start;            /* index in 'tokens' where each turn's first evaluated token is */
    int32_t reply_start;             /* index in 'tokens' of the reply's first token (the turn's prompt ends there) */
    int32_t n_turns, cap_turns;

    struct loom_chat_message * msgs; /* contents and roles owned (heap) */
    size_t n_msgs, cap_msgs;
    char * hist;                     /* the history as the template writes it, without the assistant's opening */
    char * closing;                  /* what the template writes after an assistant message ("<|im_end|>\n") */
    char * pending;                  /* the part of 'closing' not yet evaluated after the last reply */

    int64_t t_start;
    double t_load, t_prompt, t_eval;
    int n_prompt, n_eval;
};

/* The end of generation: the vocabulary's end-of-generation ids (EOS, EOT, EOM, the field's
 * end-of-turn markers) or the token the template closes turns with. */
static bool chat_is_eog(const struct chat * c, int32_t tok) {
    return loom_vocab_is_eog(c->vocab, tok) || (c->eot_id >= 0 && tok == c->eot_id);
}

static bool grow(void ** p, int32_t * cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    int32_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void * q = realloc(*p, (size_t)n * elem);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

static char * dup_n(const char * s, size_t n) {
    char * d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

static bool add_msg(struct chat * c, const char * role, const char * content, size_t len) {
    if (c->n_msgs == c->cap_msgs) {
        size_t n = c->cap_msgs ? 2 * c->cap_msgs : 16;
        struct loom_chat_message * m = realloc(c->msgs, n * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        c->cap_msgs = n;
    }
    char * r = dup_n(role, strlen(role)), * t = dup_n(content, len);
    if (!r || !t) {
        free(r), free(t);
        return false;
    }
    c->msgs[c->n_msgs++] = (struct loom_chat_message){r, t};
    return true;
}

/* The conversation so far in the template, with or without the assistant's opening (heap, or NULL). */
static char * format(const struct chat * c, bool add_ass) {
    int32_t n = loom_chat_apply(c->tmpl, c->msgs, c->n_msgs, add_ass, NULL, 0);
    if (n == LOOM_TOKEN_ERROR) return NULL;
    n = n < 0 ? -n : n;
    char * s = malloc((size_t)n + 1);
    if (s && loom_chat_apply(c->tmpl, c->msgs, c->n_msgs, add_ass, s, n + 1) != n) {
        free(s);
        return NULL;
    }
    return s;
}

static void print_tokens(const char * what, const int32_t * t, int32_t n, int32_t pos) {
    fprintf(stderr, "[%s: %d token%s at position %d:", what, n, cli_plural(n), pos);
    for (int32_t i = 0; i < n; i++) fprintf(stderr, " %d", t[i]);
    fprintf(stderr, "]\n");
}

/* Evaluates 'n' tokens at the end of the KV cache and appends them to 'tokens'. */
static bool eval(struct chat * c, const int32_t * t, int32_t n, bool prompt) {
    if (!grow((void **)&c->tokens, &c->cap_tokens, c->n_tokens + n, sizeof *c->tokens)) return false;
    if (c->o->g.verbose_prompt && prompt) print_tokens("eval", t, n, loom_llama_n_past(c->lctx));
    const int64_t t0 = loom_time_us();
    if (loom_llama_decode(c->lctx, t, n) != LOOM_OK) return false;
    const double ms = (loom_time_us() - t0) / 1000.0;
    if (prompt) c->t_prompt += ms, c->n_prompt += n;
    else c->t_eval += ms, c->n_eval += n;
    memcpy(c->tokens + c->n_tokens, t, (size_t)n * sizeof *t);
    c->n_tokens += n;
    return true;
}

/* Drops the cached tokens [from, to) (whole turns, or the oldest part of the reply being
 * generated), then evaluates what is left again (the positions of the later tokens change, so their
 * cache entries are recomputed). 'what' names the part dropped in the message. True when done,
 * false on an evaluation error. */
static bool drop_tokens(struct chat * c, int32_t from, int32_t to, const char * what) {
    const int32_t d = to - from;
    memmove(c->tokens + from, c->tokens + to, (size_t)(c->n_tokens - to) * sizeof *c->tokens);
    c->n_tokens -= d;
    int32_t k = 0;
    for (int32_t j = 0; j < c->n_turns; j++) {
        const int32_t b = c->turn_start[j];
        if (b <= from) c->turn_start[k++] = b;
        else if (b >= to) c->turn_start[k++] = b - d;
    }
    c->n_turns = k;
    if (c->reply_start >= to) c->reply_start -= d;
    fprintf(stderr, "[context shift: dropped %d token%s%s after the first %d, %d kept]\n", d, cli_plural(d), what, from, c->n_tokens);
    loom_llama_kv_clear(c->lctx);
    const int32_t n = c->n_tokens;
    c->n_tokens = 0;
    return eval(c, c->tokens, n, true);
}

/* Frees at least 'need' cells by dropping the oldest whole turns after the kept tokens, never
 * touching the turn that starts at 'limit' (the current one). Returns 1 when done, 0 when the old
 * turns do not free enough (nothing dropped), -1 on an evaluation error. */
static int context_shift(struct chat * c, int32_t need, int32_t limit) {
    const int32_t from = c->keep < c->n_tokens ? c->keep : c->n_tokens;
    int32_t to = -1;
    for (int32_t j = 0; j < c->n_turns; j++) { /* the first turn boundary after 'from' that frees enough */
        const int32_t b = c->turn_start[j];
        if (b > from && b <= limit && b - from >= need) {
            to = b;
            break;
        }
    }
    if (to < 0 && limit > from && limit - from >= need) to = limit; /* everything before the current turn */
    if (to < 0) return 0;
    return drop_tokens(c, from, to, "") ? 1 : -1;
}

/* A reply longer than what the context leaves it: drops the older half of the reply generated so
 * far (at least 'need' tokens; never the kept tokens or the turn's prompt), as the field's
 * generation shifts a full context. 1 done, 0 when the reply has too few tokens, -1 on an error. */
static int reply_shift(struct chat * c, int32_t need) {
    const int32_t from = c->reply_start > c->keep ? c->reply_start : c->keep;
    const int32_t have = c->n_tokens - from, d = have / 2 > need ? have / 2 : need;
    if (have < d) return 0;
    return drop_tokens(c, from, from + d, " of the reply") ? 1 : -1;
}

/* Makes room for 'need' more tokens: 1 when there is room, 0 when there is none (reported: the chat
 * ends), -1 on an error. 'limit': the start of the turn a shift must keep; 'in_reply': a reply is
 * being printed (a message then starts on a new line). */
static int make_room(struct chat * c, int32_t need, int32_t limit, bool in_reply) {
    if (loom_llama_n_past(c->lctx) + need <= c->n_ctx) return 1;
    const char * nl = in_reply ? "\n" : "";
    if (need > c->n_ctx - c->keep) {
        fprintf(stderr, "%sloom %s: %d token%s do%s not fit the context of %d (%d kept); use a larger -c\n", nl, g_cmd, need, cli_plural(need),
                need == 1 ? "es" : "", c->n_ctx, c->keep);
        return 0;
    }
    if (!c->o->context_shift) {
        fprintf(stderr, "%sloom %s: the context is full (%d tokens); --context-shift drops the oldest turns and goes on\n", nl, g_cmd, c->n_ctx);
        return 0;
    }
    const int32_t over = loom_llama_n_past(c->lctx) + need - c->n_ctx;
    int r = context_shift(c, over, limit);
    if (r == 0 && in_reply) r = reply_shift(c, over); /* the reply alone fills the context: it goes on */
    if (r == 0) fprintf(stderr, "%sloom %s: the context is full (%d tokens) and no older turn is left to drop\n", nl, g_cmd, c->n_ctx);
    return r;
}

/* Tokenizes 'text' (template markers parsed as special tokens), BOS first on the first turn. */
static int32_t * tokenize(const struct chat * c, const char * text, bool first, int32_t * n) {
    const bool bos = first && loom_vocab_get_add_bos(c->vocab);
    int32_t k = loom_tokenize(c->vocab, text, strlen(text), bos, true, NULL, 0);
    if (k == LOOM_TOKEN_ERROR) return NULL;
    k = k < 0 ? -k : k;
    int32_t * t = malloc(((size_t)k + 1) * sizeof *t);
    if (t && loom_tokenize(c->vocab, text, strlen(text), bos, true, t, k + 1) != k) {
        free(t);
        return NULL;
    }
    *n = k;
    return t;
}

static void emit(struct chat * c, int32_t tok, char ** reply, size_t * len, size_t * cap) {
    const char * text;
    size_t n;
    if (loom_detok_push(c->detok, tok, &text, &n) != LOOM_OK || !n) return;
    fwrite(text, 1, n, stdout);
    cli_flush();
    if (*len + n + 1 > *cap) {
        size_t m = *cap ? *cap : 256;
        while (m < *len + n + 1) m *= 2;
        char * r = realloc(*reply, m);
        if (!r) return;
        *reply = r, *cap = m;
    }
    memcpy(*reply + *len, text, n);
    *len += n;
    (*reply)[*len] = 0;
}

/* One user message: the new part of the conversation evaluated, the reply generated and streamed.
 * Returns 1 to go on, 0 when the chat ends (context full, reported), -1 on an error. */
static int turn(struct chat * c, const char * line, size_t len) {
    const bool first = c->n_turns == 0;
    if (!add_msg(c, "user", line, len)) return -1;
    char * full = format(c, true);
    if (!full) return -1;
    /* the new text: the end of the last reply's turn, then what the template adds after the history
     * (the templates only append, so the history is a prefix; the common part otherwise) */
    size_t common = strlen(c->hist);
    if (strncmp(full, c->hist, common) != 0) {
        common = 0;
        while (c->hist[common] && c->hist[common] == full[common]) common++;
    }
    const size_t lp = strlen(c->pending), ld = strlen(full + common);
    char * delta = malloc(lp + ld + 1);
    if (!delta) {
        free(full);
        return -1;
    }
    memcpy(delta, c->pending, lp);
    memcpy(delta + lp, full + common, ld + 1);
    free(full);
    int32_t n = 0;
    int32_t * toks = tokenize(c, delta, first, &n);
    free(delta);
    if (!toks) return -1;
    const int32_t start = c->n_tokens;
    int r = make_room(c, n + 1, start, false);
    if (r == 1 && !grow((void **)&c->turn_start, &c->cap_turns, c->n_turns + 1, sizeof *c->turn_start)) r = -1;
    if (r == 1) {
        const int32_t at = c->n_tokens; /* after a shift, the turn starts where the kept tokens end */
        c->turn_start[c->n_turns++] = at;
        r = eval(c, toks, n, true) ? 1 : -1;
        for (int32_t i = 0; i < n; i++) loom_sampler_accept(c->sampler, toks[i]); /* the repetition penalty sees the prompt */
        if (first && c->o->keep < 0) c->keep = c->n_tokens;                       /* the whole first turn */
        else if (first) c->keep = (int32_t)c->o->keep + (loom_vocab_get_add_bos(c->vocab) ? 1 : 0);
        if (c->keep > c->n_ctx / 2) c->keep = c->n_ctx / 2;
    }
    free(toks);
    if (r != 1) return r;

    /* the reply */
    c->reply_start = c->n_tokens;
    char * reply = NULL;
    size_t rlen = 0, rcap = 0;
    loom_detok_reset(c->detok);
    int32_t n_gen = 0, eog = -1;
    while (c->o->g.n_predict < 0 || n_gen < c->o->g.n_predict) {
        if (g_interrupts) break;
        int32_t tok;
        const float * logits = gen_opts_logits(&c->o->g, c->vocab, loom_llama_get_logits(c->lctx), c->logits, c->n_vocab);
        if (loom_sampler_sample(c->sampler, logits, c->n_vocab, &tok) != LOOM_OK) {
            r = -1;
            break;
        }
        if (c->o->g.n_predict == -2 && loom_llama_n_past(c->lctx) + 1 > c->n_ctx) { /* -2: the reply ends with the context */
            fprintf(stderr, "\n(context full: %d tokens)\n", c->n_ctx);
            break;
        }
        r = make_room(c, 1, c->turn_start[c->n_turns - 1], true);
        if (r != 1) break;
        loom_sampler_accept(c->sampler, tok);
        if (!eval(c, &tok, 1, false)) {
            r = -1;
            break;
        }
        if (chat_is_eog(c, tok)) { /* evaluated, so that the cache holds the closed turn */
            eog = tok;
            break;
        }
        emit(c, tok, &reply, &rlen, &rcap);
        n_gen++;
    }
    const char * text;
    size_t tl;
    if (loom_detok_flush(c->detok, &text, &tl) == LOOM_OK && tl) fwrite(text, 1, tl, stdout);
    fputc('\n', stdout);
    cli_flush();
    if (r == -1) {
        free(reply);
        return -1;
    }
    /* the history with the reply as generated; the turn's closing text is evaluated with the next
     * message, less the end token when the reply ended with it (it is in the cache already) */
    const bool ok = add_msg(c, "assistant", reply ? reply : "", rlen);
    free(reply);
    if (!ok) return -1;
    char * hist = format(c, false);
    if (!hist) return -1;
    free(c->hist);
    c->hist = hist;
    const char * rest = c->closing;
    if (eog >= 0) {
        char piece[64];
        const int32_t k = loom_token_to_piece(c->vocab, eog, piece, sizeof piece, true);
        if (k > 0 && !strncmp(rest, piece, (size_t)k)) rest += k;
    }
    char * pending = dup_n(rest, strlen(rest));
    if (!pending) return -1;
    free(c->pending);
    c->pending = pending;
    return r;
}

static void print_timing(const char * what, double ms, int n, const char * unit) {
    fprintf(stderr, "%-17s = %10.2f ms / %5d %s", what, ms, n, unit);
    if (n > 0) fprintf(stderr, " (%8.2f ms per token, %8.2f tokens per second)", ms / n, 1000.0 * n / ms);
    fputc('\n', stderr);
}

static void print_timings(const struct chat * c) {
    fprintf(stderr, "\n%-17s = %10.2f ms\n", "load time", c->t_load);
    print_timing("prompt eval time", c->t_prompt, c->n_prompt, "tokens");
    print_timing("eval time", c->t_eval, c->n_eval, "runs  ");
    fprintf(stderr, "%-17s = %10.2f ms / %5d tokens\n", "total time", (loom_time_us() - c->t_start) / 1000.0, c->n_prompt + c->n_eval);
}

static void chat_free(struct chat * c) {
    loom_detok_free(c->detok);
    loom_sampler_free(c->sampler);
    loom_llama_context_free(c->lctx);
    loom_model_free(c->model);
    for (size_t i = 0; i < c->n_msgs; i++) free((char *)c->msgs[i].role), free((char *)c->msgs[i].content);
    free(c->msgs);
    free(c->tokens);
    free(c->turn_start);
    free(c->hist);
    free(c->closing);
    free(c->pending);
    free(c->logits);
}

static int fail(struct chat * c, const char * what) {
    cli_flush();
    fprintf(stderr, "loom %s: %s\n", g_cmd, cli_last_error(what));
    chat_free(c);
    return 1;
}

/* Loads the model, picks the template, creates the context, sampler and detokenizer. */
static int setup(struct chat * c, const struct chat_opts * o) {
    struct loom_model_file * file = NULL;
    if (loom_model_file_open(o->g.model, &file) != LOOM_OK) {
        cli_name_last_error(o->g.model, "cannot read the model");
        return fail(c, "cannot read the model");
    }
    const struct loom_hparams hp = *loom_model_file_hparams(file);
    if (!logit_bias_check(g_cmd, o->g.biases, o->g.n_biases, hp.n_vocab) || !gen_opts_check_cache(g_cmd, &o->g, &hp)) {
        loom_model_file_free(file);
        chat_free(c);
        return 1;
    }
    const int32_t n_train = hp.n_ctx_train;
    c->n_ctx = o->g.n_ctx > 0 ? (int32_t)o->g.n_ctx : n_train;
    if (o->g.n_ctx < 0 && c->n_ctx > 4096) c->n_ctx = 4096;
    struct loom_llama_context_params cp = loom_llama_context_default_params();
    cp.n_ctx = c->n_ctx;
    gen_opts_context_params(g_cmd, &o->g, &cp);
    struct loom_model_params mp = loom_model_default_params();
    gen_opts_model_params(&o->g, &mp);
    if (o->g.n_gpu_layers == CLI_NGL_AUTO && !cli_fit_layers(file, &mp, cp, o->g.fit_margin)) {
        loom_model_file_free(file);
        return fail(c, "cannot measure what fits on the device");
    }
    const enum loom_status st = loom_model_load_file(file, mp, &c->model);
    loom_model_file_free(file);
    if (st != LOOM_OK) {
        cli_name_last_error(o->g.model, "cannot load the model");
        return fail(c, "cannot load the model");
    }
    cli_warn_ctx_train(c->n_ctx, n_train);
    c->vocab = loom_model_vocab(c->model);
    c->n_vocab = loom_model_hparams(c->model)->n_vocab;
    if (o->template_name) {
        if (loom_chat_template_from_name(o->template_name, &c->tmpl) != LOOM_OK) return fail(c, "unknown chat template");
    } else if (!loom_chat_template_detect(loom_model_chat_template(c->model), &c->tmpl)) {
        fprintf(stderr, "warning: %s; using ChatML (--chat-template NAME picks another)\n",
                loom_model_chat_template(c->model) ? "the model's chat template is not one Loom recognizes" : "the model has no chat template");
    }
    const char * eot = loom_chat_template_eot_text(c->tmpl);
    c->eot_id = eot ? loom_vocab_find(c->vocab, eot, strlen(eot)) : -1;
    if (o->g.verbose) fprintf(stderr, "chat template: %s (end of turn: %s)\n", loom_chat_template_name(c->tmpl), c->eot_id >= 0 ? eot : "EOS");

    const enum loom_status cst = loom_llama_context_new(c->model, cp, &c->lctx);
    if (cst != LOOM_OK) {
        cli_hint_last_error(cst, "use a smaller -c");
        return fail(c, "cannot create the context");
    }
    struct loom_sampler_params sp = loom_sampler_default_params();
    gen_opts_sampler_params(&o->g, c->n_ctx, &sp);
    if (loom_sampler_new(&sp, &c->sampler) != LOOM_OK) return fail(c, "cannot create the sampler");
    if (gen_opts_needs_scratch(&o->g) && !(c->logits = malloc((size_t)c->n_vocab * sizeof *c->logits))) return fail(c, "out of memory");
    if (loom_detok_new(c->vocab, o->g.special ? LOOM_DETOK_SPECIAL : 0, &c->detok) != LOOM_OK) return fail(c, "cannot create the detokenizer");
    c->hist = dup_n("", 0);
    c->pending = dup_n("", 0);
    /* the closing text: what follows an assistant message's content (a marker no template trims) */
    const struct loom_chat_message probe = {"assistant", "\x01"};
    char buf[256];
    const int32_t nb = loom_chat_apply(c->tmpl, &probe, 1, false, buf, sizeof buf);
    const char * after = nb > 0 && nb < (int32_t)sizeof buf ? strrchr(buf, '\x01') : NULL;
    c->closing = after ? dup_n(after + 1, strlen(after + 1)) : dup_n("", 0);
    if (!c->hist || !c->pending || !c->closing) return fail(c, "out of memory");
    /* an empty system message is none, as in the field's tools (no empty system turn) */
    if (o->system && *o->system && !add_msg(c, "system", o->system, strlen(o->system))) return fail(c, "out of memory");
    return 0;
}

static int chat_main(struct chat_opts * op);

int loom_cmd_chat(int argc, char ** argv) {
    g_cmd = argc > 0 && !strcmp(argv[0], "run") ? "run" : "chat"; /* loom run -cnv passes run's argv */
    struct chat_opts o;
    int pr = parse(argc, argv, &o);
    if (pr) return pr == 2 && cli_stdout_ok(g_cmd) ? 0 : 1;
    cli_log_setup(o.g.verbose ? LOOM_LOG_DEBUG : LOOM_LOG_WARN); /* before -f's file: its error is the one line */
    char * system_buf = NULL; /* -f's text */
    if (o.system_file) {
        size_t len = 0;
        if (!(system_buf = cli_read_prompt_file(g_cmd, o.system_file, &len))) return 1;
        if (strlen(system_buf) != len) {
            fprintf(stderr, "loom %s: the system message file '%s' holds a NUL byte\n", g_cmd, o.system_file);
            free(system_buf);
            return 1;
        }
        o.system = system_buf;
    }
    const int status = chat_main(&o);
    free(system_buf);
    return status;
}

/* The chat itself, once the options are parsed: the process's exit status. */
static int chat_main(struct chat_opts * op) {
    struct chat_opts o = *op;
    struct chat c = {.o = &o, .t_start = loom_time_us()};
    if (access(o.g.model, R_OK) != 0) {
        fprintf(stderr, "loom %s: cannot open model '%s': %s\n", g_cmd, o.g.model, strerror(errno));
        return 1;
    }
    if (setup(&c, &o)) return 1;
    c.t_load = (loom_time_us() - c.t_start) / 1000.0;

    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, &old);
    const bool tty = isatty(STDIN_FILENO);
    char * line = NULL;
    size_t cap = 0;
    int status = 0;
    bool interrupted = false; /* the chat ended by Ctrl-C: the shell's status for SIGINT, as run's */
    for (;;) {
        g_interrupts = 0;
        if (tty) {
            fputs("> ", stdout);
            cli_flush();
        }
        errno = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) { /* end of input, or Ctrl-C at the prompt */
            interrupted = g_interrupts > 0;
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!strcmp(line, "/exit")) break;
        if (n == 0) continue;
        if (memchr(line, 0, (size_t)n)) { /* the message is a C string: it would end there without a word */
            fprintf(stderr, "loom %s: the line holds a NUL byte and is refused (it would be cut there); type it again\n", g_cmd);
            continue;
        }
        const int r = turn(&c, line, (size_t)n);
        if (r < 0) {
            cli_flush();
            fprintf(stderr, "loom %s: %s\n", g_cmd, cli_last_error("the turn failed"));
            status = 1;
            break;
        }
        if (r == 0) {
            status = 1;
            break;
        }
        if (g_interrupts >= 2) { /* a second Ctrl-C during the reply */
            interrupted = true;
            break;
        }
    }
    sigaction(SIGINT, &old, NULL);
    free(line);
    if (!cli_stdout_ok(g_cmd)) status = 1;
    if (status == 0 && interrupted) fputs("\n(interrupted)", stderr); /* print_timings starts a line */
    if (status == 0) print_timings(&c); /* after an error, its line is the last */
    chat_free(&c);
    return status == 0 && interrupted ? 130 : status;
}
