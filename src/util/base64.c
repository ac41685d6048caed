/* Base64 encoding; strict, bounded base64 and data: URL decoding (see base64.h). */
#include "util/base64.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int sextet(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static bool is_line_break(char c)
{
    return c == '\r' || c == '\n';
}

char *util_base64_encode(const uint8_t *data, size_t len)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len / 3 >= (SIZE_MAX - 1) / 4 - 1)
        return NULL;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < len ? (uint32_t)data[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

uint8_t *util_base64_decode(const char *text, size_t len, size_t max_bytes, size_t *out_len,
                            corral_error *err)
{
    /* First pass: the significant characters and the padding, so the exact size is known. */
    size_t n = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_line_break(text[i]))
            continue;
        if (text[i] == '=') {
            pad++;
        } else if (pad > 0 || sextet((unsigned char)text[i]) < 0) {
            if (pad > 0)
                corral_error_set(err, "invalid base64: data after '=' padding at offset %zu", i);
            else
                corral_error_set(err, "invalid base64: character 0x%02x at offset %zu",
                                 (unsigned char)text[i], i);
            return NULL;
        }
        n++;
    }
    if (n % 4 != 0 || pad > 2) {
        corral_error_set(err, "invalid base64: %zu characters%s, not a padded multiple of 4", n,
                         pad > 2 ? " with too much padding" : "");
        return NULL;
    }
    size_t bytes = n / 4 * 3 - pad;
    if (bytes > max_bytes) {
        corral_error_set(err, "decoded data larger than %zu bytes", max_bytes);
        return NULL;
    }
    uint8_t *out = malloc(bytes ? bytes : 1);
    if (!out) {
        corral_error_set(err, "out of memory for %zu decoded bytes", bytes);
        return NULL;
    }
    /* Second pass: every character is valid and '=' only ends the text. */
    uint32_t acc = 0;
    size_t got = 0, o = 0;
    for (size_t i = 0; i < len; i++) {
        if (is_line_break(text[i]))
            continue;
        int v = text[i] == '=' ? 0 : sextet((unsigned char)text[i]);
        acc = acc << 6 | (uint32_t)v;
        if (++got % 4 == 0) {
            uint8_t triple[3] = {(uint8_t)(acc >> 16), (uint8_t)(acc >> 8), (uint8_t)acc};
            size_t take = bytes - o < 3 ? bytes - o : 3;
            memcpy(out + o, triple, take);
            o += take;
            acc = 0;
        }
    }
    *out_len = bytes;
    return out;
}

uint8_t *util_data_url_decode(const char *url, size_t len, size_t max_bytes, char *mime,
                              size_t mime_size, size_t *out_len, corral_error *err)
{
    if (mime_size)
        mime[0] = '\0';
    if (len < 5 || strncasecmp(url, "data:", 5) != 0) {
        corral_error_set(err, "only data: URLs are accepted (an image is never fetched)");
        return NULL;
    }
    const char *comma = memchr(url, ',', len);
    if (!comma) {
        corral_error_set(err, "data: URL has no ',' before its data");
        return NULL;
    }
    /* header: [type/subtype][;param=value]...[;base64] */
    const char *header = url + 5;
    size_t header_len = (size_t)(comma - header);
    if (header_len < 7 || strncasecmp(comma - 7, ";base64", 7) != 0) {
        corral_error_set(err, "data: URL is not base64-encoded");
        return NULL;
    }
    const char *semi = memchr(header, ';', header_len);
    size_t type_len = (size_t)(semi - header);
    if (type_len + 1 > mime_size) {
        corral_error_set(err, "data: URL media type is too long");
        return NULL;
    }
    for (size_t i = 0; i < type_len; i++) {
        unsigned char c = (unsigned char)header[i];
        if (!isalnum(c) && !strchr("/.+-_", c)) {
            corral_error_set(err, "data: URL media type has an invalid character");
            return NULL;
        }
        mime[i] = (char)tolower(c);
    }
    if (mime_size)
        mime[type_len] = '\0';
    size_t data_len = len - (size_t)(comma + 1 - url);
    return util_base64_decode(comma + 1, data_len, max_bytes, out_len, err);
}
