/*
 * Jinja lexer: splits a template into text and tag tokens with the whitespace rules HF
 * applies (trim_blocks, lstrip_blocks, "-" and "+" modifiers, the single trailing newline
 * dropped, {% raw %}), and tokenizes expressions inside tags, decoding string literals.
 */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_ast.h"
#include "template/sandbox.h"
#include "template/template.h"
#include "util/text.h"

typedef struct jlexer {
    const char *src;
    size_t len;
    size_t pos;
    tarena *arena;
    jtok_list *out;
    corral_error *err;
} jlexer;

static bool lex_fail(jlexer *lx, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool lex_fail(jlexer *lx, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tsandbox_vset_error(lx->err, lx->src, lx->len, pos, fmt, ap);
    va_end(ap);
    return false;
}

static bool emit(jlexer *lx, jtok tok)
{
    jtok_list *l = lx->out;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        jtok *items = realloc(l->items, cap * sizeof *items);
        if (!items)
            return lex_fail(lx, tok.pos, "out of memory");
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = tok;
    return true;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool starts(const jlexer *lx, size_t pos, const char *s)
{
    size_t n = strlen(s);
    return pos <= lx->len && lx->len - pos >= n && memcmp(lx->src + pos, s, n) == 0;
}

static const char *const operators[] = {
    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
    ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|",
};

/* A Python string literal at lx->pos; unknown escapes keep their backslash, as Python does. */
static bool lex_string(jlexer *lx)
{
    size_t start = lx->pos;
    char quote = lx->src[lx->pos++];
    size_t end = lx->pos;
    while (end < lx->len && lx->src[end] != quote)
        end += lx->src[end] == '\\' ? 2 : 1;
    if (end >= lx->len)
        return lex_fail(lx, start, "unterminated string");
    char *dst = tarena_alloc(lx->arena, end - lx->pos + 1);
    if (!dst)
        return lex_fail(lx, start, "template too large to parse");
    size_t k = 0;
    for (size_t i = lx->pos; i < end; i++) {
        char c = lx->src[i];
        if (c != '\\') {
            dst[k++] = c;
            continue;
        }
        char e = lx->src[++i];
        const char *from = "ntr\\'\"abfv0";
        const char *to = "\n\t\r\\'\"\a\b\f\v\0";
        const char *hit = strchr(from, e);
        if (hit && e) {
            dst[k++] = to[hit - from];
        } else if (e == '\n') {
            /* line continuation */
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned long cp = 0;
            for (int d = 0; d < digits; d++) {
                int h = i + 1 < end ? text_hex_digit(lx->src[i + 1]) : -1;
                if (h < 0)
                    return lex_fail(lx, start, "truncated \\x, \\u or \\U escape in string");
                cp = cp * 16 + (unsigned long)h;
                i++;
            }
            if (cp > 0x10ffff)
                return lex_fail(lx, start, "unicode escape out of range in string");
            unsigned char tmp[4];
            size_t n = text_utf8_encode((uint32_t)cp, tmp);
            if (k + n > end - lx->pos) /* escapes are never shorter than their bytes */
                return lex_fail(lx, start, "bad escape in string");
            memcpy(dst + k, tmp, n);
            k += n;
        } else {
            dst[k++] = '\\';
            dst[k++] = e;
        }
    }
    dst[k] = '\0';
    lx->pos = end + 1;
    return emit(lx, (jtok){.kind = JT_STRING, .pos = start, .str = dst, .str_len = k});
}

static bool lex_number(jlexer *lx)
{
    size_t start = lx->pos;
    char text[64];
    size_t n = 0;
    bool is_float = false;
    while (lx->pos < lx->len) {
        char c = lx->src[lx->pos];
        bool digit = isdigit((unsigned char)c);
        bool dot = c == '.' && !is_float && lx->pos + 1 < lx->len &&
                   isdigit((unsigned char)lx->src[lx->pos + 1]);
        bool exp = (c == 'e' || c == 'E') && lx->pos + 1 < lx->len &&
                   (isdigit((unsigned char)lx->src[lx->pos + 1]) ||
                    ((lx->src[lx->pos + 1] == '-' || lx->src[lx->pos + 1] == '+') &&
                     lx->pos + 2 < lx->len && isdigit((unsigned char)lx->src[lx->pos + 2])));
        if (!digit && !dot && !exp && c != '_')
            break;
        if (n + 3 >= sizeof text)
            return lex_fail(lx, start, "number literal too long");
        if (dot || exp)
            is_float = true;
        if (c != '_')
            text[n++] = c;
        lx->pos++;
        if (exp && (lx->src[lx->pos] == '-' || lx->src[lx->pos] == '+'))
            text[n++] = lx->src[lx->pos++];
    }
    text[n] = '\0';
    jtok tok = {.pos = start};
    errno = 0;
    if (is_float) {
        tok.kind = JT_FLOAT;
        tok.float_value = strtod(text, NULL);
    } else {
        tok.kind = JT_INT;
        tok.int_value = strtoll(text, NULL, 10);
        if (errno == ERANGE)
            return lex_fail(lx, start, "integer literal too large");
    }
    return emit(lx, tok);
}

/* Tokens of one tag up to its end delimiter; *strip_after for "-}}"/"-%}", *keep for "+%}". */
static bool lex_tag(jlexer *lx, bool block, bool *strip_after, bool *keep_newline)
{
    const char *end = block ? "%}" : "}}";
    size_t tag_start = lx->pos;
    for (;;) {
        while (lx->pos < lx->len && is_ws(lx->src[lx->pos]))
            lx->pos++;
        if (lx->pos >= lx->len)
            return lex_fail(lx, tag_start, block ? "unclosed block tag" : "unclosed variable tag");
        size_t p = lx->pos;
        char c = lx->src[p];
        if ((c == '-' || (block && c == '+')) && starts(lx, p + 1, end)) {
            *strip_after = c == '-';
            *keep_newline = c == '+';
            lx->pos = p + 3;
            return emit(lx, (jtok){.kind = block ? JT_BLOCK_END : JT_VAR_END, .pos = p});
        }
        if (starts(lx, p, end)) {
            lx->pos = p + 2;
            return emit(lx, (jtok){.kind = block ? JT_BLOCK_END : JT_VAR_END, .pos = p});
        }
        if (c == '\'' || c == '"') {
            if (!lex_string(lx))
                return false;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            if (!lex_number(lx))
                return false;
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            size_t e = p;
            while (e < lx->len && (isalnum((unsigned char)lx->src[e]) || lx->src[e] == '_'))
                e++;
            char *name = tarena_strndup(lx->arena, lx->src + p, e - p);
            if (!name)
                return lex_fail(lx, p, "template too large to parse");
            lx->pos = e;
            if (!emit(lx, (jtok){.kind = JT_NAME, .pos = p, .str = name, .str_len = e - p}))
                return false;
            continue;
        }
        const char *op = NULL;
        for (size_t i = 0; i < sizeof operators / sizeof operators[0] && !op; i++)
            if (starts(lx, p, operators[i]))
                op = operators[i];
        if (!op) {
            char what[64];
            snprintf(what, sizeof what, "unexpected character '%c'", c);
            return lex_fail(lx, p, "%s", what);
        }
        lx->pos = p + strlen(op);
        if (!emit(lx, (jtok){.kind = JT_OP, .pos = p, .str = op, .str_len = strlen(op)}))
            return false;
    }
}

/* Is the tag at pos "{%[-+]? raw [-]?%}"? Sets *after to the byte after it. */
static bool is_raw_tag(const jlexer *lx, size_t pos, const char *word, size_t *after,
                       bool *strip_before)
{
    size_t p = pos + 2;
    *strip_before = p < lx->len && lx->src[p] == '-';
    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
        p++;
    while (p < lx->len && is_ws(lx->src[p]))
        p++;
    if (!starts(lx, p, word))
        return false;
    p += strlen(word);
    while (p < lx->len && is_ws(lx->src[p]))
        p++;
    if (p < lx->len && lx->src[p] == '-')
        p++;
    if (!starts(lx, p, "%}"))
        return false;
    *after = p + 2;
    return true;
}

static size_t find_tag(const jlexer *lx, size_t from)
{
    for (size_t i = from; i + 1 < lx->len; i++)
        if (lx->src[i] == '{' &&
            (lx->src[i + 1] == '{' || lx->src[i + 1] == '%' || lx->src[i + 1] == '#'))
            return i;
    return lx->len;
}

static bool emit_text(jlexer *lx, size_t start, size_t end)
{
    if (start >= end)
        return true;
    return emit(
        lx, (jtok){.kind = JT_TEXT, .pos = start, .str = lx->src + start, .str_len = end - start});
}

bool jinja_lex(const char *src, size_t len, tarena *arena, jtok_list *out, corral_error *err)
{
    /* Jinja drops one trailing newline of the source (keep_trailing_newline is off). */
    if (len && src[len - 1] == '\n')
        len--;
    jlexer lx = {.src = src, .len = len, .arena = arena, .out = out, .err = err};
    bool strip_leading = false; /* the previous tag ended with "-" */
    bool line_starting = true;  /* the text starts at the beginning of a line */
    while (lx.pos < lx.len) {
        size_t text_start = lx.pos;
        size_t tag = find_tag(&lx, lx.pos);
        size_t text_end = tag;
        if (strip_leading)
            while (text_start < text_end && is_ws(src[text_start]))
                text_start++;
        if (tag == lx.len) {
            if (!emit_text(&lx, text_start, text_end))
                return false;
            break;
        }
        char kind = src[tag + 1];
        char modifier = tag + 2 < len ? src[tag + 2] : '\0';
        if (modifier == '-') {
            while (text_end > text_start && is_ws(src[text_end - 1]))
                text_end--;
        } else if (kind != '{' && modifier != '+') {
            /* lstrip_blocks: drop spaces and tabs between a line start and a block tag. */
            size_t line = text_end;
            while (line > text_start && (src[line - 1] == ' ' || src[line - 1] == '\t'))
                line--;
            bool at_line_start = line > text_start ? src[line - 1] == '\n' : line_starting;
            if (at_line_start)
                text_end = line;
        }
        if (!emit_text(&lx, text_start, text_end))
            return false;
        bool strip_after = false, keep_newline = false;
        size_t after;
        bool raw_strip;
        if (kind == '#') {
            size_t close = tag + 2;
            while (close + 1 < len && !(src[close] == '#' && src[close + 1] == '}'))
                close++;
            if (close + 1 >= len)
                return lex_fail(&lx, tag, "unclosed comment");
            strip_after = close > tag + 2 && src[close - 1] == '-';
            keep_newline = close > tag + 2 && src[close - 1] == '+';
            lx.pos = close + 2;
        } else if (kind == '%' && is_raw_tag(&lx, tag, "raw", &after, &raw_strip)) {
            size_t end = after;
            size_t end_after = 0;
            bool strip_end = false;
            for (; end < len; end++)
                if (src[end] == '{' && end + 1 < len && src[end + 1] == '%' &&
                    is_raw_tag(&lx, end, "endraw", &end_after, &strip_end))
                    break;
            if (end >= len)
                return lex_fail(&lx, tag, "missing {%% endraw %%}");
            size_t body_end = end;
            if (strip_end)
                while (body_end > after && is_ws(src[body_end - 1]))
                    body_end--;
            if (!emit_text(&lx, after, body_end))
                return false;
            lx.pos = end_after;
        } else {
            lx.pos = tag + 2 + (modifier == '-' || (kind == '%' && modifier == '+') ? 1 : 0);
            jtok begin = {.kind = kind == '{' ? JT_VAR_BEGIN : JT_BLOCK_BEGIN, .pos = tag};
            if (!emit(&lx, begin) || !lex_tag(&lx, kind == '%', &strip_after, &keep_newline))
                return false;
        }
        line_starting = false;
        /* trim_blocks: the first newline after a block or comment tag goes. */
        if (kind != '{' && !strip_after && !keep_newline && lx.pos < len && src[lx.pos] == '\n') {
            lx.pos++;
            line_starting = true;
        }
        strip_leading = strip_after;
    }
    return emit(&lx, (jtok){.kind = JT_EOF, .pos = lx.len});
}
