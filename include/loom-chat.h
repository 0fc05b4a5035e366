/* loom-chat.h -- chat templates: a conversation written in a model family's chat format. */
#ifndef LOOM_CHAT_H
#define LOOM_CHAT_H

#include "loom.h"
#include "loom-vocab.h" /* LOOM_TOKEN_ERROR */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A conversation written in the format a model was tuned on. GGUF files carry the format as a Jinja
 * template (tokenizer.chat_template); Loom has no Jinja interpreter: it recognizes the common
 * families from the template's text (the markers each one uses, as the field's built-in formatter
 * does) and writes them itself. The published formats: ChatML (OpenAI, "<|im_start|>role\n...
 * <|im_end|>\n"), Llama 2 ("[INST] ... [/INST]", the system text between <<SYS>> markers), Mistral
 * v1/v3/v3-tekken/v7, Llama 3 ("<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>"), Phi-3
 * ("<|role|>\n...<|end|>\n"), Gemma ("<start_of_turn>user|model\n...<end_of_turn>\n"), Zephyr
 * ("<|role|>\n...<|endoftext|>\n"), DeepSeek Coder ("### Instruction:" / "### Response:"), DeepSeek
 * V2 ("User: " / "Assistant: ") and V3 ("<｜User｜>" / "<｜Assistant｜>"). The BOS token is not part
 * of the text: the tokenizer adds it. */

enum loom_chat_template {
    LOOM_CHAT_TEMPLATE_CHATML = 0,           /* "chatml" (also the fallback) */
    LOOM_CHAT_TEMPLATE_LLAMA2,               /* "llama2": [INST] turns, the system text as a plain line */
    LOOM_CHAT_TEMPLATE_LLAMA2_SYS,           /* "llama2-sys": ... in <<SYS>> markers */
    LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS,       /* "llama2-sys-bos": ... and "<s>" before each later [INST] */
    LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP,     /* "llama2-sys-strip": ... contents trimmed */
    LOOM_CHAT_TEMPLATE_MISTRAL_V1,           /* "mistral-v1" */
    LOOM_CHAT_TEMPLATE_MISTRAL_V3,           /* "mistral-v3" */
    LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN,    /* "mistral-v3-tekken" */
    LOOM_CHAT_TEMPLATE_MISTRAL_V7,           /* "mistral-v7" */
    LOOM_CHAT_TEMPLATE_LLAMA3,               /* "llama3" */
    LOOM_CHAT_TEMPLATE_PHI3,                 /* "phi3" */
    LOOM_CHAT_TEMPLATE_GEMMA,                /* "gemma" */
    LOOM_CHAT_TEMPLATE_ZEPHYR,               /* "zephyr" */
    LOOM_CHAT_TEMPLATE_DEEPSEEK,             /* "deepseek" (DeepSeek Coder) */
    LOOM_CHAT_TEMPLATE_DEEPSEEK2,            /* "deepseek2" */
    LOOM_CHAT_TEMPLATE_DEEPSEEK3,            /* "deepseek3" (also DeepSeek-R1) */
    LOOM_CHAT_TEMPLATE_COUNT
};

/* One message: 'role' "system", "user" or "assistant" (another role is written as the family writes
 * a role name, or as an assistant turn where the family has fixed markers); 'content' UTF-8. */
struct loom_chat_message {
    const char * role;
    const char * content;
};

/* The family's name as --chat-template spells it ("chatml", "llama3", ...); NULL outside the enum. */
LOOM_API const char * loom_chat_template_name(enum loom_chat_template t);
/* Looks 'name' up among the names above into '*out'. Errors: LOOM_ERR_INVALID_ARG for NULL or an
 * unknown name (logged with the list of known ones). */
LOOM_API enum loom_status loom_chat_template_from_name(const char * name, enum loom_chat_template * out);
/* Recognizes the family of a Jinja template text 'tmpl' (NUL-terminated; NULL = the file has none)
 * from the markers it contains, into '*out'. Returns false, with '*out' = CHATML, when it recognizes
 * none (the caller should say that it falls back to ChatML). */
LOOM_API bool loom_chat_template_detect(const char * tmpl, enum loom_chat_template * out);
/* The text of the token that closes a turn in the family, where it has one of its own
 * ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|EOT|>"), else NULL
 * (the [INST] families and DeepSeek V2/V3 close turns with the EOS token). */
LOOM_API const char * loom_chat_template_eot_text(enum loom_chat_template t);
/* Writes 'n_msgs' messages in format 't', then with 'add_assistant' the opening of the assistant's
 * reply, into 'buf' ('size' bytes; a NUL follows when there is room). Returns the length in bytes,
 * -(length) when 'size' is smaller (call again with that room), LOOM_TOKEN_ERROR (logged) for a
 * template outside the enum, NULL msgs with n_msgs > 0, a message with a NULL role or content,
 * size < 0, NULL buf with size > 0, or out of memory. */
LOOM_API int32_t loom_chat_apply(enum loom_chat_template t, const struct loom_chat_message * msgs, size_t n_msgs, bool add_assistant, char * buf,
                        int32_t size);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CHAT_H */
