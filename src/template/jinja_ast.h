/*
 * Jinja syntax tree and tokens, shared by the lexer, parser and evaluator (internal).
 * The tree lives in an arena owned by jinja_tree; literal values are jansson references the
 * tree releases when freed. Every expression records its depth so that no tree deeper than
 * CORRAL_TEMPLATE_MAX_PARSE_DEPTH exists and evaluation recursion stays bounded.
 */
#ifndef CORRAL_TEMPLATE_JINJA_AST_H
#define CORRAL_TEMPLATE_JINJA_AST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/arena.h"

/* ---- tokens ---- */

typedef enum jtok_kind {
    JT_TEXT,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING, /* decoded value in str/str_len */
    JT_INT,
    JT_FLOAT,
    JT_OP, /* operator or punctuation, text in str */
    JT_EOF,
} jtok_kind;

typedef struct jtok {
    jtok_kind kind;
    size_t pos;
    const char *str; /* TEXT: into the source; NAME/OP: NUL-terminated in the arena */
    size_t str_len;
    long long int_value;
    double float_value;
} jtok;

typedef struct jtok_list {
    jtok *items;
    size_t n, cap;
} jtok_list;

/*
 * Tokenize src with HF's whitespace rules. Names and decoded strings go to the arena; the
 * token array itself is malloc'ed (the caller frees out->items, also after a failure).
 */
bool jinja_lex(const char *src, size_t len, tarena *arena, jtok_list *out, corral_error *err);

/* ---- expressions ---- */

typedef enum jexpr_kind {
    JE_LITERAL,
    JE_NAME,
    JE_LIST,
    JE_TUPLE,
    JE_DICT,   /* args alternate key, value */
    JE_ATTR,   /* a.name */
    JE_INDEX,  /* a[b] */
    JE_SLICE,  /* a[b:c:d], any of b c d may be NULL */
    JE_CALL,   /* a(args, kwargs) */
    JE_FILTER, /* a | name(args, kwargs); a NULL inside a filter block */
    JE_TEST,   /* a is [not] name(args) */
    JE_NEG,
    JE_POS,
    JE_NOT,
    JE_AND,
    JE_OR,
    JE_BINARY, /* op: + - * / // % ** ~ == != < > <= >= in notin */
    JE_COND,   /* b if a else c */
} jexpr_kind;

typedef struct jexpr jexpr;

struct jexpr {
    jexpr_kind kind;
    size_t pos;
    unsigned depth;
    const char *op;   /* JE_BINARY */
    const char *name; /* NAME, ATTR, FILTER, TEST */
    bool negated;     /* TEST */
    json_t *literal;  /* LITERAL (owned by the tree) */
    jexpr *a, *b, *c;
    jexpr **args;
    size_t n_args, cap_args;
    const char **kw_names;
    size_t n_kw_names, cap_kw_names;
    jexpr **kw_values;
    size_t n_kw, cap_kw;
};

/* ---- statements ---- */

typedef enum jstmt_kind {
    JS_TEXT,
    JS_OUTPUT,
    JS_IF,
    JS_FOR,
    JS_SET,       /* targets = expr, or target.attr = expr */
    JS_SET_BLOCK, /* {% set x %}body{% endset %} */
    JS_MACRO,
    JS_BREAK,
    JS_CONTINUE,
    JS_BLOCK, /* a body rendered in place ({% generation %}, {% block %}) */
    JS_FILTER_BLOCK, /* {% filter f | g(x) %}body{% endfilter %}: expr is the chain */
} jstmt_kind;

typedef struct jstmt jstmt;

typedef struct jbody {
    jstmt **items;
    size_t n, cap;
} jbody;

struct jstmt {
    jstmt_kind kind;
    size_t pos;
    const char *text; /* TEXT */
    size_t text_len;
    jexpr *expr;          /* OUTPUT, IF condition, FOR iterable, SET value, FILTER_BLOCK */
    jexpr *filter;        /* FOR ... if filter */
    const char **targets; /* FOR, SET, SET_BLOCK; MACRO parameter names */
    size_t n_targets, cap_targets;
    const char *attr; /* SET ns.attr: targets[0] is ns */
    const char *name; /* MACRO */
    jexpr **defaults; /* MACRO: default per parameter, or NULL */
    size_t n_defaults, cap_defaults;
    jbody body;
    jbody else_body;
};

struct jinja_tree {
    tarena arena;
    char *src;
    size_t src_len;
    jbody root;
    json_t **literals;
    size_t n_literals, cap_literals;
    bool mutates; /* calls a list or dict method that changes its object */
};

/* Whether name is a list or dict method that changes its object (append, update…). */
bool jinja_mutating_method(const char *name);

#endif
