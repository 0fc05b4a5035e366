/* gen-controls.h -- what steers `loom run`'s generation besides the sampler: logit biases, stop strings (-r), escapes in -p. */
#ifndef LOOM_TOOLS_GEN_CONTROLS_H
#define LOOM_TOOLS_GEN_CONTROLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One --logit-bias: 'bias' added to the logit of 'token' (-inf: never sampled; +inf: always, the draw uniform among +inf tokens). */
struct logit_bias {
    int32_t token;
    float bias;
};

/* Parses the field's "TOKEN(+|-)BIAS" ("15043+1", "2-inf") into 'out'; on failure prints
 * "loom CMD: invalid value ..." and returns false. The token is checked against the vocabulary
 * later (logit_bias_check). */
bool logit_bias_parse(const char * cmd, const char * arg, struct logit_bias * out);
/* True when every bias names a token in [0, n_vocab); else prints the one that does not. */
bool logit_bias_check(const char * cmd, const struct logit_bias * b, int n, int32_t n_vocab);

/* Replaces, in place, the escapes \n \r \t \\ \' \" and \xHH (exactly two hex digits) in the 'len'
 * bytes of 's' (which has room for a NUL after them) by the bytes they stand for, as the field's -e
 * does (so that a prompt gives the reference's tokens); any other backslash, \a, \0 or \x4 among
 * them, is kept as it is written. Returns the new length (a NUL is written after it). */
size_t process_escapes(char * s, size_t len);

/* Stop strings: generation ends when the generated text ends with one of them (the field's -r,
 * --reverse-prompt). Only the generated text is searched, not the prompt. */
#define STOP_STRINGS_MAX 16       /* -r given at most this many times */
#define STOP_STRING_MAX_LEN 1024  /* bytes of one stop string */
#define LOGIT_BIAS_MAX 256        /* --logit-bias given at most this many times */
struct stop_strings {
    const char * strs[STOP_STRINGS_MAX];  /* [n] NUL-terminated, 1..STOP_STRING_MAX_LEN bytes */
    int n;
    size_t longest;                      /* bytes of the longest */
    char tail[STOP_STRING_MAX_LEN];      /* the last 'tail_len' (<= longest) bytes generated */
    size_t tail_len;
};
/* Adds the text just printed; returns true when the generated text now ends with a stop string. */
bool stop_strings_push(struct stop_strings * st, const char * text, size_t len);

#endif
