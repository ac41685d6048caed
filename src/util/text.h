/*
 * Text helpers every layer shares: the value of a hex digit, and the UTF-8 encoding of one
 * code point. Header-only, like checked.h. utf8proc's encoder is not used here because it
 * writes U+FFFE and U+FFFF as single raw bytes (its own internal markers), which would turn a
 * template's or a test case's escape into invalid UTF-8.
 */
#ifndef CORRAL_UTIL_TEXT_H
#define CORRAL_UTIL_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* 0..15 for [0-9a-fA-F], else -1. */
static inline int text_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Canonical encoding of cp (<= 0x10FFFF, surrogates included) into out[0..4); returns 1..4. */
static inline size_t text_utf8_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

#endif
