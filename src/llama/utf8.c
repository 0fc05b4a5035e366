/* utf8.c -- UTF-8 validation (tokenizer, streaming detokenizer, the CLI) and the reference engine's lax reading. */
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

size_t loom_utf8_read_lax(const uint8_t * s, size_t n, uint32_t * cp) {
    uint8_t c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 1) {
        *cp = c;
        return 1;
    }
    if (len == 0 || len > n) { /* a continuation byte, F8..FF, or a sequence cut short */
        *cp = 0xFFFD;
        return 1;
    }
    uint32_t v = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3Fu);
    }
    *cp = v;
    return len;
}

size_t loom_utf8_write(uint32_t cp, char * out) {
    if (cp > 0x10FFFF) cp = 0xFFFD;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
