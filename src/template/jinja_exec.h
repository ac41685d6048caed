/*
 * Jinja evaluation state and the helpers shared by the evaluator and the builtins
 * (internal). A value is a json_t reference; NULL is Jinja's Undefined. Functions that
 * produce a value return false on error (the sandbox holds the message) and give a new
 * reference, or NULL for Undefined, in *out.
 */
#ifndef CORRAL_TEMPLATE_JINJA_EXEC_H
#define CORRAL_TEMPLATE_JINJA_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "template/jinja_ast.h"
#include "template/jinja_template.h"
#include "template/sandbox.h"
#include "template/tbuf.h"

typedef struct jframe jframe;
struct jframe {
    json_t *vars; /* object of this scope's variables */
    jframe *parent;
};

typedef struct jmacro {
    const char *name;
    const jstmt *stmt;
} jmacro;

typedef struct jexec {
    const jinja_tree *tree;
    tsandbox *sb;
    tbuf *out;
    const json_t *globals;
    jframe *root;
    json_t *undefined; /* stored in a frame for a variable set to Undefined */
    jmacro *macros;
    size_t n_macros, cap_macros;
    json_t **namespaces; /* objects created by namespace(), the only ones `set x.y` may change */
    size_t n_namespaces, cap_namespaces;
    enum { JSIGNAL_NONE, JSIGNAL_BREAK, JSIGNAL_CONTINUE } signal;
} jexec;

typedef struct jargs {
    json_t **pos; /* positional values (NULL entries are Undefined) */
    size_t n;
    json_t *kw; /* keyword values, or NULL */
} jargs;

/* Evaluation (jinja_eval.c) */
bool jeval(jexec *ex, const jexpr *e, jframe *frame, json_t **out);
bool jcall_macro(jexec *ex, const jmacro *macro, const jargs *args, size_t pos, json_t **out);
const jmacro *jfind_macro(const jexec *ex, const char *name);

/* Builtins (jinja_builtins.c); name and pos are for dispatch and messages. */
bool jfilter(jexec *ex, const char *name, size_t pos, json_t *value, const jargs *args,
             json_t **out);
bool jtest(jexec *ex, const char *name, size_t pos, json_t *value, const jargs *args, bool *result);
bool jmethod(jexec *ex, json_t *obj, const char *name, size_t pos, const jargs *args, json_t **out);
bool jglobal_call(jexec *ex, const char *name, size_t pos, const jargs *args, json_t **out);
bool jis_global_function(const char *name);

/* Values (jinja_value.c) */
bool jv_equal(jexec *ex, const json_t *a, const json_t *b, size_t pos, bool *result);
bool jv_is_namespace(const jexec *ex, const json_t *v);
const char *jv_type_name(const json_t *v); /* Python's name: str, int, dict, NoneType… */
/* Python str(v) appended to buf; fails on the size limit with an error at pos. */
bool jv_str(jexec *ex, const json_t *v, tbuf *buf, size_t pos);
/* A new string value of bytes s, checked against the size limit. */
bool jv_string(jexec *ex, const char *s, size_t n, size_t pos, json_t **out);
/* Take a tbuf's contents as a string value (frees the buffer). */
bool jv_string_from_buf(jexec *ex, tbuf *buf, size_t pos, json_t **out);
bool jv_oom(jexec *ex, size_t pos);
/* Code points of UTF-8 text, and the byte offset of code point index i (clamped). */
size_t jv_utf8_count(const char *s, size_t n);
size_t jv_utf8_offset(const char *s, size_t n, size_t index);
/* Charge n steps for bulk work (copying n elements); false when the budget runs out. */
bool jv_charge(jexec *ex, size_t n, size_t pos);

#endif
