/*
 * Parser for the Go text/template subset: lexes one action at a time into tokens and builds
 * the go_tree in an arena. Owns trim markers, comments, the control-structure grammar and
 * literal decoding; it rejects unknown functions and nesting deeper than
 * CORRAL_TEMPLATE_MAX_PARSE_DEPTH, so the evaluator never meets either.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/go_template.h"
#include "template/template.h"
#include "util/text.h"

typedef enum go_tok_kind {
    TOK_IDENT,
    TOK_FIELD,
    TOK_DOT,
    TOK_VAR,
    TOK_STRING,
    TOK_RAW_STRING,
    TOK_CHAR,
    TOK_NUMBER,
    TOK_LPAREN,
    TOK_RPAREN,
    TOK_PIPE,
    TOK_DECLARE,
    TOK_ASSIGN,
    TOK_COMMA,
} go_tok_kind;

typedef struct go_tok {
    go_tok_kind kind;
    size_t pos; /* byte offset of the token */
    size_t len;
    bool space_before;
} go_tok;

typedef enum go_term { TERM_EOF, TERM_END, TERM_ELSE } go_term;

typedef struct go_parser {
    go_tree *tree;
    const char *src;
    size_t len;
    size_t pos;
    corral_error *err;
    bool failed;
    unsigned depth;
    unsigned range_depth;
    bool trim_next_text;
    go_tok *toks; /* tokens of the current action */
    size_t n_toks, cap_toks;
    size_t ti;
    size_t action_pos;
} go_parser;

static bool fail(go_parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(go_parser *p, size_t pos, const char *fmt, ...)
{
    if (p->failed)
        return false;
    p->failed = true;
    va_list ap;
    va_start(ap, fmt);
    tsandbox_vset_error(p->err, p->src, p->len, pos, fmt, ap);
    va_end(ap);
    return false;
}

static void *alloc(go_parser *p, size_t size)
{
    void *mem = tarena_alloc(&p->tree->arena, size);
    if (!mem)
        fail(p, p->pos, "template too large to parse");
    return mem;
}

static bool push(go_parser *p, void *items_ptr, size_t *n, size_t *cap, void *item)
{
    if (!tarena_push(&p->tree->arena, (void ***)items_ptr, n, cap, item))
        return fail(p, p->pos, "template too large to parse");
    return true;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80;
}

static bool at(const go_parser *p, size_t pos, const char *s)
{
    size_t n = strlen(s);
    return pos <= p->len && p->len - pos >= n && memcmp(p->src + pos, s, n) == 0;
}

/* ---- lexing one action ---- */

static bool add_tok(go_parser *p, go_tok_kind kind, size_t pos, size_t len, bool space)
{
    if (p->n_toks == p->cap_toks) {
        size_t cap = p->cap_toks ? p->cap_toks * 2 : 16;
        go_tok *toks = realloc(p->toks, cap * sizeof *toks);
        if (!toks)
            return fail(p, pos, "out of memory");
        p->toks = toks;
        p->cap_toks = cap;
    }
    p->toks[p->n_toks++] = (go_tok){kind, pos, len, space};
    return true;
}

static bool lex_quoted(go_parser *p, char quote, size_t *end)
{
    size_t i = p->pos + 1;
    while (i < p->len && p->src[i] != quote) {
        if (quote != '`' && p->src[i] == '\\')
            i++;
        else if (quote != '`' && p->src[i] == '\n')
            break;
        i++;
    }
    if (i >= p->len || p->src[i] != quote)
        return fail(p, p->pos, "unterminated %s", quote == '\'' ? "character constant" : "string");
    *end = i + 1;
    return true;
}

/* Lex from p->pos to the closing "}}"; sets *trim_after for " -}}". */
static bool lex_action(go_parser *p, bool *trim_after)
{
    p->n_toks = 0;
    p->ti = 0;
    bool space = true;
    for (;;) {
        if (p->pos >= p->len)
            return fail(p, p->action_pos, "unclosed action");
        char c = p->src[p->pos];
        if (is_space(c) && at(p, p->pos + 1, "-}}")) {
            p->pos += 4;
            *trim_after = true;
            return true;
        }
        if (at(p, p->pos, "}}")) {
            p->pos += 2;
            *trim_after = false;
            return true;
        }
        if (is_space(c)) {
            p->pos++;
            space = true;
            continue;
        }
        size_t start = p->pos, end = start + 1;
        go_tok_kind kind;
        if (c == '(') {
            kind = TOK_LPAREN;
        } else if (c == ')') {
            kind = TOK_RPAREN;
        } else if (c == '|') {
            kind = TOK_PIPE;
        } else if (c == ',') {
            kind = TOK_COMMA;
        } else if (c == '=') {
            kind = TOK_ASSIGN;
        } else if (c == ':' && at(p, start + 1, "=")) {
            kind = TOK_DECLARE;
            end = start + 2;
        } else if (c == '"' || c == '`' || c == '\'') {
            kind = c == '"' ? TOK_STRING : c == '`' ? TOK_RAW_STRING : TOK_CHAR;
            if (!lex_quoted(p, c, &end))
                return false;
        } else if (c == '.' && start + 1 < p->len && is_ident_char(p->src[start + 1]) &&
                   !isdigit((unsigned char)p->src[start + 1])) {
            kind = TOK_FIELD;
            while (end < p->len && is_ident_char(p->src[end]))
                end++;
        } else if (c == '$') {
            kind = TOK_VAR;
            while (end < p->len && is_ident_char(p->src[end]))
                end++;
        } else if (isdigit((unsigned char)c) ||
                   ((c == '-' || c == '+' || c == '.') && start + 1 < p->len &&
                    isdigit((unsigned char)p->src[start + 1]))) {
            kind = TOK_NUMBER;
            while (end < p->len && (isalnum((unsigned char)p->src[end]) || p->src[end] == '.' ||
                                    p->src[end] == '_' ||
                                    ((p->src[end] == '-' || p->src[end] == '+') &&
                                     (p->src[end - 1] == 'e' || p->src[end - 1] == 'E'))))
                end++;
        } else if (c == '.') {
            kind = TOK_DOT;
        } else if (is_ident_char(c)) {
            kind = TOK_IDENT;
            while (end < p->len && is_ident_char(p->src[end]))
                end++;
        } else {
            return fail(p, start, "unexpected character '%c' in action", c);
        }
        if (!add_tok(p, kind, start, end - start, space))
            return false;
        p->pos = end;
        space = false;
    }
}

/* ---- literals ---- */

/* Decode a Go interpreted string body (between the quotes) into the arena. */
static bool decode_string(go_parser *p, size_t pos, const char *s, size_t n, char **out,
                          size_t *out_len)
{
    char *dst = alloc(p, n + 1);
    if (!dst)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            dst[k++] = s[i];
            continue;
        }
        if (++i >= n)
            return fail(p, pos, "bad escape in string");
        char e = s[i];
        const char *simple = strchr("abfnrtv\\\"'", e);
        if (simple && e) {
            static const char map[] = "\a\b\f\n\r\t\v\\\"'";
            dst[k++] = map[simple - "abfnrtv\\\"'"];
            continue;
        }
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            unsigned long cp = 0;
            for (int d = 0; d < digits; d++) {
                int h = i + 1 < n ? text_hex_digit(s[++i]) : -1;
                if (h < 0)
                    return fail(p, pos, "bad escape in string");
                cp = cp * 16 + (unsigned long)h;
            }
            if (e == 'x') {
                dst[k++] = (char)cp;
            } else {
                if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || k + 4 > n)
                    return fail(p, pos, "bad unicode escape in string");
                k += text_utf8_encode((uint32_t)cp, (unsigned char *)dst + k);
            }
            continue;
        }
        if (e >= '0' && e <= '7' && i + 2 < n) {
            int v = 0;
            for (int d = 0; d < 3; d++, i++) {
                if (s[i] < '0' || s[i] > '7')
                    return fail(p, pos, "bad octal escape in string");
                v = v * 8 + (s[i] - '0');
            }
            i--;
            if (v > 255)
                return fail(p, pos, "bad octal escape in string");
            dst[k++] = (char)v;
            continue;
        }
        return fail(p, pos, "unknown escape '\\%c' in string", e);
    }
    dst[k] = '\0';
    *out = dst;
    *out_len = k;
    return true;
}

static bool parse_number(go_parser *p, const go_tok *t, go_arg *arg)
{
    char text[64];
    size_t n = 0;
    if (t->len >= sizeof text)
        return fail(p, t->pos, "number too long");
    for (size_t i = 0; i < t->len; i++)
        if (p->src[t->pos + i] != '_')
            text[n++] = p->src[t->pos + i];
    text[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (*end == '\0' && errno == 0) {
        arg->kind = GO_ARG_INT;
        arg->int_value = v;
        return true;
    }
    errno = 0;
    double d = strtod(text, &end);
    if (*end != '\0' || errno != 0 || strchr(text, 'x') || strchr(text, 'X'))
        return fail(p, t->pos, "bad number syntax: %s", text);
    arg->kind = GO_ARG_FLOAT;
    arg->float_value = d;
    return true;
}

static bool tok_is(const go_parser *p, size_t i, go_tok_kind kind, const char *text)
{
    if (i >= p->n_toks || p->toks[i].kind != kind)
        return false;
    if (!text)
        return true;
    return p->toks[i].len == strlen(text) &&
           memcmp(p->src + p->toks[i].pos, text, p->toks[i].len) == 0;
}

static char *tok_text(go_parser *p, const go_tok *t, size_t skip)
{
    char *s = tarena_strndup(&p->tree->arena, p->src + t->pos + skip, t->len - skip);
    if (!s)
        fail(p, t->pos, "template too large to parse");
    return s;
}

/* ---- pipelines ---- */

static go_pipe *parse_pipeline(go_parser *p, bool in_parens, bool allow_decl, bool is_range);

static bool add_fields(go_parser *p, go_arg *arg)
{
    while (p->ti < p->n_toks && p->toks[p->ti].kind == TOK_FIELD && !p->toks[p->ti].space_before) {
        char *field = tok_text(p, &p->toks[p->ti], 1);
        if (!field || !push(p, &arg->fields, &arg->n_fields, &arg->cap_fields, field))
            return false;
        p->ti++;
    }
    return true;
}

static go_arg *parse_operand(go_parser *p)
{
    const go_tok *t = &p->toks[p->ti];
    go_arg *arg = alloc(p, sizeof *arg);
    if (!arg)
        return NULL;
    arg->pos = t->pos;
    switch (t->kind) {
    case TOK_DOT:
        arg->kind = GO_ARG_DOT;
        p->ti++;
        break;
    case TOK_FIELD:
        arg->kind = GO_ARG_FIELD;
        {
            char *field = tok_text(p, t, 1);
            if (!field || !push(p, &arg->fields, &arg->n_fields, &arg->cap_fields, field))
                return NULL;
        }
        p->ti++;
        break;
    case TOK_VAR:
        arg->kind = GO_ARG_VAR;
        arg->name = tok_text(p, t, 1);
        if (!arg->name)
            return NULL;
        p->ti++;
        break;
    case TOK_STRING:
        arg->kind = GO_ARG_STRING;
        if (!decode_string(p, t->pos, p->src + t->pos + 1, t->len - 2, &arg->str, &arg->str_len))
            return NULL;
        p->ti++;
        break;
    case TOK_RAW_STRING:
        arg->kind = GO_ARG_STRING;
        arg->str = tok_text(p, t, 0);
        if (!arg->str)
            return NULL;
        arg->str++;
        arg->str_len = t->len - 2;
        arg->str[arg->str_len] = '\0';
        p->ti++;
        break;
    case TOK_CHAR: {
        char *s;
        size_t n;
        if (!decode_string(p, t->pos, p->src + t->pos + 1, t->len - 2, &s, &n))
            return NULL;
        if (n == 0)
            return fail(p, t->pos, "empty character constant"), NULL;
        arg->kind = GO_ARG_INT;
        arg->int_value = (unsigned char)s[0];
        p->ti++;
        break;
    }
    case TOK_NUMBER:
        if (!parse_number(p, t, arg))
            return NULL;
        p->ti++;
        break;
    case TOK_IDENT:
        if (tok_is(p, p->ti, TOK_IDENT, "true") || tok_is(p, p->ti, TOK_IDENT, "false")) {
            arg->kind = GO_ARG_BOOL;
            arg->bool_value = tok_is(p, p->ti, TOK_IDENT, "true");
        } else if (tok_is(p, p->ti, TOK_IDENT, "nil")) {
            arg->kind = GO_ARG_NIL;
        } else {
            arg->kind = GO_ARG_FUNC;
            arg->func = go_func_lookup(p->src + t->pos, t->len);
            if (arg->func == GO_FUNC_COUNT)
                return fail(p, t->pos, "function \"%.*s\" not defined", (int)t->len,
                            p->src + t->pos),
                       NULL;
        }
        p->ti++;
        return arg;
    case TOK_LPAREN:
        if (p->depth >= CORRAL_TEMPLATE_MAX_PARSE_DEPTH)
            return fail(p, t->pos, "parentheses nested too deeply"), NULL;
        p->depth++;
        p->ti++;
        arg->kind = GO_ARG_PIPE;
        arg->pipe = parse_pipeline(p, true, false, false);
        p->depth--;
        if (!arg->pipe)
            return NULL;
        p->ti++; /* the ')' parse_pipeline stopped at */
        break;
    default:
        return fail(p, t->pos, "unexpected \"%.*s\" in operand", (int)t->len, p->src + t->pos),
               NULL;
    }
    return add_fields(p, arg) ? arg : NULL;
}

static go_cmd *parse_command(go_parser *p)
{
    go_cmd *cmd = alloc(p, sizeof *cmd);
    if (!cmd)
        return NULL;
    cmd->pos = p->ti < p->n_toks ? p->toks[p->ti].pos : p->pos;
    while (p->ti < p->n_toks && p->toks[p->ti].kind != TOK_PIPE &&
           p->toks[p->ti].kind != TOK_RPAREN) {
        go_arg *arg = parse_operand(p);
        if (!arg || !push(p, &cmd->args, &cmd->n_args, &cmd->cap_args, arg))
            return NULL;
    }
    if (cmd->n_args == 0)
        return fail(p, cmd->pos, "missing value for command"), NULL;
    for (size_t i = 1; i < cmd->n_args; i++)
        if (cmd->args[0]->kind != GO_ARG_FUNC)
            return fail(p, cmd->args[i]->pos, "can't give argument to non-function"), NULL;
    return cmd;
}

static bool parse_decl(go_parser *p, go_pipe *pipe, bool is_range)
{
    size_t i = p->ti;
    size_t n_vars = 0;
    if (tok_is(p, i, TOK_VAR, NULL) &&
        (tok_is(p, i + 1, TOK_DECLARE, NULL) || tok_is(p, i + 1, TOK_ASSIGN, NULL)))
        n_vars = 1;
    else if (is_range && tok_is(p, i, TOK_VAR, NULL) && tok_is(p, i + 1, TOK_COMMA, NULL) &&
             tok_is(p, i + 2, TOK_VAR, NULL) &&
             (tok_is(p, i + 3, TOK_DECLARE, NULL) || tok_is(p, i + 3, TOK_ASSIGN, NULL)))
        n_vars = 2;
    if (n_vars == 0)
        return true;
    for (size_t v = 0; v < n_vars; v++) {
        pipe->vars[v] = tok_text(p, &p->toks[i + 2 * v], 1);
        if (!pipe->vars[v])
            return false;
    }
    pipe->n_vars = n_vars;
    size_t op = i + (n_vars == 1 ? 1 : 3);
    pipe->decl = p->toks[op].kind == TOK_DECLARE ? GO_DECL_DEFINE : GO_DECL_ASSIGN;
    p->ti = op + 1;
    return true;
}

static go_pipe *parse_pipeline(go_parser *p, bool in_parens, bool allow_decl, bool is_range)
{
    go_pipe *pipe = alloc(p, sizeof *pipe);
    if (!pipe)
        return NULL;
    pipe->pos = p->ti < p->n_toks ? p->toks[p->ti].pos : p->action_pos;
    if (allow_decl && !parse_decl(p, pipe, is_range))
        return NULL;
    for (;;) {
        go_cmd *cmd = parse_command(p);
        if (!cmd || !push(p, &pipe->cmds, &pipe->n_cmds, &pipe->cap_cmds, cmd))
            return NULL;
        if (p->ti < p->n_toks && p->toks[p->ti].kind == TOK_PIPE) {
            p->ti++;
            continue;
        }
        break;
    }
    if (in_parens && !tok_is(p, p->ti, TOK_RPAREN, NULL))
        return fail(p, pipe->pos, "unclosed left paren"), NULL;
    if (!in_parens && p->ti < p->n_toks)
        return fail(p, p->toks[p->ti].pos, "unexpected \"%.*s\" in command",
                    (int)p->toks[p->ti].len, p->src + p->toks[p->ti].pos),
               NULL;
    return pipe;
}

/* ---- lists and control structures ---- */

static go_term parse_list(go_parser *p, go_list *list);

static go_node *new_node(go_parser *p, go_node_kind kind, size_t pos)
{
    go_node *node = alloc(p, sizeof *node);
    if (node) {
        node->kind = kind;
        node->pos = pos;
        node->seq = p->tree->n_nodes++;
    }
    return node;
}

static bool expect_end_of_action(go_parser *p, const char *what)
{
    if (p->ti < p->n_toks)
        return fail(p, p->toks[p->ti].pos, "unexpected \"%.*s\" in %s", (int)p->toks[p->ti].len,
                    p->src + p->toks[p->ti].pos, what);
    return true;
}

/* if / range / with, starting at the tokens after the keyword; consumes through {{end}}. */
static go_node *parse_control(go_parser *p, go_node_kind kind, size_t pos)
{
    if (p->depth >= CORRAL_TEMPLATE_MAX_PARSE_DEPTH)
        return fail(p, pos, "control structures nested too deeply"), NULL;
    p->depth++;
    go_node *node = new_node(p, kind, pos);
    if (!node)
        return NULL;
    if (p->ti >= p->n_toks)
        return fail(p, pos, "missing value for %s",
                    kind == GO_NODE_IF      ? "if"
                    : kind == GO_NODE_RANGE ? "range"
                                            : "with"),
               NULL;
    node->pipe = parse_pipeline(p, false, true, kind == GO_NODE_RANGE);
    if (!node->pipe)
        return NULL;
    if (kind == GO_NODE_RANGE)
        p->range_depth++;
    go_term term = parse_list(p, &node->body);
    if (kind == GO_NODE_RANGE)
        p->range_depth--;
    if (p->failed)
        return NULL;
    if (term == TERM_ELSE) {
        bool chained = (kind == GO_NODE_IF && tok_is(p, p->ti, TOK_IDENT, "if")) ||
                       (kind == GO_NODE_WITH && tok_is(p, p->ti, TOK_IDENT, "with"));
        if (chained) {
            size_t else_pos = p->toks[p->ti].pos;
            p->ti++;
            go_node *next = parse_control(p, kind, else_pos);
            if (!next ||
                !push(p, &node->else_body.items, &node->else_body.n, &node->else_body.cap, next))
                return NULL;
        } else {
            if (!expect_end_of_action(p, "else"))
                return NULL;
            term = parse_list(p, &node->else_body);
            if (p->failed)
                return NULL;
            if (term != TERM_END)
                return fail(p, pos, term == TERM_ELSE ? "more than one else" : "missing {{end}}"),
                       NULL;
        }
    } else if (term != TERM_END) {
        return fail(p, pos, "missing {{end}}"), NULL;
    }
    p->depth--;
    return node;
}

static bool add_define(go_parser *p, const char *name, go_list body)
{
    go_define *def = alloc(p, sizeof *def);
    if (!def)
        return false;
    def->name = name;
    def->body = body;
    return push(p, &p->tree->defines, &p->tree->n_defines, &p->tree->cap_defines, def);
}

/* {{define "x"}}, {{template "x" pipe}} and {{block "x" pipe}}…{{end}}. */
static bool parse_named(go_parser *p, const char *keyword, size_t pos, go_list *list)
{
    if (!tok_is(p, p->ti, TOK_STRING, NULL) && !tok_is(p, p->ti, TOK_RAW_STRING, NULL))
        return fail(p, pos, "%s needs a quoted template name", keyword);
    const go_tok *t = &p->toks[p->ti++];
    char *name;
    size_t name_len;
    if (!decode_string(p, t->pos, p->src + t->pos + 1, t->len - 2, &name, &name_len))
        return false;
    bool is_define = strcmp(keyword, "define") == 0;
    go_node *call = NULL;
    if (!is_define) {
        call = new_node(p, GO_NODE_TEMPLATE, pos);
        if (!call)
            return false;
        call->name = name;
        if (p->ti < p->n_toks && !(call->pipe = parse_pipeline(p, false, false, false)))
            return false;
    } else if (!expect_end_of_action(p, "define")) {
        return false;
    }
    if (is_define || strcmp(keyword, "block") == 0) {
        if (p->depth >= CORRAL_TEMPLATE_MAX_PARSE_DEPTH)
            return fail(p, pos, "control structures nested too deeply");
        p->depth++;
        go_list body = {0};
        go_term term = parse_list(p, &body);
        p->depth--;
        if (p->failed)
            return false;
        if (term != TERM_END)
            return fail(p, pos, "missing {{end}} for %s", keyword);
        if (!add_define(p, name, body))
            return false;
    }
    if (call && !push(p, &list->items, &list->n, &list->cap, call))
        return false;
    return true;
}

static bool add_text(go_parser *p, go_list *list, size_t start, size_t end, bool trim_right)
{
    if (p->trim_next_text)
        while (start < end && is_space(p->src[start]))
            start++;
    if (trim_right)
        while (end > start && is_space(p->src[end - 1]))
            end--;
    p->trim_next_text = false;
    if (start == end)
        return true;
    go_node *node = new_node(p, GO_NODE_TEXT, start);
    if (!node)
        return false;
    node->text = p->src + start;
    node->text_len = end - start;
    return push(p, &list->items, &list->n, &list->cap, node);
}

/* Skip a comment action; p->pos is at its opening slash-star. */
static bool skip_comment(go_parser *p)
{
    const char *close = NULL;
    for (size_t i = p->pos + 2; i + 1 < p->len; i++)
        if (p->src[i] == '*' && p->src[i + 1] == '/') {
            close = p->src + i;
            break;
        }
    if (!close)
        return fail(p, p->action_pos, "unclosed comment");
    p->pos = (size_t)(close - p->src) + 2;
    if (p->pos < p->len && is_space(p->src[p->pos]) && at(p, p->pos + 1, "-}}")) {
        p->pos += 4;
        p->trim_next_text = true;
        return true;
    }
    if (!at(p, p->pos, "}}"))
        return fail(p, p->action_pos, "comment ends before closing delimiter");
    p->pos += 2;
    return true;
}

static go_term parse_list(go_parser *p, go_list *list)
{
    while (!p->failed) {
        size_t text_start = p->pos;
        const char *open = NULL;
        for (size_t i = p->pos; i + 1 < p->len; i++)
            if (p->src[i] == '{' && p->src[i + 1] == '{') {
                open = p->src + i;
                break;
            }
        size_t text_end = open ? (size_t)(open - p->src) : p->len;
        bool trim_left = open && text_end + 3 < p->len && p->src[text_end + 2] == '-' &&
                         is_space(p->src[text_end + 3]);
        if (!add_text(p, list, text_start, text_end, trim_left))
            return TERM_EOF;
        if (!open) {
            p->pos = p->len;
            return TERM_EOF;
        }
        p->action_pos = text_end;
        p->pos = text_end + (trim_left ? 4 : 2);
        if (at(p, p->pos, "/*")) {
            if (!skip_comment(p))
                return TERM_EOF;
            continue;
        }
        bool trim_after = false;
        if (!lex_action(p, &trim_after))
            return TERM_EOF;
        p->trim_next_text = trim_after;
        if (p->n_toks == 0) {
            fail(p, p->action_pos, "missing value for command");
            return TERM_EOF;
        }
        size_t pos = p->action_pos;
        if (tok_is(p, 0, TOK_IDENT, "end")) {
            p->ti = 1;
            expect_end_of_action(p, "end");
            return TERM_END;
        }
        if (tok_is(p, 0, TOK_IDENT, "else")) {
            p->ti = 1;
            return TERM_ELSE;
        }
        go_node *node = NULL;
        p->ti = 1;
        if (tok_is(p, 0, TOK_IDENT, "if")) {
            node = parse_control(p, GO_NODE_IF, pos);
        } else if (tok_is(p, 0, TOK_IDENT, "range")) {
            node = parse_control(p, GO_NODE_RANGE, pos);
        } else if (tok_is(p, 0, TOK_IDENT, "with")) {
            node = parse_control(p, GO_NODE_WITH, pos);
        } else if (tok_is(p, 0, TOK_IDENT, "break") || tok_is(p, 0, TOK_IDENT, "continue")) {
            bool is_break = tok_is(p, 0, TOK_IDENT, "break");
            if (p->range_depth == 0) {
                fail(p, pos, "{{%s}} outside {{range}}", is_break ? "break" : "continue");
                return TERM_EOF;
            }
            if (!expect_end_of_action(p, is_break ? "break" : "continue"))
                return TERM_EOF;
            node = new_node(p, is_break ? GO_NODE_BREAK : GO_NODE_CONTINUE, pos);
        } else if (tok_is(p, 0, TOK_IDENT, "define") || tok_is(p, 0, TOK_IDENT, "template") ||
                   tok_is(p, 0, TOK_IDENT, "block")) {
            const char *keyword = tok_is(p, 0, TOK_IDENT, "define")     ? "define"
                                  : tok_is(p, 0, TOK_IDENT, "template") ? "template"
                                                                        : "block";
            if (!parse_named(p, keyword, pos, list))
                return TERM_EOF;
            continue;
        } else {
            p->ti = 0;
            node = new_node(p, GO_NODE_ACTION, pos);
            if (node && !(node->pipe = parse_pipeline(p, false, true, false)))
                node = NULL;
        }
        if (!node || !push(p, &list->items, &list->n, &list->cap, node))
            return TERM_EOF;
    }
    return TERM_EOF;
}

go_tree *go_parse(const char *src, size_t len, corral_error *err)
{
    if (len > CORRAL_TEMPLATE_MAX_SOURCE_BYTES) {
        corral_error_set(err, "template is %zu bytes, more than the %u allowed", len,
                         CORRAL_TEMPLATE_MAX_SOURCE_BYTES);
        return NULL;
    }
    go_tree *tree = calloc(1, sizeof *tree);
    if (!tree) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    tarena_init(&tree->arena, 64 * (size_t)len + (1u << 20));
    tree->src = malloc(len + 1);
    if (!tree->src) {
        free(tree);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (len)
        memcpy(tree->src, src, len);
    tree->src[len] = '\0';
    tree->src_len = len;
    go_parser p = {.tree = tree, .src = tree->src, .len = len, .err = err};
    go_term term = parse_list(&p, &tree->root);
    if (!p.failed && term != TERM_EOF)
        fail(&p, p.action_pos, "unexpected {{%s}}", term == TERM_END ? "end" : "else");
    free(p.toks);
    if (p.failed) {
        go_tree_free(tree);
        return NULL;
    }
    return tree;
}

void go_tree_free(go_tree *tree)
{
    if (!tree)
        return;
    tarena_free(&tree->arena);
    free(tree->src);
    free(tree);
}

static bool pipe_uses(const go_pipe *pipe, const char *name);

static bool list_uses(const go_list *list, const char *name)
{
    for (size_t i = 0; i < list->n; i++) {
        const go_node *node = list->items[i];
        if ((node->pipe && pipe_uses(node->pipe, name)) || list_uses(&node->body, name) ||
            list_uses(&node->else_body, name))
            return true;
    }
    return false;
}

static bool pipe_uses(const go_pipe *pipe, const char *name)
{
    for (size_t v = 0; v < pipe->n_vars; v++)
        if (strcasecmp(pipe->vars[v], name) == 0)
            return true;
    for (size_t c = 0; c < pipe->n_cmds; c++) {
        const go_cmd *cmd = pipe->cmds[c];
        for (size_t a = 0; a < cmd->n_args; a++) {
            const go_arg *arg = cmd->args[a];
            for (size_t f = 0; f < arg->n_fields; f++)
                if (strcasecmp(arg->fields[f], name) == 0)
                    return true;
            if (arg->kind == GO_ARG_VAR && strcasecmp(arg->name, name) == 0)
                return true;
            if (arg->pipe && pipe_uses(arg->pipe, name))
                return true;
        }
    }
    return false;
}

bool go_tree_uses_field(const go_tree *tree, const char *name)
{
    if (list_uses(&tree->root, name))
        return true;
    for (size_t i = 0; i < tree->n_defines; i++)
        if (list_uses(&tree->defines[i]->body, name))
            return true;
    return false;
}

static bool pipe_prints_response(const go_pipe *pipe)
{
    for (size_t c = 0; c < pipe->n_cmds; c++)
        for (size_t a = 0; a < pipe->cmds[c]->n_args; a++) {
            const go_arg *arg = pipe->cmds[c]->args[a];
            for (size_t f = 0; f < arg->n_fields; f++)
                if (strcmp(arg->fields[f], "Response") == 0)
                    return true;
        }
    return false;
}

static size_t list_response_seq(const go_list *list)
{
    for (size_t i = 0; i < list->n; i++) {
        const go_node *node = list->items[i];
        if (node->kind == GO_NODE_ACTION && pipe_prints_response(node->pipe))
            return node->seq;
        size_t seq = list_response_seq(&node->body);
        if (seq == SIZE_MAX)
            seq = list_response_seq(&node->else_body);
        if (seq != SIZE_MAX)
            return seq;
    }
    return SIZE_MAX;
}

size_t go_tree_response_seq(const go_tree *tree)
{
    return list_response_seq(&tree->root);
}
