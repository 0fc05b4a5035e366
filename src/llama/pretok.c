/* pretok.c -- BPE pre-tokenizers: each name's regular expressions (PCRE2, JIT), and the word split.
 *
 * The expressions are those of the tokenizers' published configurations, in the form the
 * reference engine (llama.cpp) runs them: its case-insensitive contractions are spelled out as
 * ASCII classes, and whitespace is the Unicode White_Space set, which the subject presents as
 * ASCII (every other White_Space code point is matched as a vertical tab, as the reference does),
 * so that a class range spanning such a code point does not take it. They run in PCRE2's 32-bit
 * library on code points (no UTF mode: surrogates and values above U+10FFFF, which the
 * reference's UTF-8 reading can produce, are ordinary unassigned characters), with Unicode
 * properties for \p{L}, \p{N} and \p{P}. */
#include "pretok.h"

#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

/* ASCII whitespace; the other White_Space code points reach the expressions as \v (see above). */
#define WS "\\t-\\r "
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* Llama 3 (tiktoken's cl100k pattern): digits in groups of up to three. */
static const char * const re_llama3[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS
    "]+(?![^" WS "])|[" WS "]+",
};
/* Qwen2: the same with single digits. */
static const char * const re_qwen2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS
    "]+(?![^" WS "])|[" WS "]+",
};
/* GPT-2's pattern (its encoder.py). */
#define GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])"
static const char * const re_gpt2[] = {GPT2};
/* SmolLM, StarCoder and kin: every digit alone, then GPT-2's pattern. */
static const char * const re_smollm[] = {"\\p{N}", GPT2};
/* The reference engine's default for a file without tokenizer.ggml.pre. */
static const char * const re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"};
/* DeepSeek LLM: line breaks alone; cased letters of the Latin, Greek, Cyrillic, Armenian, Georgian,
 * Cherokee and other bicameral scripts; ASCII and full-width punctuation; trailing whitespace;
 * CJK ideographs and Hangul (with the range U+0800..U+4E00 of its configuration); numbers. */
static const char * const re_deepseek_llm[] = {
    "[\\r\\n]",
    "[" WS "]?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}\\x{1c4}-\\x{293}\\x{295}-\\x{2af}"
    "\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}"
    "\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}"
    "\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}"
    "\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"
    "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}"
    "\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}"
    "\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}"
    "\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}"
    "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}"
    "\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+",
    "[" WS "]?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-\\x{3002}]+",
    "[" WS "]+\\z",
    "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+",
    "\\p{N}+",
};

#define N_OF(a) (int)(sizeof(a) / sizeof(a)[0])

struct pretok_def {
    const char * const * names;   /* NULL-terminated: tokenizer.ggml.pre values */
    const char * const * exprs;
    int n_exprs;
    bool ignore_merges, add_bos;  /* as the reference engine sets them for these names */
};

static const char * const names_default[] = {"default", NULL};
static const char * const names_llama3[] = {"llama-bpe", "llama3", "llama-v3", "falcon3", NULL};
static const char * const names_llama3_merged[] = {"dbrx", "smaug-bpe", NULL};
static const char * const names_qwen2[] = {"qwen2", "deepseek-r1-qwen", "stablelm2", NULL};
static const char * const names_gpt2[] = {"gpt-2", "phi-2", "mpt", "olmo", "jais", NULL};
static const char * const names_smollm[] = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", NULL};
static const char * const names_deepseek_llm[] = {"deepseek-llm", NULL};

static const struct pretok_def defs[] = {
    {names_default, re_default, N_OF(re_default), false, false},
    {names_llama3, re_llama3, N_OF(re_llama3), true, true},
    {names_llama3_merged, re_llama3, N_OF(re_llama3), false, false},
    {names_qwen2, re_qwen2, N_OF(re_qwen2), false, false},
    {names_gpt2, re_gpt2, N_OF(re_gpt2), false, false},
    {names_smollm, re_smollm, N_OF(re_smollm), false, false},
    {names_deepseek_llm, re_deepseek_llm, N_OF(re_deepseek_llm), false, false},
};

struct loom_pretok {
    pcre2_code * re[8];
    int n;
};

static const struct pretok_def * find_def(const char * name) {
    if (!name) name = "default";
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        for (const char * const * n = defs[i].names; *n; n++) {
            if (!strcmp(*n, name)) return &defs[i];
        }
    }
    return NULL;
}

const char * loom_pretok_names(void) {
    static char buf[512];
    if (buf[0]) return buf;
    size_t k = 0;
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        for (const char * const * n = defs[i].names; *n; n++) {
            size_t len = strlen(*n);
            if (k + len + 3 >= sizeof buf) break;
            if (k) buf[k++] = ',', buf[k++] = ' ';
            memcpy(buf + k, *n, len);
            k += len;
        }
    }
    buf[k] = '\0';
    return buf;
}

bool loom_pretok_lookup(const char * name, bool * ignore_merges, bool * add_bos) {
    const struct pretok_def * d = find_def(name);
    if (!d) return false;
    if (ignore_merges) *ignore_merges = d->ignore_merges;
    if (add_bos) *add_bos = d->add_bos;
    return true;
}

void loom_pretok_free(struct loom_pretok * p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->re[i]);
    free(p);
}

/* Compiles one expression (ASCII text: non-ASCII characters are written \x{...}). */
static pcre2_code * compile(const char * expr) {
    size_t n = strlen(expr);
    PCRE2_UCHAR32 * pat = malloc((n ? n : 1) * sizeof *pat);
    if (!pat) return NULL;
    for (size_t i = 0; i < n; i++) pat[i] = (uint8_t)expr[i];
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code * re = pcre2_compile(pat, n, PCRE2_UCP, &err, &at, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR32 msg[128];
        char m8[128];
        int k = pcre2_get_error_message(err, msg, 128);
        for (int i = 0; i < k && i < 127; i++) m8[i] = msg[i] < 128 ? (char)msg[i] : '?';
        m8[k > 0 ? (k < 127 ? k : 127) : 0] = '\0';
        loom_log(LOOM_LOG_ERROR, "pre-tokenizer: expression does not compile at offset %zu: %s", (size_t)at, m8);
        return NULL;
    }
    /* JIT where the platform has it; the interpreter gives the same matches otherwise */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

enum loom_status loom_pretok_new(const char * name, struct loom_pretok ** out, bool * ignore_merges, bool * add_bos) {
    *out = NULL;
    const struct pretok_def * d = find_def(name);
    if (!d) {
        loom_log(LOOM_LOG_ERROR, "unknown BPE pre-tokenizer '%s' (tokenizer.ggml.pre; Loom knows: %s)", name, loom_pretok_names());
        return LOOM_ERR_UNSUPPORTED;
    }
    struct loom_pretok * p = calloc(1, sizeof *p);
    if (!p) return LOOM_ERR_OOM;
    for (int i = 0; i < d->n_exprs; i++) {
        p->re[i] = compile(d->exprs[i]);
        if (!p->re[i]) {
            loom_pretok_free(p);
            return LOOM_ERR_INVALID_ARG;
        }
        p->n++;
    }
    if (ignore_merges) *ignore_merges = d->ignore_merges;
    if (add_bos) *add_bos = d->add_bos;
    *out = p;
    return LOOM_OK;
}

void loom_pretok_words_free(struct loom_pretok_words * w) {
    if (!w) return;
    free(w->len);
    free(w->tmp);
    pcre2_match_data_free(w->match);
    memset(w, 0, sizeof *w);
}

static bool push_len(uint32_t ** a, size_t * n, size_t * cap, uint32_t v) {
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        uint32_t * b = realloc(*a, c * sizeof *b);
        if (!b) return false;
        *a = b;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return true;
}

/* The White_Space code points above ASCII, which the expressions see as a vertical tab. */
static bool is_wide_space(uint32_t c) {
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

enum loom_status loom_pretok_split(const struct loom_pretok * p, const uint32_t * cps, size_t n,
                                   struct loom_pretok_words * w) {
    w->n = 0;
    if (n == 0) return LOOM_OK;
    if (!w->match && !(w->match = pcre2_match_data_create(1, NULL))) return LOOM_ERR_OOM;
    /* the subject: code points with wide spaces as \v (the caller's array is not changed) */
    PCRE2_UCHAR32 * subj = malloc(n * sizeof *subj);
    if (!subj) return LOOM_ERR_OOM;
    for (size_t i = 0; i < n; i++) subj[i] = cps[i] >= 0x80 && is_wide_space(cps[i]) ? 0x0B : cps[i];
    enum loom_status st = LOOM_OK;
    if (!push_len(&w->len, &w->n, &w->cap, (uint32_t)n)) st = LOOM_ERR_OOM;
    pcre2_match_data * md = w->match;
    for (int r = 0; r < p->n && st == LOOM_OK; r++) {
        size_t n_out = 0, base = 0;
        for (size_t f = 0; f < w->n && st == LOOM_OK; f++) {
            const PCRE2_UCHAR32 * s = subj + base;
            size_t len = w->len[f], pos = 0, last = 0;
            while (pos < len) {
                int rc = pcre2_match(p->re[r], s, len, pos, 0, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    loom_log(LOOM_LOG_ERROR, "pre-tokenizer: matching failed (PCRE2 error %d)", rc);
                    st = LOOM_ERR_INVALID_ARG;
                    break;
                }
                const PCRE2_SIZE * ov = pcre2_get_ovector_pointer(md);
                if (ov[1] == ov[0]) { /* an empty match splits nothing */
                    pos = ov[0] + 1;
                    continue;
                }
                /* the text between matches stays a word of its own */
                if (ov[0] > last && !push_len(&w->tmp, &n_out, &w->tmp_cap, (uint32_t)(ov[0] - last))) st = LOOM_ERR_OOM;
                if (st == LOOM_OK && !push_len(&w->tmp, &n_out, &w->tmp_cap, (uint32_t)(ov[1] - ov[0]))) st = LOOM_ERR_OOM;
                if (st != LOOM_OK) break;
                last = pos = ov[1];
            }
            if (st == LOOM_OK && last < len && !push_len(&w->tmp, &n_out, &w->tmp_cap, (uint32_t)(len - last))) st = LOOM_ERR_OOM;
            base += len;
        }
        /* the new split becomes the current one */
        uint32_t * t = w->len;
        size_t tc = w->cap;
        w->len = w->tmp, w->cap = w->tmp_cap, w->n = n_out;
        w->tmp = t, w->tmp_cap = tc;
    }
    free(subj);
    return st;
}
