/*
 * Go text/template subset: syntax tree, parser and evaluator (internal to src/template/).
 * go_parse builds the tree from untrusted source into an arena, checking every function name
 * and nesting depth up front; go_render walks it under a tsandbox. Values are jansson json_t;
 * a missing key evaluates to JSON null, which prints and compares as Go's zero value.
 */
#ifndef CORRAL_TEMPLATE_GO_TEMPLATE_H
#define CORRAL_TEMPLATE_GO_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/arena.h"
#include "template/sandbox.h"
#include "template/tbuf.h"

typedef enum go_func {
    GO_FUNC_AND,
    GO_FUNC_OR,
    GO_FUNC_NOT,
    GO_FUNC_EQ,
    GO_FUNC_NE,
    GO_FUNC_LT,
    GO_FUNC_LE,
    GO_FUNC_GT,
    GO_FUNC_GE,
    GO_FUNC_LEN,
    GO_FUNC_INDEX,
    GO_FUNC_SLICE,
    GO_FUNC_PRINT,
    GO_FUNC_PRINTF,
    GO_FUNC_PRINTLN,
    GO_FUNC_JSON,
    GO_FUNC_CURRENT_DATE,
    GO_FUNC_YESTERDAY_DATE,
    GO_FUNC_COUNT
} go_func;

/* The name of a function, and the function of a name (GO_FUNC_COUNT when unknown). */
const char *go_func_name(go_func f);
go_func go_func_lookup(const char *name, size_t len);

typedef struct go_pipe go_pipe;

typedef enum go_arg_kind {
    GO_ARG_DOT,   /* . then optional fields */
    GO_ARG_FIELD, /* .A.B: fields of dot */
    GO_ARG_VAR,   /* $name.A.B (name "" is $) */
    GO_ARG_FUNC,
    GO_ARG_STRING,
    GO_ARG_INT,
    GO_ARG_FLOAT,
    GO_ARG_BOOL,
    GO_ARG_NIL,
    GO_ARG_PIPE, /* (pipeline).A.B */
} go_arg_kind;

typedef struct go_arg {
    go_arg_kind kind;
    size_t pos;
    const char *name; /* variable name without '$' */
    go_func func;
    char **fields;
    size_t n_fields, cap_fields;
    char *str;
    size_t str_len;
    long long int_value;
    double float_value;
    bool bool_value;
    go_pipe *pipe;
} go_arg;

typedef struct go_cmd {
    size_t pos;
    go_arg **args;
    size_t n_args, cap_args;
} go_cmd;

typedef enum go_decl { GO_DECL_NONE, GO_DECL_DEFINE, GO_DECL_ASSIGN } go_decl;

struct go_pipe {
    size_t pos;
    go_decl decl;
    const char *vars[2];
    size_t n_vars;
    go_cmd **cmds;
    size_t n_cmds, cap_cmds;
};

typedef enum go_node_kind {
    GO_NODE_TEXT,
    GO_NODE_ACTION,
    GO_NODE_IF,
    GO_NODE_RANGE,
    GO_NODE_WITH,
    GO_NODE_BREAK,
    GO_NODE_CONTINUE,
    GO_NODE_TEMPLATE,
} go_node_kind;

typedef struct go_node go_node;

typedef struct go_list {
    go_node **items;
    size_t n, cap;
} go_list;

struct go_node {
    go_node_kind kind;
    size_t pos;
    size_t seq;       /* preorder position in the document */
    const char *text; /* TEXT: after trimming */
    size_t text_len;
    go_pipe *pipe; /* may be NULL for TEMPLATE */
    go_list body;
    go_list else_body;
    const char *name; /* TEMPLATE: the named template to run */
};

typedef struct go_define {
    const char *name;
    go_list body;
} go_define;

typedef struct go_tree {
    tarena arena;
    char *src; /* private copy, NUL-terminated */
    size_t src_len;
    go_list root;
    size_t n_nodes;
    go_define **defines;
    size_t n_defines, cap_defines;
} go_tree;

go_tree *go_parse(const char *src, size_t len, corral_error *err);
void go_tree_free(go_tree *tree);
bool go_tree_uses_field(const go_tree *tree, const char *name);
/*
 * Render into out (bounded by the sandbox's max_bytes). Nodes after document position
 * cut_after are left out (SIZE_MAX: none), which is how ollama leaves the last turn of a
 * legacy template open after {{ .Response }}.
 */
bool go_render(const go_tree *tree, const json_t *data, size_t cut_after, tsandbox *sb, tbuf *out);
/* Document position of the first action printing .Response, or SIZE_MAX. */
size_t go_tree_response_seq(const go_tree *tree);

/* Run builtin f on args (owned by the caller); returns a new reference or NULL on error. */
json_t *go_call(go_func f, json_t **args, size_t n_args, tsandbox *sb, size_t pos);

/* The Go tree of a template (NULL for Jinja). */
struct corral_template;
const go_tree *corral_template_go_tree(const struct corral_template *tmpl);

#endif
