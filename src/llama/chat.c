/* chat.c -- chat templates: recognizing a model's tokenizer.chat_template by its text and
 * writing a conversation in that family's format (no Jinja interpreter: the common families). */
#include "loom-chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * const names[LOOM_CHAT_TEMPLATE_COUNT] = {
    [LOOM_CHAT_TEMPLATE_CHATML] = "chatml",
    [LOOM_CHAT_TEMPLATE_LLAMA2] = "llama2",
    [LOOM_CHAT_TEMPLATE_LLAMA2_SYS] = "llama2-sys",
    [LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS] = "llama2-sys-bos",
    [LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP] = "llama2-sys-strip",
    [LOOM_CHAT_TEMPLATE_MISTRAL_V1] = "mistral-v1",
    [LOOM_CHAT_TEMPLATE_MISTRAL_V3] = "mistral-v3",
    [LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
    [LOOM_CHAT_TEMPLATE_MISTRAL_V7] = "mistral-v7",
    [LOOM_CHAT_TEMPLATE_LLAMA3] = "llama3",
    [LOOM_CHAT_TEMPLATE_PHI3] = "phi3",
    [LOOM_CHAT_TEMPLATE_GEMMA] = "gemma",
    [LOOM_CHAT_TEMPLATE_ZEPHYR] = "zephyr",
    [LOOM_CHAT_TEMPLATE_DEEPSEEK] = "deepseek",
    [LOOM_CHAT_TEMPLATE_DEEPSEEK2] = "deepseek2",
    [LOOM_CHAT_TEMPLATE_DEEPSEEK3] = "deepseek3",
};

/* The text that closes a turn, where the family has a token of its own for it. */
static const char * const eot_texts[LOOM_CHAT_TEMPLATE_COUNT] = {
    [LOOM_CHAT_TEMPLATE_CHATML] = "<|im_end|>",
    [LOOM_CHAT_TEMPLATE_LLAMA3] = "<|eot_id|>",
    [LOOM_CHAT_TEMPLATE_PHI3] = "<|end|>",
    [LOOM_CHAT_TEMPLATE_GEMMA] = "<end_of_turn>",
    [LOOM_CHAT_TEMPLATE_ZEPHYR] = "<|endoftext|>",
    [LOOM_CHAT_TEMPLATE_DEEPSEEK] = "<|EOT|>",
};

const char * loom_chat_template_name(enum loom_chat_template t) {
    return (unsigned)t < LOOM_CHAT_TEMPLATE_COUNT ? names[t] : NULL;
}

const char * loom_chat_template_eot_text(enum loom_chat_template t) {
    return (unsigned)t < LOOM_CHAT_TEMPLATE_COUNT ? eot_texts[t] : NULL;
}

enum loom_status loom_chat_template_from_name(const char * name, enum loom_chat_template * out) {
    if (!name || !out) return LOOM_ERR_INVALID_ARG;
    for (int i = 0; i < LOOM_CHAT_TEMPLATE_COUNT; i++) {
        if (!strcmp(name, names[i])) {
            *out = (enum loom_chat_template)i;
            return LOOM_OK;
        }
    }
    char list[512] = "";
    for (int i = 0; i < LOOM_CHAT_TEMPLATE_COUNT; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    loom_log(LOOM_LOG_ERROR, "unknown chat template '%.64s' (known: %s)", name, list);
    return LOOM_ERR_INVALID_ARG;
}

static bool has(const char * s, const char * part) { return strstr(s, part) != NULL; }

bool loom_chat_template_detect(const char * tmpl, enum loom_chat_template * out) {
    enum loom_chat_template t = LOOM_CHAT_TEMPLATE_CHATML;
    bool known = true;
    if (!tmpl) {
        known = false;
    } else if (has(tmpl, "<|im_start|>")) {
        t = LOOM_CHAT_TEMPLATE_CHATML;
    } else if (!strncmp(tmpl, "mistral", 7) || has(tmpl, "[INST]")) {
        if (has(tmpl, "[SYSTEM_PROMPT]")) {
            t = LOOM_CHAT_TEMPLATE_MISTRAL_V7;
        } else if (has(tmpl, "' [INST] ' + system_message") || has(tmpl, "[AVAILABLE_TOOLS]")) {
            /* Mistral's own templates: v1 puts a space before [INST], tekken (v3) none after it */
            t = has(tmpl, " [INST]") ? LOOM_CHAT_TEMPLATE_MISTRAL_V1
                : has(tmpl, "\"[INST]\"") ? LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN
                                          : LOOM_CHAT_TEMPLATE_MISTRAL_V3;
        } else if (has(tmpl, "content.strip()")) {
            t = LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP;
        } else if (has(tmpl, "bos_token + '[INST]")) {
            t = LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS;
        } else if (has(tmpl, "<<SYS>>")) {
            t = LOOM_CHAT_TEMPLATE_LLAMA2_SYS;
        } else {
            t = LOOM_CHAT_TEMPLATE_LLAMA2;
        }
    } else if (has(tmpl, "<|assistant|>") && has(tmpl, "<|end|>")) {
        t = LOOM_CHAT_TEMPLATE_PHI3;
    } else if (has(tmpl, "<|user|>") && has(tmpl, "<|endoftext|>")) {
        t = LOOM_CHAT_TEMPLATE_ZEPHYR;
    } else if (has(tmpl, "<start_of_turn>")) {
        t = LOOM_CHAT_TEMPLATE_GEMMA;
    } else if (has(tmpl, "### Instruction:") && has(tmpl, "<|EOT|>")) {
        t = LOOM_CHAT_TEMPLATE_DEEPSEEK;
    } else if (has(tmpl, "'Assistant: ' + message['content'] + eos_token")) {
        t = LOOM_CHAT_TEMPLATE_DEEPSEEK2;
    } else if (has(tmpl, "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>") && has(tmpl, "<\xEF\xBD\x9C" "User\xEF\xBD\x9C>")) {
        t = LOOM_CHAT_TEMPLATE_DEEPSEEK3; /* <｜Assistant｜>, <｜User｜> (full-width bars) */
    } else if (has(tmpl, "<|start_header_id|>") && has(tmpl, "<|end_header_id|>")) {
        t = LOOM_CHAT_TEMPLATE_LLAMA3;
    } else {
        known = false;
    }
    *out = t;
    return known;
}

/* ---------------------------------------------------------------- writing */

/* A growing string; 'failed' once an allocation fails (later appends do nothing). */
struct sbuf {
    char * s;
    size_t len, cap;
    bool failed;
};

static void put_n(struct sbuf * b, const char * s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char * p = realloc(b->s, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void put(struct sbuf * b, const char * s) { put_n(b, s, strlen(s)); }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* 's' without leading and trailing whitespace (Python's str.strip() on ASCII whitespace). */
static void put_trimmed(struct sbuf * b, const char * s) {
    size_t n = strlen(s), i = 0;
    while (i < n && is_space(s[i])) i++;
    while (n > i && is_space(s[n - 1])) n--;
    put_n(b, s + i, n - i);
}

static bool role_is(const struct loom_chat_message * m, const char * role) { return !strcmp(m->role, role); }

/* The Llama 2 [INST] family: turns "[INST] user [/INST] assistant</s>"; the system message inside
 * the first [INST] between <<SYS>> markers (variants that know it), or as a plain line. */
static void write_llama2(struct sbuf * b, enum loom_chat_template t, const struct loom_chat_message * msgs, size_t n) {
    const bool sys = t != LOOM_CHAT_TEMPLATE_LLAMA2, bos = t == LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS,
               strip = t == LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP;
    bool in_turn = true; /* the first [INST] opens here; the file's BOS comes from the tokenizer */
    put(b, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        const struct loom_chat_message * m = &msgs[i];
        struct sbuf c = {0};
        if (strip) put_trimmed(&c, m->content);
        else put(&c, m->content);
        const char * content = c.s ? c.s : "";
        if (role_is(m, "system")) {
            if (sys) {
                put(b, "<<SYS>>\n");
                put(b, content);
                put(b, "\n<</SYS>>\n\n");
            } else {
                put(b, content);
                put(b, "\n");
            }
        } else if (role_is(m, "user")) {
            if (!in_turn) put(b, bos ? "<s>[INST] " : "[INST] ");
            in_turn = true;
            put(b, content);
            put(b, " [/INST]");
        } else {
            put(b, content);
            put(b, "</s>");
            in_turn = false;
        }
        b->failed |= c.failed;
        free(c.s);
    }
}

/* Mistral's own formats: v1 " [INST] user [/INST] assistant</s>", v3 "[INST] user[/INST] assistant</s>"
 * (assistant text trimmed), v3-tekken "[INST]user[/INST]assistant</s>"; the system text opens the next
 * [INST] followed by a blank line. */
static void write_mistral(struct sbuf * b, enum loom_chat_template t, const struct loom_chat_message * msgs, size_t n) {
    const char * lead = t == LOOM_CHAT_TEMPLATE_MISTRAL_V1 ? " " : "";
    const char * trail = t == LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN ? "" : " ";
    bool in_turn = false;
    for (size_t i = 0; i < n; i++) {
        const struct loom_chat_message * m = &msgs[i];
        if (!in_turn) {
            put(b, lead);
            put(b, "[INST]");
            put(b, trail);
            in_turn = true;
        }
        if (role_is(m, "system")) {
            put(b, m->content);
            put(b, "\n\n");
        } else if (role_is(m, "user")) {
            put(b, m->content);
            put(b, lead);
            put(b, "[/INST]");
        } else {
            put(b, trail);
            if (t == LOOM_CHAT_TEMPLATE_MISTRAL_V3) put_trimmed(b, m->content);
            else put(b, m->content);
            put(b, "</s>");
            in_turn = false;
        }
    }
}

/* "<start_of_turn>user\n...<end_of_turn>\n", the assistant called "model", the system text (Gemma
 * has no system role) at the start of the next user turn; contents trimmed. */
static void write_gemma(struct sbuf * b, const struct loom_chat_message * msgs, size_t n) {
    struct sbuf sys = {0};
    for (size_t i = 0; i < n; i++) {
        const struct loom_chat_message * m = &msgs[i];
        if (role_is(m, "system")) {
            put_trimmed(&sys, m->content);
            continue;
        }
        const bool model = role_is(m, "assistant");
        put(b, "<start_of_turn>");
        put(b, model ? "model" : m->role);
        put(b, "\n");
        if (sys.len && !model) {
            put(b, sys.s);
            put(b, "\n\n");
            sys.len = 0;
        }
        put_trimmed(b, m->content);
        put(b, "<end_of_turn>\n");
    }
    b->failed |= sys.failed;
    free(sys.s);
}

/* The families that write every turn as 'open' role 'sep' content 'close' (the content trimmed of
 * surrounding white space with 'trim'): ChatML, Llama 3, Phi-3, Zephyr. */
static void write_role_turns(struct sbuf * b, const struct loom_chat_message * msgs, size_t n, const char * open, const char * sep,
                             const char * close, bool trim) {
    for (size_t i = 0; i < n; i++) {
        put(b, open);
        put(b, msgs[i].role);
        put(b, sep);
        if (trim) put_trimmed(b, msgs[i].content);
        else put(b, msgs[i].content);
        put(b, close);
    }
}

static void write_messages(struct sbuf * b, enum loom_chat_template t, const struct loom_chat_message * msgs, size_t n, bool add_ass) {
    switch (t) {
    case LOOM_CHAT_TEMPLATE_LLAMA2:
    case LOOM_CHAT_TEMPLATE_LLAMA2_SYS:
    case LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS:
    case LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP: write_llama2(b, t, msgs, n); break;
    case LOOM_CHAT_TEMPLATE_MISTRAL_V1:
    case LOOM_CHAT_TEMPLATE_MISTRAL_V3:
    case LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN: write_mistral(b, t, msgs, n); break;
    case LOOM_CHAT_TEMPLATE_MISTRAL_V7:
        for (size_t i = 0; i < n; i++) {
            const bool sys = role_is(&msgs[i], "system"), user = role_is(&msgs[i], "user");
            put(b, sys ? "[SYSTEM_PROMPT] " : user ? "[INST] " : " ");
            put(b, msgs[i].content);
            put(b, sys ? "[/SYSTEM_PROMPT]" : user ? "[/INST]" : "</s>");
        }
        break;
    case LOOM_CHAT_TEMPLATE_GEMMA:
        write_gemma(b, msgs, n);
        if (add_ass) put(b, "<start_of_turn>model\n");
        break;
    case LOOM_CHAT_TEMPLATE_LLAMA3:
        write_role_turns(b, msgs, n, "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", true);
        if (add_ass) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case LOOM_CHAT_TEMPLATE_PHI3:
    case LOOM_CHAT_TEMPLATE_ZEPHYR:
        write_role_turns(b, msgs, n, "<|", "|>\n", t == LOOM_CHAT_TEMPLATE_PHI3 ? "<|end|>\n" : "<|endoftext|>\n", false);
        if (add_ass) put(b, "<|assistant|>\n");
        break;
    case LOOM_CHAT_TEMPLATE_DEEPSEEK:
        for (size_t i = 0; i < n; i++) {
            const bool sys = role_is(&msgs[i], "system"), user = role_is(&msgs[i], "user");
            put(b, sys ? "" : user ? "### Instruction:\n" : "### Response:\n");
            put(b, msgs[i].content);
            put(b, sys ? "" : user ? "\n" : "\n<|EOT|>\n");
        }
        if (add_ass) put(b, "### Response:\n");
        break;
    case LOOM_CHAT_TEMPLATE_DEEPSEEK2:
    case LOOM_CHAT_TEMPLATE_DEEPSEEK3: {
        const bool v3 = t == LOOM_CHAT_TEMPLATE_DEEPSEEK3;
        const char * eos = "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>"; /* <｜end▁of▁sentence｜> */
        for (size_t i = 0; i < n; i++) {
            const bool sys = role_is(&msgs[i], "system"), user = role_is(&msgs[i], "user");
            if (!sys) put(b, user ? (v3 ? "<\xEF\xBD\x9CUser\xEF\xBD\x9C>" : "User: ") : (v3 ? "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>" : "Assistant: "));
            put(b, msgs[i].content);
            put(b, sys ? "\n\n" : user ? (v3 ? "" : "\n\n") : eos);
        }
        if (add_ass) put(b, v3 ? "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>" : "Assistant:");
        break;
    }
    default: /* ChatML */
        write_role_turns(b, msgs, n, "<|im_start|>", "\n", "<|im_end|>\n", false);
        if (add_ass) put(b, "<|im_start|>assistant\n");
        break;
    }
}

int32_t loom_chat_apply(enum loom_chat_template t, const struct loom_chat_message * msgs, size_t n_msgs, bool add_assistant, char * buf,
                        int32_t size) {
    if ((unsigned)t >= LOOM_CHAT_TEMPLATE_COUNT || (!msgs && n_msgs) || size < 0 || (!buf && size > 0)) {
        loom_log(LOOM_LOG_ERROR, "loom_chat_apply: invalid arguments");
        return LOOM_TOKEN_ERROR;
    }
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            loom_log(LOOM_LOG_ERROR, "loom_chat_apply: message %zu has no role or content", i);
            return LOOM_TOKEN_ERROR;
        }
    }
    struct sbuf b = {0};
    write_messages(&b, t, msgs, n_msgs, add_assistant);
    if (b.failed || b.len > INT32_MAX) {
        free(b.s);
        loom_log(LOOM_LOG_ERROR, "loom_chat_apply: %s", b.failed ? "out of memory" : "result over INT32_MAX bytes");
        return LOOM_TOKEN_ERROR;
    }
    const int32_t len = (int32_t)b.len;
    if (len > size) {
        free(b.s);
        return -len;
    }
    if (len) memcpy(buf, b.s, (size_t)len);
    if (len < size) buf[len] = 0;
    free(b.s);
    return len;
}
