/*
 * Text forms of data-model values (jansson json_t): JSON as Go's encoding/json and Python's
 * json.dumps write it, Python's str()/repr(), and Go's fmt %v. Both engines print through
 * here so that numbers and escapes match their reference language byte for byte. Output goes
 * to a bounded tbuf; nesting deeper than TFMT_MAX_DEPTH fails like a full buffer. Also the
 * one truth test both languages share.
 */
#ifndef CORRAL_TEMPLATE_VALUEFMT_H
#define CORRAL_TEMPLATE_VALUEFMT_H

#include <jansson.h>
#include <stdbool.h>

#include "template/tbuf.h"

#define TFMT_MAX_DEPTH 256

typedef struct tjson_style {
    bool python;      /* ", " and ": " separators, Python float repr; else Go's compact form */
    bool html_escape; /* <, >, & as \u003c… (Go's json.Marshal) */
    bool sort_keys;
    int indent; /* < 0: single line */
} tjson_style;

bool tfmt_json(tbuf *out, const json_t *v, const tjson_style *style);
bool tfmt_py_str(tbuf *out, const json_t *v);  /* str(v); NULL (undefined) prints nothing */
/* repr(v); strings escape what str.isprintable rejects, by utf8proc's Unicode tables. */
bool tfmt_py_repr(tbuf *out, const json_t *v);
bool tfmt_go(tbuf *out, const json_t *v);      /* fmt %v; null prints nothing */
bool tfmt_py_float(tbuf *out, double d);
bool tfmt_go_float(tbuf *out, double d);
/* s[0..n) as Go's strconv.Quote writes it (and %q): between double quotes, ASCII control
 * bytes, '"' and '\\' escaped; other bytes as they are (Go also escapes the Unicode characters
 * it does not count printable, which pass here as they are). */
bool tfmt_go_quote(tbuf *out, const char *s, size_t n);

/* A Jinja bound method (jinja_value.c makes them, for `x.items` and the like): an object
 * whose only key is TFMT_METHOD_KEY (2 bytes, a typed key no str key can spell), holding
 * [self, name]. Python's str() prints it as <built-in method NAME of TYPE object at ADDRESS>,
 * printed here without the address; it has no JSON form, so tfmt_json fails on one. */
#define TFMT_METHOD_KEY "\0m"
bool tfmt_is_method(const json_t *v);

/* Truth as Go templates and Python agree on it for these values: NULL (undefined), null,
 * false, 0, 0.0 and empty strings, arrays and objects are false; everything else is true. */
bool tvalue_truth(const json_t *v);

#endif
