/*
 * ollama's show text (see modelfile_text.h). Values are formatted as Go formats the
 * float64/string/bool it decoded from the PARAMS JSON, so the text matches byte for byte.
 */
#include "server/models/modelfile_text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable string; any allocation failure sticks and is reported at the end. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
    bool failed;
} text_buf;

static void buf_append(text_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_puts(text_buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

static void buf_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(text_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    buf_append(b, small, (size_t)n < sizeof small ? (size_t)n : sizeof small - 1);
}

static char *buf_finish(text_buf *b)
{
    if (b->failed) {
        free(b->data);
        return NULL;
    }
    if (!b->data)
        return strdup("");
    return b->data;
}

/* Go's %v of a float64 (strconv 'g', shortest): the fewest digits that read back, in %e
 * form when the decimal exponent is below -4 or at least 6 ("1e+06", "4096", "0.7"). */
static void format_go_float(double v, char *out, size_t cap)
{
    if (isnan(v) || isinf(v)) {
        snprintf(out, cap, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char digits[40];
    int precision = 1;
    for (; precision <= 17; precision++) {
        snprintf(digits, sizeof digits, "%.*e", precision - 1, v);
        if (strtod(digits, NULL) == v)
            break;
    }
    int exponent = atoi(strchr(digits, 'e') + 1);
    if (exponent < -4 || exponent >= 6) {
        snprintf(out, cap, "%s", digits); /* C's %e exponent form is Go's: "1.5e+06" */
        return;
    }
    int decimals = precision - 1 - exponent;
    snprintf(out, cap, "%.*f", decimals > 0 ? decimals : 0, v);
}

/* Go's %#v of a string: strconv.Quote. */
static void append_go_quoted(text_buf *b, const char *s)
{
    buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\t': buf_puts(b, "\\t"); break;
        case '\r': buf_puts(b, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                buf_printf(b, "\\x%02x", *p);
            else
                buf_append(b, (const char *)p, 1);
        }
    }
    buf_puts(b, "\"");
}

/* A value as Go's %v (quoted false) or %#v (quoted true) prints it. */
static void append_go_value(text_buf *b, const json_t *v, bool quoted)
{
    char num[64];
    if (json_is_string(v)) {
        if (quoted)
            append_go_quoted(b, json_string_value(v));
        else
            buf_puts(b, json_string_value(v));
    } else if (json_is_number(v)) {
        format_go_float(json_number_value(v), num, sizeof num);
        buf_puts(b, num);
    } else if (json_is_boolean(v)) {
        buf_puts(b, json_is_true(v) ? "true" : "false");
    } else {
        buf_puts(b, "<nil>");
    }
}

char *modelfile_parameters_text(const json_t *params)
{
    text_buf b = {0};
    const char *key;
    json_t *value;
    bool first = true;
    json_object_foreach((json_t *)params, key, value) {
        size_t n = json_is_array(value) ? json_array_size(value) : 1;
        for (size_t i = 0; i < n; i++) {
            buf_printf(&b, "%s%-30s ", first ? "" : "\n", key);
            append_go_value(&b, json_is_array(value) ? json_array_get(value, i) : value, true);
            first = false;
        }
    }
    return buf_finish(&b);
}

/* Whether s reads back whole between two quotes (`"` or `"""`): the Modelfile parser ends
 * such a value at the first quote that only blanks separate from the end of its line, and
 * takes a value that starts with `"""` as triple-quoted. */
static bool reads_back_quoted(const char *s, const char *quote)
{
    size_t qlen = strlen(quote);
    if (qlen == 1 && (strncmp(s, "\"\"", 2) == 0 || strcmp(s, "\"") == 0))
        return false;
    for (const char *q = strstr(s, quote); q; q = strstr(q + 1, quote)) {
        const char *after = q + qlen + strspn(q + qlen, " \t");
        if (*after == '\n' || *after == '\r')
            return false;
    }
    return true;
}

/* Whether s reads back whole unquoted: a bare value is one line, trimmed at both ends, and
 * one that starts with a quote is read as quoted. */
static bool reads_back_bare(const char *s)
{
    size_t n = strlen(s);
    return n && !strpbrk(s, "\n\r") && s[0] != '"' && !strchr(" \t", s[0]) &&
           !strchr(" \t", s[n - 1]);
}

/*
 * A value as ollama's quote() writes it (bare unless it has a newline or edge spaces, then
 * `"""` when it holds a quote, else `"`), as long as that reads back as the same text;
 * otherwise the quoting that does, so that `corral create` of the written Modelfile gives
 * the model's texts back. Only a carriage return before a newline (which the parser drops,
 * as a Windows line end) and a `"""` ending a line inside the text cannot be written.
 */
static void append_modelfile_quoted(text_buf *b, const char *s)
{
    size_t n = strlen(s);
    bool needs = strchr(s, '\n') || (n && (s[0] == ' ' || s[n - 1] == ' '));
    const char *q = "";
    if (needs || !reads_back_bare(s)) {
        q = strchr(s, '"') ? "\"\"\"" : "\"";
        const char *other = q[1] ? "\"" : "\"\"\"";
        if (!reads_back_quoted(s, q) && reads_back_quoted(s, other))
            q = other;
    }
    buf_printf(b, "%s", q);
    buf_puts(b, s);
    buf_printf(b, "%s\n", q);
}

static void append_command(text_buf *b, const char *name, const char *args)
{
    buf_printf(b, "%s ", name);
    append_modelfile_quoted(b, args);
}

char *modelfile_generate(const model_ref *ref)
{
    text_buf b = {0};
    buf_puts(&b, "# Modelfile generated by \"ollama show\"\n");
    buf_puts(&b, "# To build a new Modelfile based on this, replace FROM with:\n");
    buf_printf(&b, "# FROM %s\n\n", ref->display);
    if (ref->model_path)
        buf_printf(&b, "FROM %s\n", ref->model_path);
    for (size_t i = 0; i < ref->n_adapters; i++)
        buf_printf(&b, "ADAPTER %s\n", ref->adapter_paths[i]);
    if (ref->draft_path)
        buf_printf(&b, "DRAFT %s\n", ref->draft_path);
    if (ref->template_text)
        append_command(&b, "TEMPLATE", ref->template_text);
    if (ref->system && ref->system[0])
        append_command(&b, "SYSTEM", ref->system);
    const char *key;
    json_t *value;
    json_object_foreach(ref->params, key, value) {
        size_t n = json_is_array(value) ? json_array_size(value) : 1;
        for (size_t i = 0; i < n; i++) {
            text_buf v = {0};
            append_go_value(&v, json_is_array(value) ? json_array_get(value, i) : value, false);
            char *text = buf_finish(&v);
            if (!text) {
                b.failed = true;
                break;
            }
            buf_printf(&b, "PARAMETER %s ", key);
            append_modelfile_quoted(&b, text);
            free(text);
        }
    }
    if (ref->license)
        append_command(&b, "LICENSE", ref->license);
    size_t i;
    json_t *msg;
    json_array_foreach(ref->messages, i, msg) {
        const char *role = json_string_value(json_object_get(msg, "role"));
        const char *content = json_string_value(json_object_get(msg, "content"));
        buf_printf(&b, "MESSAGE %s ", role ? role : "");
        append_modelfile_quoted(&b, content ? content : "");
    }
    return buf_finish(&b);
}
