/*
 * UTF-8 decoding, encoding and validation for the tokenizers; see utf8.h. The lenient decoder
 * mirrors llama.cpp's unicode_cpt_from_utf8 + its U+FFFD fallback, so the code points BPE
 * pre-tokenizes are the ones llama.cpp sees.
 */
#include "utf8.h"

static int is_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

uint32_t utf8_decode_lenient(const unsigned char *s, size_t len, size_t *n_bytes)
{
    unsigned char lead = s[0];
    *n_bytes = 1;
    if (!(lead & 0x80))
        return lead;
    if (!(lead & 0x40))
        return UTF8_REPLACEMENT;
    if (!(lead & 0x20)) {
        if (len < 2 || !is_continuation(s[1]))
            return UTF8_REPLACEMENT;
        *n_bytes = 2;
        return ((uint32_t)(lead & 0x1F) << 6) | (s[1] & 0x3Fu);
    }
    if (!(lead & 0x10)) {
        if (len < 3 || !is_continuation(s[1]) || !is_continuation(s[2]))
            return UTF8_REPLACEMENT;
        *n_bytes = 3;
        return ((uint32_t)(lead & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3Fu);
    }
    if (!(lead & 0x08)) {
        if (len < 4 || !is_continuation(s[1]) || !is_continuation(s[2]) || !is_continuation(s[3]))
            return UTF8_REPLACEMENT;
        *n_bytes = 4;
        uint32_t cp = ((uint32_t)(lead & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                      ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3Fu);
        return cp <= 0x10FFFF ? cp : UTF8_REPLACEMENT;
    }
    return UTF8_REPLACEMENT;
}

size_t utf8_len_from_lead(unsigned char lead)
{
    static const unsigned char len_by_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                                    1, 1, 1, 1, 2, 2, 3, 4};
    return len_by_nibble[lead >> 4];
}

/*
 * Length of the valid sequence at s (0 if invalid); *partial set when s[0..len) is a proper
 * prefix of some valid sequence. Ranges follow RFC 3629 table 3 (no overlongs, surrogates or
 * values past U+10FFFF).
 */
static size_t valid_sequence_len(const unsigned char *s, size_t len, int *partial)
{
    unsigned char c = s[0];
    *partial = 0;
    if (c < 0x80)
        return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= len) {
            *partial = 1;
            return 0;
        }
        unsigned char b = s[i];
        if (i == 1 ? (b < lo || b > hi) : !is_continuation(b))
            return 0;
    }
    return need;
}

size_t utf8_valid_prefix(const unsigned char *s, size_t len, int *incomplete_tail)
{
    size_t pos = 0;
    *incomplete_tail = 0;
    while (pos < len) {
        int partial;
        size_t n = valid_sequence_len(s + pos, len - pos, &partial);
        if (n == 0) {
            *incomplete_tail = partial;
            break;
        }
        pos += n;
    }
    return pos;
}
