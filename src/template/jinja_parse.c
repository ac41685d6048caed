/*
 * Jinja parser: turns the lexer's tokens into the statement and expression tree of
 * jinja_ast.h, following Jinja2's grammar and operator precedence (condexpr, or, and, not,
 * compare, + -, ~, * / // %, **, unary, postfix, filters and tests). Depth is checked on
 * every nested construct, including long left-associative chains.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_ast.h"
#include "template/jinja_template.h"
#include "template/sandbox.h"
#include "template/template.h"

typedef struct jparser {
    jinja_tree *tree;
    const jtok *toks;
    size_t n_toks;
    size_t i;
    unsigned depth;
    unsigned loop_depth;
    corral_error *err;
    bool failed;
} jparser;

static bool fail(jparser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(jparser *p, size_t pos, const char *fmt, ...)
{
    if (p->failed)
        return false;
    p->failed = true;
    va_list ap;
    va_start(ap, fmt);
    tsandbox_vset_error(p->err, p->tree->src, p->tree->src_len, pos, fmt, ap);
    va_end(ap);
    return false;
}

static const jtok *peek(const jparser *p)
{
    return &p->toks[p->i < p->n_toks ? p->i : p->n_toks - 1];
}

static const jtok *peek_at(const jparser *p, size_t ahead)
{
    size_t i = p->i + ahead;
    return &p->toks[i < p->n_toks ? i : p->n_toks - 1];
}

static const jtok *advance(jparser *p)
{
    const jtok *t = peek(p);
    if (p->i < p->n_toks - 1)
        p->i++;
    return t;
}

static bool tok_op(const jtok *t, const char *op)
{
    return t->kind == JT_OP && strcmp(t->str, op) == 0;
}

static bool tok_name(const jtok *t, const char *name)
{
    return t->kind == JT_NAME && strcmp(t->str, name) == 0;
}

static const char *describe(const jtok *t)
{
    switch (t->kind) {
    case JT_NAME:
    case JT_OP:
        return t->str;
    case JT_STRING:
        return "string";
    case JT_INT:
    case JT_FLOAT:
        return "number";
    case JT_BLOCK_END:
        return "end of statement block";
    case JT_VAR_END:
        return "end of print statement";
    case JT_EOF:
        return "end of template";
    default:
        return "template text";
    }
}

static bool expect_op(jparser *p, const char *op)
{
    if (!tok_op(peek(p), op))
        return fail(p, peek(p)->pos, "expected '%s', got '%s'", op, describe(peek(p)));
    advance(p);
    return true;
}

static bool expect_kind(jparser *p, jtok_kind kind, const char *what)
{
    if (peek(p)->kind != kind)
        return fail(p, peek(p)->pos, "expected %s, got '%s'", what, describe(peek(p)));
    advance(p);
    return true;
}

static bool enter(jparser *p)
{
    if (p->depth >= CORRAL_TEMPLATE_MAX_PARSE_DEPTH)
        return fail(p, peek(p)->pos, "template nested deeper than %u levels",
                    CORRAL_TEMPLATE_MAX_PARSE_DEPTH);
    p->depth++;
    return true;
}

static void leave(jparser *p)
{
    p->depth--;
}

static void *alloc(jparser *p, size_t size)
{
    void *mem = tarena_alloc(&p->tree->arena, size);
    if (!mem)
        fail(p, peek(p)->pos, "template too large to parse");
    return mem;
}

static bool push(jparser *p, void *items, size_t *n, size_t *cap, void *item)
{
    if (!tarena_push(&p->tree->arena, (void ***)items, n, cap, item))
        return fail(p, peek(p)->pos, "template too large to parse");
    return true;
}

/* ---- expressions ---- */

static jexpr *new_expr(jparser *p, jexpr_kind kind, size_t pos)
{
    jexpr *e = alloc(p, sizeof *e);
    if (e) {
        e->kind = kind;
        e->pos = pos;
        e->depth = 1;
    }
    return e;
}

static unsigned child_depth(const jexpr *e)
{
    return e ? e->depth : 0;
}

/* Record e's depth from its children; fails when the tree would be too deep to evaluate. */
static jexpr *seal(jparser *p, jexpr *e)
{
    if (!e)
        return NULL;
    unsigned d = child_depth(e->a);
    if (child_depth(e->b) > d)
        d = child_depth(e->b);
    if (child_depth(e->c) > d)
        d = child_depth(e->c);
    for (size_t i = 0; i < e->n_args; i++)
        if (e->args[i]->depth > d)
            d = e->args[i]->depth;
    for (size_t i = 0; i < e->n_kw; i++)
        if (e->kw_values[i]->depth > d)
            d = e->kw_values[i]->depth;
    e->depth = d + 1;
    if (e->depth > CORRAL_TEMPLATE_MAX_PARSE_DEPTH) {
        fail(p, e->pos, "expression nested deeper than %u levels", CORRAL_TEMPLATE_MAX_PARSE_DEPTH);
        return NULL;
    }
    return e;
}

static jexpr *literal(jparser *p, size_t pos, json_t *value)
{
    if (!value) {
        fail(p, pos, "out of memory");
        return NULL;
    }
    if (!push(p, &p->tree->literals, &p->tree->n_literals, &p->tree->cap_literals, value)) {
        json_decref(value);
        return NULL;
    }
    jexpr *e = new_expr(p, JE_LITERAL, pos);
    if (e)
        e->literal = value;
    return e;
}

static jexpr *binary(jparser *p, jexpr_kind kind, const char *op, size_t pos, jexpr *a, jexpr *b)
{
    if (!a || !b)
        return NULL;
    jexpr *e = new_expr(p, kind, pos);
    if (!e)
        return NULL;
    e->op = op;
    e->a = a;
    e->b = b;
    return seal(p, e);
}

static jexpr *parse_expression(jparser *p, bool with_condexpr);
static jexpr *parse_unary(jparser *p, bool with_filter);
static jexpr *parse_primary(jparser *p);
static jexpr *parse_postfix(jparser *p, jexpr *node);

/* "(args, name=value)" after the '(' has been seen; fills e's args and kwargs. */
static bool parse_call_args(jparser *p, jexpr *e)
{
    if (!expect_op(p, "("))
        return false;
    while (!tok_op(peek(p), ")")) {
        if (peek(p)->kind == JT_NAME && tok_op(peek_at(p, 1), "=")) {
            const char *name = advance(p)->str;
            advance(p);
            jexpr *value = parse_expression(p, true);
            if (!value || !push(p, &e->kw_names, &e->n_kw_names, &e->cap_kw_names, (void *)name) ||
                !push(p, &e->kw_values, &e->n_kw, &e->cap_kw, value))
                return false;
        } else {
            jexpr *arg = parse_expression(p, true);
            if (!arg || !push(p, &e->args, &e->n_args, &e->cap_args, arg))
                return false;
        }
        if (!tok_op(peek(p), ","))
            break;
        advance(p);
    }
    return expect_op(p, ")");
}

static jexpr *parse_subscript(jparser *p, jexpr *node, size_t pos)
{
    jexpr *parts[3] = {NULL, NULL, NULL};
    int n_parts = 0;
    bool is_slice = false;
    for (;;) {
        if (!tok_op(peek(p), ":") && !tok_op(peek(p), "]")) {
            parts[n_parts] = parse_expression(p, true);
            if (!parts[n_parts])
                return NULL;
        }
        if (!tok_op(peek(p), ":") || n_parts == 2)
            break;
        advance(p);
        is_slice = true;
        n_parts++;
    }
    if (!expect_op(p, "]"))
        return NULL;
    jexpr *e = new_expr(p, is_slice ? JE_SLICE : JE_INDEX, pos);
    if (!e)
        return NULL;
    if (!is_slice && !parts[0])
        return fail(p, pos, "expected an index"), NULL;
    e->a = node;
    e->b = parts[0];
    e->c = parts[1];
    if (parts[2] && !push(p, &e->args, &e->n_args, &e->cap_args, parts[2]))
        return NULL;
    return seal(p, e);
}

static jexpr *parse_postfix(jparser *p, jexpr *node)
{
    while (node) {
        const jtok *t = peek(p);
        if (tok_op(t, ".")) {
            advance(p);
            const jtok *attr = advance(p);
            if (attr->kind == JT_NAME) {
                jexpr *e = new_expr(p, JE_ATTR, attr->pos);
                if (!e)
                    return NULL;
                e->a = node;
                e->name = attr->str;
                node = seal(p, e);
            } else if (attr->kind == JT_INT) {
                jexpr *index = literal(p, attr->pos, json_integer(attr->int_value));
                node = binary(p, JE_INDEX, NULL, attr->pos, node, index);
            } else {
                return fail(p, attr->pos, "expected a name after '.'"), NULL;
            }
        } else if (tok_op(t, "[")) {
            advance(p);
            node = parse_subscript(p, node, t->pos);
        } else if (tok_op(t, "(")) {
            jexpr *e = new_expr(p, JE_CALL, t->pos);
            if (!e)
                return NULL;
            e->a = node;
            if (node->kind == JE_ATTR && jinja_mutating_method(node->name))
                p->tree->mutates = true;
            node = parse_call_args(p, e) ? seal(p, e) : NULL;
        } else {
            break;
        }
    }
    return node;
}

static bool starts_test_arg(const jtok *t)
{
    if (t->kind == JT_NAME)
        return !tok_name(t, "else") && !tok_name(t, "or") && !tok_name(t, "and") &&
               !tok_name(t, "if");
    return t->kind == JT_STRING || t->kind == JT_INT || t->kind == JT_FLOAT || tok_op(t, "(") ||
           tok_op(t, "[") || tok_op(t, "{");
}

static jexpr *parse_filter_expr(jparser *p, jexpr *node)
{
    while (node) {
        const jtok *t = peek(p);
        if (tok_op(t, "|")) {
            advance(p);
            const jtok *name = advance(p);
            if (name->kind != JT_NAME)
                return fail(p, name->pos, "expected a filter name"), NULL;
            jexpr *e = new_expr(p, JE_FILTER, name->pos);
            if (!e)
                return NULL;
            e->a = node;
            e->name = name->str;
            if (tok_op(peek(p), "(") && !parse_call_args(p, e))
                return NULL;
            node = seal(p, e);
        } else if (tok_name(t, "is")) {
            advance(p);
            jexpr *e = new_expr(p, JE_TEST, t->pos);
            if (!e)
                return NULL;
            if (tok_name(peek(p), "not")) {
                advance(p);
                e->negated = true;
            }
            const jtok *name = advance(p);
            if (name->kind != JT_NAME)
                return fail(p, name->pos, "expected a test name"), NULL;
            e->a = node;
            e->name = name->str;
            if (tok_op(peek(p), "(")) {
                if (!parse_call_args(p, e))
                    return NULL;
            } else if (starts_test_arg(peek(p))) {
                jexpr *arg = parse_postfix(p, parse_primary(p));
                if (!arg || !push(p, &e->args, &e->n_args, &e->cap_args, arg))
                    return NULL;
            }
            node = seal(p, e);
        } else if (tok_op(t, "(")) {
            jexpr *e = new_expr(p, JE_CALL, t->pos);
            if (!e)
                return NULL;
            e->a = node;
            node = parse_call_args(p, e) ? seal(p, e) : NULL;
        } else {
            break;
        }
    }
    return node;
}

/* Items up to the closing op; for dicts, "key: value" pairs go to args alternately. */
static jexpr *parse_sequence(jparser *p, jexpr_kind kind, const char *close, size_t pos)
{
    jexpr *e = new_expr(p, kind, pos);
    if (!e)
        return NULL;
    while (!tok_op(peek(p), close)) {
        jexpr *item = parse_expression(p, true);
        if (!item || !push(p, &e->args, &e->n_args, &e->cap_args, item))
            return NULL;
        if (kind == JE_DICT) {
            if (!expect_op(p, ":"))
                return NULL;
            jexpr *value = parse_expression(p, true);
            if (!value || !push(p, &e->args, &e->n_args, &e->cap_args, value))
                return NULL;
        }
        if (!tok_op(peek(p), ","))
            break;
        advance(p);
    }
    if (!expect_op(p, close))
        return NULL;
    return seal(p, e);
}

static jexpr *parse_primary_inner(jparser *p)
{
    const jtok *t = advance(p);
    switch (t->kind) {
    case JT_NAME:
        if (!strcmp(t->str, "true") || !strcmp(t->str, "True"))
            return literal(p, t->pos, json_true());
        if (!strcmp(t->str, "false") || !strcmp(t->str, "False"))
            return literal(p, t->pos, json_false());
        if (!strcmp(t->str, "none") || !strcmp(t->str, "None"))
            return literal(p, t->pos, json_null());
        {
            jexpr *e = new_expr(p, JE_NAME, t->pos);
            if (e)
                e->name = t->str;
            return e;
        }
    case JT_STRING: {
        /* Adjacent string literals concatenate, as in Python. */
        size_t total = t->str_len;
        size_t last = p->i;
        while (last < p->n_toks && p->toks[last].kind == JT_STRING)
            total += p->toks[last++].str_len;
        if (last == p->i)
            return literal(p, t->pos, json_stringn_nocheck(t->str, t->str_len));
        char *joined = alloc(p, total + 1);
        if (!joined)
            return NULL;
        size_t k = t->str_len;
        memcpy(joined, t->str, k);
        while (p->i < last) {
            const jtok *next = advance(p);
            memcpy(joined + k, next->str, next->str_len);
            k += next->str_len;
        }
        return literal(p, t->pos, json_stringn_nocheck(joined, k));
    }
    case JT_INT:
        return literal(p, t->pos, json_integer(t->int_value));
    case JT_FLOAT:
        return literal(p, t->pos, json_real(t->float_value));
    case JT_OP:
        if (!strcmp(t->str, "(")) {
            if (tok_op(peek(p), ")")) {
                advance(p);
                return seal(p, new_expr(p, JE_TUPLE, t->pos));
            }
            jexpr *first = parse_expression(p, true);
            if (!first)
                return NULL;
            if (tok_op(peek(p), ")")) {
                advance(p);
                return first;
            }
            jexpr *tuple = new_expr(p, JE_TUPLE, t->pos);
            if (!tuple || !push(p, &tuple->args, &tuple->n_args, &tuple->cap_args, first))
                return NULL;
            while (tok_op(peek(p), ",")) {
                advance(p);
                if (tok_op(peek(p), ")"))
                    break;
                jexpr *item = parse_expression(p, true);
                if (!item || !push(p, &tuple->args, &tuple->n_args, &tuple->cap_args, item))
                    return NULL;
            }
            return expect_op(p, ")") ? seal(p, tuple) : NULL;
        }
        if (!strcmp(t->str, "["))
            return parse_sequence(p, JE_LIST, "]", t->pos);
        if (!strcmp(t->str, "{"))
            return parse_sequence(p, JE_DICT, "}", t->pos);
        break;
    default:
        break;
    }
    return fail(p, t->pos, "unexpected '%s'", describe(t)), NULL;
}

static jexpr *parse_primary(jparser *p)
{
    if (!enter(p))
        return NULL;
    jexpr *e = parse_primary_inner(p);
    leave(p);
    return e;
}

static jexpr *parse_unary(jparser *p, bool with_filter)
{
    if (!enter(p))
        return NULL;
    const jtok *t = peek(p);
    jexpr *node;
    if (tok_op(t, "-") || tok_op(t, "+")) {
        advance(p);
        jexpr *operand = parse_unary(p, false);
        node = operand ? new_expr(p, tok_op(t, "-") ? JE_NEG : JE_POS, t->pos) : NULL;
        if (node) {
            node->a = operand;
            node = seal(p, node);
        }
    } else {
        node = parse_primary(p);
    }
    node = parse_postfix(p, node);
    if (with_filter)
        node = parse_filter_expr(p, node);
    leave(p);
    return node;
}

static jexpr *parse_pow(jparser *p)
{
    jexpr *left = parse_unary(p, true);
    while (left && tok_op(peek(p), "**")) {
        size_t pos = advance(p)->pos;
        left = binary(p, JE_BINARY, "**", pos, left, parse_unary(p, true));
    }
    return left;
}

static jexpr *parse_math2(jparser *p)
{
    jexpr *left = parse_pow(p);
    while (left) {
        const jtok *t = peek(p);
        if (!tok_op(t, "*") && !tok_op(t, "/") && !tok_op(t, "//") && !tok_op(t, "%"))
            break;
        advance(p);
        left = binary(p, JE_BINARY, t->str, t->pos, left, parse_pow(p));
    }
    return left;
}

static jexpr *parse_concat(jparser *p)
{
    jexpr *left = parse_math2(p);
    while (left && tok_op(peek(p), "~")) {
        size_t pos = advance(p)->pos;
        left = binary(p, JE_BINARY, "~", pos, left, parse_math2(p));
    }
    return left;
}

static jexpr *parse_math1(jparser *p)
{
    jexpr *left = parse_concat(p);
    while (left && (tok_op(peek(p), "+") || tok_op(peek(p), "-"))) {
        const jtok *t = advance(p);
        left = binary(p, JE_BINARY, t->str, t->pos, left, parse_concat(p));
    }
    return left;
}

static jexpr *parse_compare(jparser *p)
{
    static const char *const ops[] = {"==", "!=", "<", ">", "<=", ">="};
    jexpr *left = parse_math1(p);
    while (left) {
        const jtok *t = peek(p);
        const char *op = NULL;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0] && !op; i++)
            if (tok_op(t, ops[i]))
                op = ops[i];
        if (op) {
            advance(p);
        } else if (tok_name(t, "in")) {
            advance(p);
            op = "in";
        } else if (tok_name(t, "not") && tok_name(peek_at(p, 1), "in")) {
            advance(p);
            advance(p);
            op = "notin";
        } else {
            break;
        }
        left = binary(p, JE_BINARY, op, t->pos, left, parse_math1(p));
    }
    return left;
}

static jexpr *parse_not(jparser *p)
{
    if (!tok_name(peek(p), "not"))
        return parse_compare(p);
    if (!enter(p))
        return NULL;
    size_t pos = advance(p)->pos;
    jexpr *operand = parse_not(p);
    leave(p);
    jexpr *e = operand ? new_expr(p, JE_NOT, pos) : NULL;
    if (!e)
        return NULL;
    e->a = operand;
    return seal(p, e);
}

static jexpr *parse_and(jparser *p)
{
    jexpr *left = parse_not(p);
    while (left && tok_name(peek(p), "and")) {
        size_t pos = advance(p)->pos;
        left = binary(p, JE_AND, NULL, pos, left, parse_not(p));
    }
    return left;
}

static jexpr *parse_or(jparser *p)
{
    jexpr *left = parse_and(p);
    while (left && tok_name(peek(p), "or")) {
        size_t pos = advance(p)->pos;
        left = binary(p, JE_OR, NULL, pos, left, parse_and(p));
    }
    return left;
}

static jexpr *parse_expression(jparser *p, bool with_condexpr)
{
    if (!enter(p))
        return NULL;
    jexpr *node = parse_or(p);
    while (with_condexpr && node && tok_name(peek(p), "if")) {
        size_t pos = advance(p)->pos;
        jexpr *cond = parse_or(p);
        jexpr *otherwise = NULL;
        if (cond && tok_name(peek(p), "else")) {
            advance(p);
            otherwise = parse_expression(p, true);
            if (!otherwise)
                cond = NULL;
        }
        jexpr *e = cond ? new_expr(p, JE_COND, pos) : NULL;
        if (!e) {
            node = NULL;
            break;
        }
        e->a = cond;
        e->b = node;
        e->c = otherwise;
        node = seal(p, e);
    }
    leave(p);
    return node;
}

/* An expression that may be a bare tuple: "a, b". */
static jexpr *parse_tuple_expression(jparser *p, bool with_condexpr)
{
    size_t pos = peek(p)->pos;
    jexpr *first = parse_expression(p, with_condexpr);
    if (!first || !tok_op(peek(p), ","))
        return first;
    jexpr *tuple = new_expr(p, JE_TUPLE, pos);
    if (!tuple || !push(p, &tuple->args, &tuple->n_args, &tuple->cap_args, first))
        return NULL;
    while (tok_op(peek(p), ",")) {
        advance(p);
        if (peek(p)->kind == JT_BLOCK_END || peek(p)->kind == JT_VAR_END || tok_name(peek(p), "in"))
            break;
        jexpr *item = parse_expression(p, with_condexpr);
        if (!item || !push(p, &tuple->args, &tuple->n_args, &tuple->cap_args, item))
            return NULL;
    }
    return seal(p, tuple);
}

/* ---- statements ---- */

static bool parse_body(jparser *p, jbody *body, const char *const *ends, const char **which);

static jstmt *new_stmt(jparser *p, jstmt_kind kind, size_t pos)
{
    jstmt *s = alloc(p, sizeof *s);
    if (s) {
        s->kind = kind;
        s->pos = pos;
    }
    return s;
}

static bool end_tag(jparser *p)
{
    return expect_kind(p, JT_BLOCK_END, "end of statement block");
}

static jstmt *parse_if(jparser *p, size_t pos)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jstmt *s = new_stmt(p, JS_IF, pos);
    if (!s || !(s->expr = parse_tuple_expression(p, true)) || !end_tag(p))
        return NULL;
    const char *which;
    if (!parse_body(p, &s->body, ends, &which))
        return NULL;
    if (!strcmp(which, "elif")) {
        if (!enter(p))
            return NULL;
        jstmt *next = parse_if(p, p->toks[p->i - 1].pos);
        leave(p);
        if (!next || !push(p, &s->else_body.items, &s->else_body.n, &s->else_body.cap, next))
            return NULL;
        return s;
    }
    if (!strcmp(which, "else")) {
        static const char *const endif[] = {"endif", NULL};
        if (!end_tag(p) || !parse_body(p, &s->else_body, endif, &which))
            return NULL;
    }
    return end_tag(p) ? s : NULL;
}

static bool parse_targets(jparser *p, jstmt *s)
{
    bool paren = tok_op(peek(p), "(");
    if (paren)
        advance(p);
    for (;;) {
        const jtok *t = advance(p);
        if (t->kind != JT_NAME)
            return fail(p, t->pos, "expected a variable name, got '%s'", describe(t));
        if (!push(p, &s->targets, &s->n_targets, &s->cap_targets, (void *)t->str))
            return false;
        if (!tok_op(peek(p), ","))
            break;
        advance(p);
    }
    return paren ? expect_op(p, ")") : true;
}

static jstmt *parse_for(jparser *p, size_t pos)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    jstmt *s = new_stmt(p, JS_FOR, pos);
    if (!s || !parse_targets(p, s))
        return NULL;
    if (!tok_name(peek(p), "in"))
        return fail(p, peek(p)->pos, "expected 'in' in for loop"), NULL;
    advance(p);
    if (!(s->expr = parse_tuple_expression(p, false)))
        return NULL;
    if (tok_name(peek(p), "if")) {
        advance(p);
        if (!(s->filter = parse_expression(p, true)))
            return NULL;
    }
    if (tok_name(peek(p), "recursive"))
        return fail(p, peek(p)->pos, "recursive for loops are not supported"), NULL;
    if (!end_tag(p))
        return NULL;
    const char *which;
    p->loop_depth++;
    bool ok = parse_body(p, &s->body, ends, &which);
    p->loop_depth--;
    if (!ok)
        return NULL;
    if (!strcmp(which, "else")) {
        static const char *const endfor[] = {"endfor", NULL};
        if (!end_tag(p) || !parse_body(p, &s->else_body, endfor, &which))
            return NULL;
    }
    return end_tag(p) ? s : NULL;
}

static jstmt *parse_set(jparser *p, size_t pos)
{
    jstmt *s = new_stmt(p, JS_SET, pos);
    if (!s || !parse_targets(p, s))
        return NULL;
    if (s->n_targets == 1 && tok_op(peek(p), ".")) {
        advance(p);
        const jtok *attr = advance(p);
        if (attr->kind != JT_NAME)
            return fail(p, attr->pos, "expected an attribute name"), NULL;
        s->attr = attr->str;
    }
    if (tok_op(peek(p), "=")) {
        advance(p);
        if (!(s->expr = parse_tuple_expression(p, true)))
            return NULL;
        return end_tag(p) ? s : NULL;
    }
    if (s->attr || s->n_targets != 1)
        return fail(p, pos, "expected '=' in set"), NULL;
    static const char *const ends[] = {"endset", NULL};
    const char *which;
    s->kind = JS_SET_BLOCK;
    if (!end_tag(p) || !parse_body(p, &s->body, ends, &which))
        return NULL;
    return end_tag(p) ? s : NULL;
}

static jstmt *parse_macro(jparser *p, size_t pos)
{
    jstmt *s = new_stmt(p, JS_MACRO, pos);
    const jtok *name = advance(p);
    if (!s || name->kind != JT_NAME)
        return fail(p, name->pos, "expected a macro name"), NULL;
    s->name = name->str;
    if (!expect_op(p, "("))
        return NULL;
    while (!tok_op(peek(p), ")")) {
        const jtok *param = advance(p);
        if (param->kind != JT_NAME)
            return fail(p, param->pos, "expected a parameter name"), NULL;
        jexpr *def = NULL;
        if (tok_op(peek(p), "=")) {
            advance(p);
            if (!(def = parse_expression(p, true)))
                return NULL;
        }
        if (!push(p, &s->targets, &s->n_targets, &s->cap_targets, (void *)param->str) ||
            !push(p, &s->defaults, &s->n_defaults, &s->cap_defaults, def))
            return NULL;
        if (!tok_op(peek(p), ","))
            break;
        advance(p);
    }
    if (!expect_op(p, ")") || !end_tag(p))
        return NULL;
    static const char *const ends[] = {"endmacro", NULL};
    const char *which;
    unsigned saved_loops = p->loop_depth;
    p->loop_depth = 0;
    bool ok = parse_body(p, &s->body, ends, &which);
    p->loop_depth = saved_loops;
    if (!ok)
        return NULL;
    if (peek(p)->kind == JT_NAME)
        advance(p); /* {% endmacro name %} */
    return end_tag(p) ? s : NULL;
}

/* {% generation %}…{% endgeneration %} and {% block name %}…{% endblock %}. */
static jstmt *parse_plain_block(jparser *p, size_t pos, const char *end)
{
    jstmt *s = new_stmt(p, JS_BLOCK, pos);
    if (!s)
        return NULL;
    if (!strcmp(end, "endblock") && peek(p)->kind == JT_NAME)
        advance(p);
    const char *const ends[] = {end, NULL};
    const char *which;
    if (!end_tag(p) || !parse_body(p, &s->body, ends, &which))
        return NULL;
    if (peek(p)->kind == JT_NAME)
        advance(p);
    return end_tag(p) ? s : NULL;
}

/* {% filter name(args) | more %}: the chain's innermost filter has no operand (a is NULL);
 * it gets the rendered body. */
static jstmt *parse_filter_block(jparser *p, size_t pos)
{
    jstmt *s = new_stmt(p, JS_FILTER_BLOCK, pos);
    const jtok *name = advance(p);
    if (!s || name->kind != JT_NAME)
        return fail(p, name->pos, "expected a filter name"), NULL;
    jexpr *e = new_expr(p, JE_FILTER, name->pos);
    if (!e)
        return NULL;
    e->name = name->str;
    if (tok_op(peek(p), "(") && !parse_call_args(p, e))
        return NULL;
    if (!(s->expr = parse_filter_expr(p, seal(p, e))) || !end_tag(p))
        return NULL;
    static const char *const ends[] = {"endfilter", NULL};
    const char *which;
    if (!parse_body(p, &s->body, ends, &which))
        return NULL;
    return end_tag(p) ? s : NULL;
}

static jstmt *parse_statement(jparser *p)
{
    const jtok *t = advance(p);
    if (t->kind != JT_NAME)
        return fail(p, t->pos, "expected a statement name, got '%s'", describe(t)), NULL;
    const char *name = t->str;
    if (!enter(p))
        return NULL;
    jstmt *s = NULL;
    if (!strcmp(name, "if")) {
        s = parse_if(p, t->pos);
    } else if (!strcmp(name, "for")) {
        s = parse_for(p, t->pos);
    } else if (!strcmp(name, "set")) {
        s = parse_set(p, t->pos);
    } else if (!strcmp(name, "macro")) {
        s = parse_macro(p, t->pos);
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (p->loop_depth == 0)
            fail(p, t->pos, "'%s' outside a for loop", name);
        else if ((s = new_stmt(p, name[0] == 'b' ? JS_BREAK : JS_CONTINUE, t->pos)) && !end_tag(p))
            s = NULL;
    } else if (!strcmp(name, "generation")) {
        s = parse_plain_block(p, t->pos, "endgeneration");
    } else if (!strcmp(name, "block")) {
        s = parse_plain_block(p, t->pos, "endblock");
    } else if (!strcmp(name, "filter")) {
        s = parse_filter_block(p, t->pos);
    } else {
        fail(p, t->pos, "unknown or unsupported tag '%s'", name);
    }
    leave(p);
    return s;
}

/*
 * Statements until a block tag named in ends (NULL-terminated; NULL ends means top level).
 * On success p is just after that name and *which is it.
 */
static bool parse_body(jparser *p, jbody *body, const char *const *ends, const char **which)
{
    for (;;) {
        const jtok *t = peek(p);
        jstmt *s = NULL;
        if (t->kind == JT_EOF) {
            if (ends) {
                size_t last = 0;
                while (ends[last + 1])
                    last++;
                return fail(p, t->pos, "unexpected end of template, expected '%s'", ends[last]);
            }
            return true;
        }
        if (t->kind == JT_TEXT) {
            advance(p);
            s = new_stmt(p, JS_TEXT, t->pos);
            if (s) {
                s->text = t->str;
                s->text_len = t->str_len;
            }
        } else if (t->kind == JT_VAR_BEGIN) {
            advance(p);
            s = new_stmt(p, JS_OUTPUT, t->pos);
            if (s && (!(s->expr = parse_tuple_expression(p, true)) ||
                      !expect_kind(p, JT_VAR_END, "end of print statement")))
                s = NULL;
        } else if (t->kind == JT_BLOCK_BEGIN) {
            const jtok *name = peek_at(p, 1);
            for (size_t i = 0; ends && ends[i] && name->kind == JT_NAME; i++)
                if (!strcmp(name->str, ends[i])) {
                    advance(p);
                    advance(p);
                    *which = ends[i];
                    return true;
                }
            advance(p);
            s = parse_statement(p);
        } else {
            return fail(p, t->pos, "unexpected '%s'", describe(t));
        }
        if (!s || !push(p, &body->items, &body->n, &body->cap, s))
            return false;
    }
}

jinja_tree *jinja_parse(const char *src, size_t len, corral_error *err)
{
    if (len > CORRAL_TEMPLATE_MAX_SOURCE_BYTES) {
        corral_error_set(err, "template is %zu bytes, more than the %u allowed", len,
                         CORRAL_TEMPLATE_MAX_SOURCE_BYTES);
        return NULL;
    }
    jinja_tree *tree = calloc(1, sizeof *tree);
    if (!tree || !(tree->src = malloc(len + 1))) {
        free(tree);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (len)
        memcpy(tree->src, src, len);
    tree->src[len] = '\0';
    tree->src_len = len;
    tarena_init(&tree->arena, 64 * (size_t)len + (1u << 20));
    jtok_list toks = {0};
    bool ok = jinja_lex(tree->src, len, &tree->arena, &toks, err);
    if (ok) {
        jparser p = {.tree = tree, .toks = toks.items, .n_toks = toks.n, .err = err};
        ok = parse_body(&p, &tree->root, NULL, NULL);
    }
    free(toks.items);
    if (!ok) {
        jinja_tree_free(tree);
        return NULL;
    }
    return tree;
}

void jinja_tree_free(jinja_tree *tree)
{
    if (!tree)
        return;
    for (size_t i = 0; i < tree->n_literals; i++)
        json_decref(tree->literals[i]);
    tarena_free(&tree->arena);
    free(tree->src);
    free(tree);
}

const char *jinja_tree_source(const jinja_tree *tree)
{
    return tree->src;
}

size_t jinja_tree_source_len(const jinja_tree *tree)
{
    return tree->src_len;
}
