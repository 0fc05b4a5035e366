/* utf8.c -- UTF-8 validation shared by the tokenizer (character split) and the streaming detokenizer. */
#include "vocab-impl.h"

int loom_utf8_check(const uint8_t * s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    /* RFC 3629 table: the allowed range of the second byte depends on the lead byte (this excludes
     * overlong forms, surrogates and code points above U+10FFFF). */
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c == 0xE0) {
        need = 2, lo = 0xA0;
    } else if (c == 0xED) {
        need = 2, hi = 0x9F;
    } else if (c >= 0xE1 && c <= 0xEF) {
        need = 2;
    } else if (c == 0xF0) {
        need = 3, lo = 0x90;
    } else if (c == 0xF4) {
        need = 3, hi = 0x8F;
    } else if (c >= 0xF1 && c <= 0xF3) {
        need = 3;
    } else {
        return -1; /* 80..C1, F5..FF never start a character */
    }
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n) return 0;
        if (s[i] < lo || s[i] > hi) return -i;
        lo = 0x80, hi = 0xBF;
    }
    return need + 1;
}
