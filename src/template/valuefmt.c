/*
 * Printing values the way Go and Python print them; see valuefmt.h. Floats use the shortest
 * digits that read back to the same double, then each language's rule for when to switch to
 * exponent notation.
 */
#include "template/valuefmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

/* Shortest decimal digits of d (> 0, finite) and the exponent of the first digit. */
static void shortest_digits(double d, char digits[24], int *exp10)
{
    char text[40];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(text, sizeof text, "%.*e", prec, d);
        if (strtod(text, NULL) == d)
            break;
    }
    size_t n = 0;
    const char *p = text;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && n < 23)
            digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
    *exp10 = *p == 'e' ? atoi(p + 1) : 0;
}

/* Digits placed with the decimal point after exp10+1 digits; min_frac forces ".0". */
static bool put_fixed(tbuf *out, const char *digits, int exp10, bool min_frac)
{
    int nd = (int)strlen(digits);
    bool ok = true;
    if (exp10 < 0) {
        ok = tbuf_puts(out, "0.");
        for (int i = -1; i > exp10 && ok; i--)
            ok = tbuf_putc(out, '0');
        return ok && tbuf_puts(out, digits);
    }
    for (int i = 0; i <= exp10 && ok; i++)
        ok = tbuf_putc(out, i < nd ? digits[i] : '0');
    if (nd > exp10 + 1)
        ok = ok && tbuf_putc(out, '.') && tbuf_puts(out, digits + exp10 + 1);
    else if (min_frac)
        ok = ok && tbuf_puts(out, ".0");
    return ok;
}

static bool put_exponent(tbuf *out, const char *digits, int exp10, bool two_digit_exp)
{
    bool ok = tbuf_putc(out, digits[0]);
    if (digits[1])
        ok = ok && tbuf_putc(out, '.') && tbuf_puts(out, digits + 1);
    return ok &&
           tbuf_printf(out, two_digit_exp ? "e%c%02d" : "e%c%d", exp10 < 0 ? '-' : '+', abs(exp10));
}

static bool put_special(tbuf *out, double d, const char *inf, const char *nan)
{
    if (isnan(d))
        return tbuf_puts(out, nan);
    return (d < 0 ? tbuf_putc(out, '-') : true) && tbuf_puts(out, inf);
}

bool tfmt_py_float(tbuf *out, double d)
{
    if (!isfinite(d))
        return put_special(out, d, "inf", "nan");
    if (d == 0)
        return tbuf_puts(out, signbit(d) ? "-0.0" : "0.0");
    if (d < 0 && !tbuf_putc(out, '-'))
        return false;
    char digits[24];
    int exp10;
    shortest_digits(fabs(d), digits, &exp10);
    if (exp10 < -4 || exp10 >= 16)
        return put_exponent(out, digits, exp10, true);
    return put_fixed(out, digits, exp10, true);
}

/* Go's strconv.FormatFloat(d, 'g', -1, 64), which fmt's %v uses. */
bool tfmt_go_float(tbuf *out, double d)
{
    if (!isfinite(d))
        return put_special(out, d, "Inf", "NaN");
    if (d == 0)
        return tbuf_puts(out, signbit(d) ? "-0" : "0");
    if (d < 0 && !tbuf_putc(out, '-'))
        return false;
    char digits[24];
    int exp10;
    shortest_digits(fabs(d), digits, &exp10);
    /* strconv: with shortest precision, exponents from 6 on switch to %e. */
    if (exp10 < -4 || exp10 >= 6)
        return put_exponent(out, digits, exp10, true);
    return put_fixed(out, digits, exp10, false);
}

/* Go's encoding/json float: plain unless tiny or huge. */
static bool go_json_float(tbuf *out, double d)
{
    if (!isfinite(d))
        return tbuf_puts(out, "null");
    if (d == 0)
        return tbuf_puts(out, "0");
    if (d < 0 && !tbuf_putc(out, '-'))
        return false;
    char digits[24];
    int exp10;
    shortest_digits(fabs(d), digits, &exp10);
    double a = fabs(d);
    if (a < 1e-6 || a >= 1e21)
        return put_exponent(out, digits, exp10, false);
    return put_fixed(out, digits, exp10, false);
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static bool put_json_string(tbuf *out, const char *s, size_t n, const tjson_style *style)
{
    const unsigned char *u = (const unsigned char *)s;
    if (!tbuf_putc(out, '"'))
        return false;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        bool ok;
        if (c == '"' || c == '\\') {
            ok = tbuf_putc(out, '\\') && tbuf_putc(out, (char)c);
        } else if (c == '\n') {
            ok = tbuf_puts(out, "\\n");
        } else if (c == '\r') {
            ok = tbuf_puts(out, "\\r");
        } else if (c == '\t') {
            ok = tbuf_puts(out, "\\t");
        } else if (style->python && c == '\b') {
            ok = tbuf_puts(out, "\\b");
        } else if (style->python && c == '\f') {
            ok = tbuf_puts(out, "\\f");
        } else if (c < 0x20 || (style->html_escape && (c == '<' || c == '>' || c == '&'))) {
            ok = tbuf_printf(out, "\\u%04x", c);
        } else if (c < 0x80) {
            ok = tbuf_putc(out, (char)c);
        } else {
            size_t len = utf8_seq_len(u + i, n - i);
            if (len == 0) {
                ok = tbuf_puts(out, style->python ? "\\ufffd" : "\ufffd");
                i++;
                if (!ok)
                    return false;
                continue;
            }
            if (!style->python && len == 3 && u[i] == 0xe2 && u[i + 1] == 0x80 &&
                (u[i + 2] == 0xa8 || u[i + 2] == 0xa9))
                ok = tbuf_printf(out, "\\u20%s", u[i + 2] == 0xa8 ? "28" : "29");
            else
                ok = tbuf_append(out, s + i, len);
            i += len;
            if (!ok)
                return false;
            continue;
        }
        if (!ok)
            return false;
        i++;
    }
    return tbuf_putc(out, '"');
}

static bool json_newline(tbuf *out, const tjson_style *style, int level)
{
    if (style->indent < 0)
        return true;
    if (!tbuf_putc(out, '\n'))
        return false;
    for (int i = 0; i < level * style->indent; i++)
        if (!tbuf_putc(out, ' '))
            return false;
    return true;
}

/* An object key and its length: Jinja dicts store a non-str key (int, float, bool, None) as a
 * NUL byte, a type letter and the key's Python repr (see jinja_value.c). */
typedef struct object_key {
    const char *s;
    size_t n;
} object_key;

static bool is_typed_key(object_key k)
{
    return k.n >= 2 && k.s[0] == '\0';
}

static int compare_keys(const void *pa, const void *pb)
{
    const object_key *a = pa, *b = pb;
    int c = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

/* A key as json.dumps writes it: a non-str key becomes the string of its JSON form. */
static bool put_json_key(tbuf *out, object_key k, const tjson_style *style)
{
    if (!is_typed_key(k))
        return put_json_string(out, k.s, k.n, style);
    const char *text = k.s[1] == 'n' ? "null" : k.s[1] != 'b' ? k.s + 2 : k.s[2] == 'T' ? "true"
                                                                                         : "false";
    return tbuf_putc(out, '"') && tbuf_puts(out, text) && tbuf_putc(out, '"');
}

bool tfmt_is_method(const json_t *v)
{
    return json_is_object(v) && json_object_size(v) == 1 &&
           json_object_getn(v, TFMT_METHOD_KEY, 2) != NULL;
}

static bool json_value(tbuf *out, const json_t *v, const tjson_style *style, int level);

static bool json_object_text(tbuf *out, const json_t *v, const tjson_style *style, int level)
{
    size_t n = json_object_size(v);
    if (n == 0)
        return tbuf_puts(out, "{}");
    object_key *keys = malloc(n * sizeof *keys);
    if (!keys)
        return false;
    size_t k = 0;
    const char *key;
    size_t key_len;
    json_t *item;
    json_object_keylen_foreach((json_t *)v, key, key_len, item)
    {
        keys[k++] = (object_key){key, key_len};
    }
    if (style->sort_keys)
        qsort(keys, k, sizeof *keys, compare_keys);
    const char *item_sep = style->indent >= 0 ? "," : style->python ? ", " : ",";
    const char *key_sep = style->python || style->indent >= 0 ? ": " : ":";
    bool ok = tbuf_putc(out, '{');
    for (size_t i = 0; i < k && ok; i++) {
        if (i)
            ok = tbuf_puts(out, item_sep);
        ok = ok && json_newline(out, style, level + 1) &&
             put_json_key(out, keys[i], style) && tbuf_puts(out, key_sep) &&
             json_value(out, json_object_getn(v, keys[i].s, keys[i].n), style, level + 1);
    }
    free(keys);
    return ok && json_newline(out, style, level) && tbuf_putc(out, '}');
}

static bool json_value(tbuf *out, const json_t *v, const tjson_style *style, int level)
{
    if (level > TFMT_MAX_DEPTH)
        return false;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return !tfmt_is_method(v) && json_object_text(out, v, style, level);
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (n == 0)
            return tbuf_puts(out, "[]");
        const char *sep = style->indent >= 0 ? "," : style->python ? ", " : ",";
        bool ok = tbuf_putc(out, '[');
        for (size_t i = 0; i < n && ok; i++) {
            if (i)
                ok = tbuf_puts(out, sep);
            ok = ok && json_newline(out, style, level + 1) &&
                 json_value(out, json_array_get(v, i), style, level + 1);
        }
        return ok && json_newline(out, style, level) && tbuf_putc(out, ']');
    }
    case JSON_STRING:
        return put_json_string(out, json_string_value(v), json_string_length(v), style);
    case JSON_INTEGER:
        return tbuf_printf(out, "%lld", (long long)json_integer_value(v));
    case JSON_REAL:
        if (style->python) {
            double d = json_real_value(v);
            if (isnan(d))
                return tbuf_puts(out, "NaN");
            if (isinf(d))
                return tbuf_puts(out, d < 0 ? "-Infinity" : "Infinity");
            return tfmt_py_float(out, d);
        }
        return go_json_float(out, json_real_value(v));
    case JSON_TRUE:
        return tbuf_puts(out, "true");
    case JSON_FALSE:
        return tbuf_puts(out, "false");
    case JSON_NULL:
        return tbuf_puts(out, "null");
    }
    return false;
}

bool tfmt_json(tbuf *out, const json_t *v, const tjson_style *style)
{
    if (!v)
        return tbuf_puts(out, "null");
    return json_value(out, v, style, 0);
}

/* Python's str.isprintable for one code point: every category but the separators and the
 * "other" ones (control, format, surrogate, private use, unassigned); ' ' is the exception. */
static bool py_printable(utf8proc_int32_t cp)
{
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
        return false;
    case UTF8PROC_CATEGORY_ZS:
        return cp == ' ';
    default:
        return true;
    }
}

/* A lone surrogate as the Jinja lexer writes a '\udxxx' escape: ED A0..BF 80..BF. */
static bool is_encoded_surrogate(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    return n >= 3 && u[0] == 0xed && u[1] >= 0xa0 && u[1] <= 0xbf && (u[2] & 0xc0) == 0x80;
}

/* str.__repr__: single quotes unless the text holds ' and no "; the quote, '\\', \t \n \r and
 * every code point str.isprintable rejects escaped, as \xhh, \uhhhh or \Uhhhhhhhh by size.
 * Other bytes that are not UTF-8 (no Python str holds them) pass through as they are. */
static bool py_repr_string(tbuf *out, const char *s, size_t n)
{
    char quote = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    bool ok = tbuf_putc(out, quote);
    for (size_t i = 0; i < n && ok;) {
        unsigned char c = (unsigned char)s[i];
        utf8proc_int32_t cp = c;
        utf8proc_ssize_t len = 1;
        if (c >= 0x80) {
            len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
            if (len <= 0 && is_encoded_surrogate(s + i, n - i)) {
                cp = 0xd000 | ((s[i + 1] & 0x3f) << 6) | (s[i + 2] & 0x3f);
                len = 3;
            } else if (len <= 0) {
                ok = tbuf_putc(out, (char)c);
                i++;
                continue;
            }
        }
        if (cp == (unsigned char)quote || cp == '\\')
            ok = tbuf_putc(out, '\\') && tbuf_putc(out, (char)c);
        else if (cp == '\n')
            ok = tbuf_puts(out, "\\n");
        else if (cp == '\r')
            ok = tbuf_puts(out, "\\r");
        else if (cp == '\t')
            ok = tbuf_puts(out, "\\t");
        else if (py_printable(cp))
            ok = tbuf_append(out, s + i, (size_t)len);
        else
            ok = tbuf_printf(out, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x",
                             (unsigned)cp);
        i += (size_t)len;
    }
    return ok && tbuf_putc(out, quote);
}

static bool py_repr_depth(tbuf *out, const json_t *v, int level);

static bool py_method(tbuf *out, const json_t *method)
{
    const json_t *bound = json_object_getn(method, TFMT_METHOD_KEY, 2);
    const json_t *self = json_array_get(bound, 0);
    const char *type = json_is_object(self) ? "dict" : json_is_array(self) ? "list" : "str";
    return tbuf_printf(out, "<built-in method %s of %s object>",
                       json_string_value(json_array_get(bound, 1)), type);
}

static bool py_container(tbuf *out, const json_t *v, int level)
{
    if (level > TFMT_MAX_DEPTH)
        return false;
    if (tfmt_is_method(v))
        return py_method(out, v);
    bool ok;
    if (json_is_array(v)) {
        ok = tbuf_putc(out, '[');
        for (size_t i = 0; i < json_array_size(v) && ok; i++)
            ok = (i ? tbuf_puts(out, ", ") : true) &&
                 py_repr_depth(out, json_array_get(v, i), level + 1);
        return ok && tbuf_putc(out, ']');
    }
    ok = tbuf_putc(out, '{');
    const char *key;
    size_t key_len;
    json_t *item;
    bool first = true;
    json_object_keylen_foreach((json_t *)v, key, key_len, item)
    {
        if (!ok)
            break;
        object_key k = {key, key_len};
        ok = (first ? true : tbuf_puts(out, ", ")) &&
             (is_typed_key(k) ? tbuf_append(out, key + 2, key_len - 2)
                              : py_repr_string(out, key, key_len)) &&
             tbuf_puts(out, ": ") && py_repr_depth(out, item, level + 1);
        first = false;
    }
    return ok && tbuf_putc(out, '}');
}

static bool py_repr_depth(tbuf *out, const json_t *v, int level)
{
    if (!v)
        return tbuf_puts(out, "Undefined");
    switch (json_typeof(v)) {
    case JSON_STRING:
        return py_repr_string(out, json_string_value(v), json_string_length(v));
    case JSON_ARRAY:
    case JSON_OBJECT:
        return py_container(out, v, level);
    default:
        return tfmt_py_str(out, v);
    }
}

bool tfmt_py_repr(tbuf *out, const json_t *v)
{
    return py_repr_depth(out, v, 0);
}

bool tfmt_py_str(tbuf *out, const json_t *v)
{
    if (!v)
        return true;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return tbuf_append(out, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return tbuf_printf(out, "%lld", (long long)json_integer_value(v));
    case JSON_REAL:
        return tfmt_py_float(out, json_real_value(v));
    case JSON_TRUE:
        return tbuf_puts(out, "True");
    case JSON_FALSE:
        return tbuf_puts(out, "False");
    case JSON_NULL:
        return tbuf_puts(out, "None");
    default:
        return py_container(out, v, 0);
    }
}

bool tfmt_go_quote(tbuf *out, const char *s, size_t n)
{
    bool ok = tbuf_putc(out, '"');
    for (size_t i = 0; i < n && ok; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\a' ? "\\a"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                          : c == '\v' ? "\\v"
                                      : NULL;
        if (esc)
            ok = tbuf_puts(out, esc);
        else if (c < 0x20 || c == 0x7f)
            ok = tbuf_printf(out, "\\x%02x", c);
        else
            ok = tbuf_putc(out, (char)c);
    }
    return ok && tbuf_putc(out, '"');
}

bool tfmt_go(tbuf *out, const json_t *v)
{
    static const tjson_style go_json = {.python = false, .html_escape = true, .indent = -1};
    if (!v)
        return true;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return tbuf_append(out, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return tbuf_printf(out, "%lld", (long long)json_integer_value(v));
    case JSON_REAL:
        return tfmt_go_float(out, json_real_value(v));
    case JSON_TRUE:
        return tbuf_puts(out, "true");
    case JSON_FALSE:
        return tbuf_puts(out, "false");
    case JSON_NULL:
        return true;
    default:
        /* ollama's tool, argument and property types print themselves as JSON. */
        return tfmt_json(out, v, &go_json);
    }
}

bool tvalue_truth(const json_t *v)
{
    if (!v)
        return false;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return json_object_size(v) > 0;
    case JSON_ARRAY:
        return json_array_size(v) > 0;
    case JSON_STRING:
        return json_string_length(v) > 0;
    case JSON_INTEGER:
        return json_integer_value(v) != 0;
    case JSON_REAL:
        return json_real_value(v) != 0;
    case JSON_TRUE:
        return true;
    default:
        return false;
    }
}
