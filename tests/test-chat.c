/* test-chat.c -- chat templates: each family's text for one conversation (system, user, assistant,
 * user, then the assistant's opening), written out by hand from the family's format; recognition of
 * each family from characteristic pieces of the templates models ship; names; the size protocol. */
#include "test-util.h"

#include "loom-chat.h"

#include <string.h>

static const struct loom_chat_message conv[] = {
    {"system", "You are helpful."},
    {"user", "Hi"},
    {"assistant", "Hello there"},
    {"user", "How are you?"},
};

#define EOS_DS "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>" /* <｜end▁of▁sentence｜> */
#define USER_DS "<\xEF\xBD\x9CUser\xEF\xBD\x9C>"
#define ASSISTANT_DS "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>"

static const struct {
    enum loom_chat_template t;
    const char * want;
} formats[] = {
    {LOOM_CHAT_TEMPLATE_CHATML,
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello there<|im_end|>\n"
     "<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"},
    {LOOM_CHAT_TEMPLATE_LLAMA2, "[INST] You are helpful.\nHi [/INST]Hello there</s>[INST] How are you? [/INST]"},
    {LOOM_CHAT_TEMPLATE_LLAMA2_SYS, "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST]Hello there</s>[INST] How are you? [/INST]"},
    {LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS, "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST]Hello there</s><s>[INST] How are you? [/INST]"},
    {LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP, "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi [/INST]Hello there</s>[INST] How are you? [/INST]"},
    {LOOM_CHAT_TEMPLATE_MISTRAL_V1, " [INST] You are helpful.\n\nHi [/INST] Hello there</s> [INST] How are you? [/INST]"},
    {LOOM_CHAT_TEMPLATE_MISTRAL_V3, "[INST] You are helpful.\n\nHi[/INST] Hello there</s>[INST] How are you?[/INST]"},
    {LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN, "[INST]You are helpful.\n\nHi[/INST]Hello there</s>[INST]How are you?[/INST]"},
    {LOOM_CHAT_TEMPLATE_MISTRAL_V7, "[SYSTEM_PROMPT] You are helpful.[/SYSTEM_PROMPT][INST] Hi[/INST] Hello there</s>[INST] How are you?[/INST]"},
    {LOOM_CHAT_TEMPLATE_LLAMA3,
     "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHello there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHow are you?"
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {LOOM_CHAT_TEMPLATE_PHI3,
     "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello there<|end|>\n<|user|>\nHow are you?<|end|>\n<|assistant|>\n"},
    {LOOM_CHAT_TEMPLATE_GEMMA,
     "<start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello there<end_of_turn>\n"
     "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n"},
    {LOOM_CHAT_TEMPLATE_ZEPHYR,
     "<|system|>\nYou are helpful.<|endoftext|>\n<|user|>\nHi<|endoftext|>\n<|assistant|>\nHello there<|endoftext|>\n<|user|>\n"
     "How are you?<|endoftext|>\n<|assistant|>\n"},
    {LOOM_CHAT_TEMPLATE_DEEPSEEK,
     "You are helpful.### Instruction:\nHi\n### Response:\nHello there\n<|EOT|>\n### Instruction:\nHow are you?\n### Response:\n"},
    {LOOM_CHAT_TEMPLATE_DEEPSEEK2, "You are helpful.\n\nUser: Hi\n\nAssistant: Hello there" EOS_DS "User: How are you?\n\nAssistant:"},
    {LOOM_CHAT_TEMPLATE_DEEPSEEK3, "You are helpful.\n\n" USER_DS "Hi" ASSISTANT_DS "Hello there" EOS_DS USER_DS "How are you?" ASSISTANT_DS},
};

static void check_formats(void) {
    CHECK(sizeof formats / sizeof formats[0] == LOOM_CHAT_TEMPLATE_COUNT, "every family has an expected text");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char buf[1024];
        const int32_t n = loom_chat_apply(formats[i].t, conv, 4, true, buf, sizeof buf);
        const char * name = loom_chat_template_name(formats[i].t);
        CHECK(n == (int32_t)strlen(formats[i].want) && !strcmp(buf, formats[i].want), "%s:\n got  '%s'\n want '%s'", name,
              n > 0 ? buf : "(error)", formats[i].want);
        /* without the assistant's opening: a prefix of the same text (what a chat keeps between turns) */
        char buf2[1024];
        const int32_t n2 = loom_chat_apply(formats[i].t, conv, 4, false, buf2, sizeof buf2);
        CHECK(n2 > 0 && n2 <= n && !memcmp(buf, buf2, (size_t)n2), "%s: the text without add_assistant is a prefix", name);
        /* the size protocol: -(length) when short, nothing needed beyond the length */
        CHECK(loom_chat_apply(formats[i].t, conv, 4, true, buf2, 5) == -n, "%s: -(needed)", name);
        CHECK(loom_chat_apply(formats[i].t, conv, 4, true, NULL, 0) == -n, "%s: size query", name);
        CHECK(loom_chat_apply(formats[i].t, conv, 4, true, buf2, n) == n && !memcmp(buf2, buf, (size_t)n), "%s: exact room", name);
        enum loom_chat_template back;
        CHECK(loom_chat_template_from_name(name, &back) == LOOM_OK && back == formats[i].t, "%s: name round trip", name);
    }
    /* the families that trim contents (Llama 3, Gemma, Llama 2 strip) and those that do not (ChatML) */
    const struct loom_chat_message padded[] = {{"user", "  Hi \n"}};
    char buf[256];
    loom_chat_apply(LOOM_CHAT_TEMPLATE_LLAMA3, padded, 1, false, buf, sizeof buf);
    CHECK(!strcmp(buf, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"), "llama3 trims: '%s'", buf);
    loom_chat_apply(LOOM_CHAT_TEMPLATE_GEMMA, padded, 1, false, buf, sizeof buf);
    CHECK(!strcmp(buf, "<start_of_turn>user\nHi<end_of_turn>\n"), "gemma trims: '%s'", buf);
    loom_chat_apply(LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP, padded, 1, false, buf, sizeof buf);
    CHECK(!strcmp(buf, "[INST] Hi [/INST]"), "llama2-sys-strip trims: '%s'", buf);
    loom_chat_apply(LOOM_CHAT_TEMPLATE_CHATML, padded, 1, false, buf, sizeof buf);
    CHECK(!strcmp(buf, "<|im_start|>user\n  Hi \n<|im_end|>\n"), "chatml keeps: '%s'", buf);
    /* refusals */
    const struct loom_chat_message bad[] = {{"user", NULL}};
    CHECK(loom_chat_apply(LOOM_CHAT_TEMPLATE_CHATML, bad, 1, true, buf, sizeof buf) == LOOM_TOKEN_ERROR, "NULL content refused");
    CHECK(loom_chat_apply(LOOM_CHAT_TEMPLATE_COUNT, conv, 1, true, buf, sizeof buf) == LOOM_TOKEN_ERROR, "template out of range");
    CHECK(loom_chat_apply(LOOM_CHAT_TEMPLATE_CHATML, NULL, 0, true, buf, sizeof buf) == (int32_t)strlen("<|im_start|>assistant\n"),
          "no messages: the opening only");
    enum loom_chat_template t;
    CHECK(loom_chat_template_from_name("jinja", &t) == LOOM_ERR_INVALID_ARG && strstr(test_last_error, "known: chatml, llama2"),
          "unknown name: '%s'", test_last_error);
}

/* Pieces of the templates the families ship (their characteristic markers and the way they join them). */
static void check_detect(void) {
    static const struct {
        const char * tmpl;
        enum loom_chat_template want;
    } cases[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
         LOOM_CHAT_TEMPLATE_CHATML},
        {"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + messages[0]['content'] %}{% endif %}"
         "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{{ ' ' + content.strip() + ' ' + eos_token }}",
         LOOM_CHAT_TEMPLATE_LLAMA2_SYS_STRIP},
        {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
         "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
         LOOM_CHAT_TEMPLATE_LLAMA2},
        {"{% if system %}<<SYS>>{{ system }}<</SYS>>{% endif %}{{ bos_token + '[INST]' + message['content'] }}", LOOM_CHAT_TEMPLATE_LLAMA2_SYS_BOS},
        {"{% set sys = '<<SYS>>\\n' + messages[0]['content'] %}[INST] {{ sys }}", LOOM_CHAT_TEMPLATE_LLAMA2_SYS},
        {"{%- if loop.last and system_message is defined %}{{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}",
         LOOM_CHAT_TEMPLATE_MISTRAL_V1},
        {"{%- if tools %}[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS]{%- endif %}{{- '[INST] ' + message['content'] + '[/INST]' }}",
         LOOM_CHAT_TEMPLATE_MISTRAL_V3},
        {"{%- if tools %}[AVAILABLE_TOOLS]{%- endif %}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}", LOOM_CHAT_TEMPLATE_MISTRAL_V3_TEKKEN},
        {"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + message['content'] + '[/INST]' }}",
         LOOM_CHAT_TEMPLATE_MISTRAL_V7},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' %}",
         LOOM_CHAT_TEMPLATE_LLAMA3},
        {"{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n'}}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}",
         LOOM_CHAT_TEMPLATE_PHI3},
        {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", LOOM_CHAT_TEMPLATE_GEMMA},
        {"{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}", LOOM_CHAT_TEMPLATE_ZEPHYR},
        {"{{'### Instruction:\\n' + message['content'] + '\\n'}}{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}",
         LOOM_CHAT_TEMPLATE_DEEPSEEK},
        {"{{ 'User: ' + message['content'] + '\\n\\n' }}{{ 'Assistant: ' + message['content'] + eos_token }}", LOOM_CHAT_TEMPLATE_DEEPSEEK2},
        {"{{'" USER_DS "' + message['content']}}{{'" ASSISTANT_DS "' + content + '" EOS_DS "'}}", LOOM_CHAT_TEMPLATE_DEEPSEEK3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum loom_chat_template t = LOOM_CHAT_TEMPLATE_COUNT;
        const bool known = loom_chat_template_detect(cases[i].tmpl, &t);
        CHECK(known && t == cases[i].want, "template %zu: %s (%s), want %s", i, loom_chat_template_name(t), known ? "recognized" : "not recognized",
              loom_chat_template_name(cases[i].want));
    }
    enum loom_chat_template t = LOOM_CHAT_TEMPLATE_COUNT;
    CHECK(!loom_chat_template_detect("{{ messages | tojson }}", &t) && t == LOOM_CHAT_TEMPLATE_CHATML, "unknown template: ChatML, not recognized");
    t = LOOM_CHAT_TEMPLATE_COUNT;
    CHECK(!loom_chat_template_detect(NULL, &t) && t == LOOM_CHAT_TEMPLATE_CHATML, "no template: ChatML, not recognized");
    CHECK(!strcmp(loom_chat_template_eot_text(LOOM_CHAT_TEMPLATE_LLAMA3), "<|eot_id|>") &&
              !strcmp(loom_chat_template_eot_text(LOOM_CHAT_TEMPLATE_CHATML), "<|im_end|>") &&
              !loom_chat_template_eot_text(LOOM_CHAT_TEMPLATE_MISTRAL_V7),
          "end-of-turn texts");
}

int main(void) {
    loom_log_set(test_capture_log, NULL);
    check_formats();
    check_detect();
    return test_finish("test-chat");
}
