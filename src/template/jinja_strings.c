/* Python string semantics for the Jinja builtins; see jinja_strings.h. */
#include "template/jinja_strings.h"

#include <string.h>
#include <utf8proc.h>

/* Decode one code point; invalid bytes come back as themselves with length 1. */
static size_t decode(const char *s, size_t n, size_t i, utf8proc_int32_t *cp)
{
    utf8proc_ssize_t len =
        utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), cp);
    if (len <= 0) {
        *cp = -1;
        return 1;
    }
    return (size_t)len;
}

static bool is_space_cp(utf8proc_int32_t c)
{
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85)
        return true;
    if (c < 0x80)
        return false;
    utf8proc_category_t cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
           cat == UTF8PROC_CATEGORY_ZP;
}

size_t jstr_space_at(const char *s, size_t n, size_t i)
{
    utf8proc_int32_t cp;
    size_t len = decode(s, n, i, &cp);
    return cp >= 0 && is_space_cp(cp) ? len : 0;
}

static bool in_chars(const char *s, size_t n, size_t i, size_t len, const char *chars,
                     size_t n_chars)
{
    if (!chars)
        return jstr_space_at(s, n, i) != 0;
    for (size_t k = 0; k + len <= n_chars;) {
        utf8proc_int32_t cp;
        size_t clen = decode(chars, n_chars, k, &cp);
        if (clen == len && memcmp(chars + k, s + i, len) == 0)
            return true;
        k += clen;
    }
    return false;
}

void jstr_strip(const char *s, size_t n, const char *chars, size_t n_chars, bool left, bool right,
                size_t *start, size_t *end)
{
    size_t a = 0, b = n;
    utf8proc_int32_t cp;
    while (left && a < b) {
        size_t len = decode(s, n, a, &cp);
        if (!in_chars(s, n, a, len, chars, n_chars))
            break;
        a += len;
    }
    while (right && b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s[k] & 0xc0) == 0x80)
            k--;
        size_t len = decode(s, n, k, &cp);
        if (k + len != b)
            len = b - k;
        if (!in_chars(s, n, k, len, chars, n_chars))
            break;
        b = k;
    }
    *start = a;
    *end = b;
}

static bool is_cased(utf8proc_int32_t c)
{
    utf8proc_category_t cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
           cat == UTF8PROC_CATEGORY_LT;
}

bool jstr_case(tbuf *out, const char *s, size_t n, jcase mode)
{
    bool previous_cased = false;
    bool first = true;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        size_t len = decode(s, n, i, &cp);
        if (cp < 0) {
            if (!tbuf_append(out, s + i, len))
                return false;
            i += len;
            previous_cased = false;
            first = false;
            continue;
        }
        utf8proc_int32_t mapped = cp;
        switch (mode) {
        case JCASE_UPPER:
            mapped = utf8proc_toupper(cp);
            break;
        case JCASE_LOWER:
            mapped = utf8proc_tolower(cp);
            break;
        case JCASE_TITLE:
            mapped = previous_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
            break;
        case JCASE_CAPITALIZE:
            mapped = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
            break;
        }
        previous_cased = is_cased(cp);
        first = false;
        utf8proc_uint8_t buf[4];
        utf8proc_ssize_t blen = utf8proc_encode_char(mapped, buf);
        if (!tbuf_append(out, (const char *)buf, (size_t)blen))
            return false;
        i += len;
    }
    return true;
}
