/*
 * Jinja subset (internal to src/template/): parser and evaluator for Hugging Face chat
 * templates, with the environment HF uses (trim_blocks, lstrip_blocks, loopcontrols), plus
 * the list and dict methods that change their object (append, pop, update…), which HF's
 * immutable sandbox refuses but llama.cpp's engine and Kimi's templates use: a template that
 * calls one works on its own copy of the caller's lists and dicts. Values are jansson json_t;
 * NULL stands for Jinja's Undefined; dicts take int, float, bool and None keys as well as str;
 * the safe filter's Markup escapes a str added to it, as Jinja2's does.
 */
#ifndef CORRAL_TEMPLATE_JINJA_TEMPLATE_H
#define CORRAL_TEMPLATE_JINJA_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/sandbox.h"
#include "template/tbuf.h"

typedef struct jinja_tree jinja_tree;

jinja_tree *jinja_parse(const char *src, size_t len, corral_error *err);
void jinja_tree_free(jinja_tree *tree);
const char *jinja_tree_source(const jinja_tree *tree);
size_t jinja_tree_source_len(const jinja_tree *tree);
bool jinja_render(const jinja_tree *tree, const json_t *vars, tsandbox *sb, tbuf *out);

/* The Jinja tree of a template (NULL for Go). */
struct corral_template;
const jinja_tree *corral_template_jinja_tree(const struct corral_template *tmpl);

#endif
