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

/* Values a render keeps until it ends and later recognises by identity (a Markup string, a
 * namespace, a groupby pair): each held by one reference of its own. */
typedef struct jheld {
    json_t **items;
    size_t n, cap;
} jheld;

typedef struct jexec {
    const jinja_tree *tree;
    tsandbox *sb;
    tbuf *out;
    const json_t *globals;
    jframe *root;
    json_t *undefined; /* stored in a frame for a variable set to Undefined */
    jmacro *macros;
    size_t n_macros, cap_macros;
    jheld markups; /* strings marked safe (Jinja2's Markup) */
    size_t markup_bytes;
    json_t *filter_input; /* the rendered body a filter block's innermost filter gets */
    jheld namespaces; /* objects created by namespace(), the only ones `set x.y` may change */
    jheld groups;     /* groupby's (grouper, list) pairs, whose attributes name their items */
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
/* A dict key: str keys as their text, other hashable keys (int, float, bool, None) encoded
 * in buf. jv_key fails for unhashable values (list, dict, Undefined). */
typedef struct jkey {
    char buf[48];
    const char *s;
    size_t n;
    bool integral; /* an int, bool or integral float, equal to ival as Python compares */
    long long ival;
} jkey;
bool jv_key(jexec *ex, const json_t *v, size_t pos, jkey *key);
json_t *jv_key_value(const char *key, size_t n); /* the key as a value, a new reference */
/* Lookups find an entry under any key equal to key (1, 1.0 and True are one key); setting
 * an existing entry keeps the key it was first stored under, as Python does. */
json_t *jv_dict_get(const json_t *dict, const jkey *key); /* borrowed; NULL when missing */
bool jv_dict_set(jexec *ex, json_t *dict, const jkey *key, json_t *value, size_t pos);
void jv_dict_del(json_t *dict, const jkey *key);
bool jv_dict_keys(jexec *ex, const json_t *dict, size_t pos, json_t **out); /* list of keys */
/* The lists and dicts of v copied (other values shared), so that a template that mutates
 * them leaves its caller's data alone; NULL when out of memory or nested too deeply. */
json_t *jv_copy_containers(const json_t *v);
/* Whether v may go into container (a list or dict) growing it by extra items: within the
 * sandbox's size (max_bytes / pointer size items) and closing no reference cycle. */
bool jv_may_insert(jexec *ex, const json_t *container, const json_t *v, size_t extra, size_t pos);
/* Jinja2's Markup, made by the safe filter: Markup + str escapes the str for HTML (HF's
 * environment does not autoescape, so nothing else does). A new string of v's text marked
 * safe; whether v is one (each string marked costs a step to check). */
bool jv_markup(jexec *ex, const json_t *v, size_t pos, json_t **out);
bool jv_is_markup(jexec *ex, const json_t *v, size_t pos, bool *result);
/* p with & < > ' " as HTML entities, as markupsafe.escape writes them, appended to out;
 * false when out reaches its limit. */
bool jv_escape_html(tbuf *out, const char *p, size_t n);
/* a + b where either is Markup: the other escaped, the result Markup. */
bool jv_markup_concat(jexec *ex, const json_t *a, bool a_safe, const json_t *b, bool b_safe,
                      size_t pos, json_t **out);
/* Python's getattr(obj, name) for the methods of dict, list and str: *found when Python has
 * the method; *out the bound method, or NULL (Undefined) for one that changes its object or
 * when not found (out may be NULL to ask only whether Python has it). Namespaces have no
 * methods. A bound method is valuefmt.h's form, told by tfmt_is_method. */
bool jv_python_attr(jexec *ex, json_t *obj, const char *name, size_t pos, bool *found,
                    json_t **out);
/* Keep v in held (one more reference) until the render ends; false when out of memory. */
bool jv_hold(jexec *ex, jheld *held, json_t *v, size_t pos);
/* Whether held holds v itself (not an equal value). */
bool jv_holds(const jheld *held, const json_t *v);
/* Drop held's references and its list. */
void jv_held_free(jheld *held);
json_t *jv_method_self(const json_t *method); /* borrowed */
const char *jv_method_name(const json_t *method);
/* Charge n steps for bulk work (copying n elements); false when the budget runs out. */
bool jv_charge(jexec *ex, size_t n, size_t pos);

#endif
