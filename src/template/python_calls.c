/* Reading Python-like tool calls into the output parser's calls (python_calls.h). */
#include "template/python_calls.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Literals nest at most this deep: a model's arguments never do, a hostile text cannot recurse
 * without bound. */
enum { PY_MAX_DEPTH = 32, PY_MAX_NAME = 256, PY_MAX_NUMBER = 64 };

typedef struct py_reader {
    const char *s, *end;
    int depth;
} py_reader;

static void py_space(py_reader *r)
{
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r'))
        r->s++;
}

/* Whether the next byte (after space) is c; taken when it is. */
static bool py_take(py_reader *r, char c)
{
    py_space(r);
    if (r->s < r->end && *r->s == c) {
        r->s++;
        return true;
    }
    return false;
}

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

/* A word of name characters (a function's name may also hold '.' and '-', as tool names do);
 * its length, 0 when there is none. */
static size_t py_word(py_reader *r, bool function_name)
{
    py_space(r);
    const char *w = r->s;
    if (r->s >= r->end || !name_start(*r->s))
        return 0;
    while (r->s < r->end &&
           (name_char(*r->s) || (function_name && (*r->s == '.' || *r->s == '-'))))
        r->s++;
    return (size_t)(r->s - w);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* digits hex digits at s as a number; -1 when they are not. */
static long hex_value(const char *s, const char *end, int digits)
{
    if (end - s < digits)
        return -1;
    long v = 0;
    for (int i = 0; i < digits; i++) {
        int d = hex_digit(s[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Code point cp as UTF-8 into out (4 bytes at most); its length, 0 for a surrogate or past
 * U+10FFFF, which JSON text cannot hold. */
static size_t utf8_put(unsigned long cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A quoted string (r at its quote) with Python's escapes: \n \t \r \\ \' \" \0, \xHH,
 * \uHHHH (a surrogate pair as one character), \UHHHHHHHH; any other escape is kept as
 * written, as Python keeps it. NULL when it never closes or holds no valid text. */
static json_t *py_string(py_reader *r)
{
    char quote = *r->s++;
    /* the decoded text is never longer than the quoted one */
    const char *close = r->s;
    while (close < r->end && *close != quote)
        close += *close == '\\' && close + 1 < r->end ? 2 : 1;
    if (close >= r->end)
        return NULL;
    char *text = malloc((size_t)(close - r->s) + 1);
    if (!text)
        return NULL;
    size_t n = 0;
    const char *s = r->s;
    while (s < close) {
        if (*s != '\\') {
            text[n++] = *s++;
            continue;
        }
        char e = s[1];
        s += 2;
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        long cp = digits ? hex_value(s, close, digits) : -1;
        switch (e) {
        case 'n': cp = '\n'; break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case '0': cp = 0; break;
        case '\\': case '\'': case '"': cp = e; break;
        default: s += cp >= 0 ? digits : 0;
        }
        if (cp < 0) { /* not an escape Python reads: the backslash stays */
            text[n++] = '\\';
            s--;
            continue;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF && close - s >= 6 && s[0] == '\\' && s[1] == 'u') {
            long low = hex_value(s + 2, close, 4);
            if (low >= 0xDC00 && low <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                s += 6;
            }
        }
        size_t k = utf8_put((unsigned long)cp, text + n);
        if (k == 0) {
            free(text);
            return NULL;
        }
        n += k;
    }
    r->s = close + 1;
    json_t *v = json_stringn(text, n); /* NULL for text that is not UTF-8 */
    free(text);
    return v;
}

/* A number (integer, or float with a point or an exponent), or NULL. */
static json_t *py_number(py_reader *r)
{
    const char *w = r->s;
    while (r->s < r->end && (name_char(*r->s) || *r->s == '.' || *r->s == '-' || *r->s == '+') &&
           (size_t)(r->s - w) < PY_MAX_NUMBER)
        r->s++;
    size_t n = (size_t)(r->s - w);
    char buf[PY_MAX_NUMBER + 1];
    memcpy(buf, w, n);
    buf[n] = '\0';
    char *stop;
    errno = 0;
    if (!strpbrk(buf, ".eE")) {
        long long i = strtoll(buf, &stop, 10);
        if (n > 0 && *stop == '\0' && errno == 0)
            return json_integer(i);
        return NULL;
    }
    double d = strtod(buf, &stop);
    if (n == 0 || *stop != '\0' || errno != 0 || !strchr("0123456789.-+", buf[0]))
        return NULL;
    /* a whole number as an integer, as the other call syntaxes and ollama's JSON write it */
    if (d == floor(d) && fabs(d) < 9007199254740992.0)
        return json_integer((json_int_t)d);
    return json_real(d);
}

static json_t *py_value(py_reader *r);

/* Values up to close, by commas (one more comma allowed at the end): a list, a tuple, or
 * (dict) a mapping of key: value. r is past the opening bracket. */
static json_t *py_items(py_reader *r, char close, bool dict)
{
    json_t *out = dict ? json_object() : json_array();
    if (!out)
        return NULL;
    while (!py_take(r, close)) {
        json_t *key = NULL, *v = NULL;
        if (dict) {
            key = py_value(r);
            if (key && !json_is_string(key)) { /* a number's text, as JSON keys are */
                char *text = json_dumps(key, JSON_ENCODE_ANY);
                json_decref(key);
                key = text ? json_string(text) : NULL;
                free(text);
            }
            if (key && py_take(r, ':'))
                v = py_value(r);
        } else {
            v = py_value(r);
        }
        bool ok = v && (dict ? json_object_set_new(out, json_string_value(key), v)
                             : json_array_append_new(out, v)) == 0;
        json_decref(key);
        if (!ok || (!py_take(r, ',') && !(py_space(r), r->s < r->end && *r->s == close))) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* One Python literal, or NULL. */
static json_t *py_value(py_reader *r)
{
    py_space(r);
    if (r->s >= r->end || ++r->depth > PY_MAX_DEPTH)
        return NULL;
    json_t *v = NULL;
    char c = *r->s;
    if (c == '"' || c == '\'') {
        v = py_string(r);
    } else if (c == '[' || c == '(' || c == '{') {
        r->s++;
        v = py_items(r, c == '[' ? ']' : c == '(' ? ')' : '}', c == '{');
    } else if (name_start(c)) {
        static const struct {
            const char *word;
            int kind; /* 1 true, 0 false, -1 null */
        } words[] = {{"True", 1}, {"False", 0}, {"None", -1},
                     {"true", 1}, {"false", 0}, {"null", -1}};
        const char *w = r->s;
        size_t n = py_word(r, false);
        for (size_t i = 0; i < sizeof words / sizeof *words && !v; i++)
            if (strlen(words[i].word) == n && memcmp(w, words[i].word, n) == 0)
                v = words[i].kind < 0 ? json_null() : json_boolean(words[i].kind);
    } else {
        v = py_number(r);
    }
    r->depth--;
    return v;
}

/* NAME(KEY=VALUE, ...) into a call numbered index, or NULL. */
static json_t *py_call(py_reader *r, size_t index)
{
    const char *name = (py_space(r), r->s);
    size_t name_len = py_word(r, true);
    if (name_len == 0 || name_len > PY_MAX_NAME || !py_take(r, '('))
        return NULL;
    json_t *args = json_object();
    while (args && !py_take(r, ')')) {
        const char *key = (py_space(r), r->s);
        size_t key_len = py_word(r, false);
        char k[PY_MAX_NAME + 1];
        json_t *v = NULL;
        if (key_len > 0 && key_len <= PY_MAX_NAME && py_take(r, '=')) {
            memcpy(k, key, key_len);
            k[key_len] = '\0';
            v = py_value(r);
        }
        if (!v || json_object_set_new(args, k, v) != 0 ||
            (!py_take(r, ',') && !(py_space(r), r->s < r->end && *r->s == ')'))) {
            json_decref(args);
            args = NULL;
        }
    }
    if (!args)
        return NULL;
    return json_pack("{s:{s:I,s:s%,s:o}}", "function", "index", (json_int_t)index, "name", name,
                     name_len, "arguments", args);
}

bool python_calls_read(const char *s, size_t n, size_t first_index, json_t *found)
{
    py_reader r = {s, s + n, 0};
    size_t before = json_array_size(found);
    bool list = py_take(&r, '['), ok = true;
    for (;;) {
        py_space(&r);
        if (list && py_take(&r, ']')) {
            list = false; /* closed */
            break;
        }
        if (r.s == r.end)
            break;
        json_t *call = py_call(&r, first_index + json_array_size(found) - before);
        if (!call || json_array_append_new(found, call) != 0) {
            ok = false;
            break;
        }
        py_take(&r, ',');
    }
    py_space(&r);
    if (!ok || list || r.s != r.end || json_array_size(found) == before) {
        while (json_array_size(found) > before)
            json_array_remove(found, json_array_size(found) - 1);
        return false;
    }
    return true;
}
