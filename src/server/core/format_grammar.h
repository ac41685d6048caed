/*
 * Structured outputs: a request's `format` ("json", or a JSON schema) as the GBNF grammar the
 * runner's sampler enforces (corral_grammar_create). The grammars follow llama.cpp's
 * json-schema-to-grammar shapes — bounded whitespace, bounded digits — except that nothing
 * may follow the top-level value, so that a model cannot pad its answer until num_predict.
 */
#ifndef CORRAL_SERVER_FORMAT_GRAMMAR_H
#define CORRAL_SERVER_FORMAT_GRAMMAR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "corral/error.h"

/* format:"json": any JSON object. malloc'ed, NULL when out of memory. */
char *format_grammar_json_object(void);

/*
 * A grammar accepting exactly the JSON texts schema allows (properties in the schema's
 * order, see docs/API.md for the keywords read); malloc'ed, or NULL with err (an HTTP 400
 * message) for a schema that is invalid or beyond what is supported.
 */
char *format_grammar_from_schema(const json_t *schema, corral_error *err);

/*
 * As format_grammar_from_schema, the JSON text between two literal texts: before (then
 * JSON's optional whitespace) and after (whitespace first); an empty one is left out, with
 * its whitespace. For a tool call wrapped in its template's tags.
 */
char *format_grammar_from_schema_between(const json_t *schema, const char *before,
                                         const char *after, corral_error *err);

/* ---- the builder itself, for grammars that hold values in another syntax (tool_grammar.c) ---- */

/*
 * How values are written. JSON: as format has them. JSON_NO_LT: JSON whose strings never
 * hold a raw '<' just before one of the builder's lt_follower characters, and strings with a
 * length bound no raw '<' at all (\u003c stands for it: a JSON value inside a family's tags,
 * all of which start with '<' and one of those characters, cannot then close them), and
 * whose exponents have at most two digits (a number a reader can hold).
 * GEMMA4: Gemma 4's call arguments: strings between <|"|> marks (never holding "<|\"|>" or
 * "<tool_call|>"; a string with a length bound, never '<'), mapping keys bare, numbers as
 * JSON_NO_LT's, true, false, null, lists.
 * FUNCTIONGEMMA: GEMMA4's, with <escape> for the mark (never holding "<escape>" or
 * "<end_function_call>").
 * PYTHON: JSON_NO_LT whose strings escape only as Python reads the escape the same (\" \\
 * \n \r \t \uXXXX; not \/ \b \f): a JSON value as a Python literal in a call.
 */
typedef enum format_dialect {
    FORMAT_JSON,
    FORMAT_JSON_NO_LT,
    FORMAT_GEMMA4,
    FORMAT_PYTHON,
    FORMAT_FUNCTIONGEMMA,
} format_dialect;

typedef struct builder format_builder;

/* A builder writing rules in dialect (lt_follower: JSON_NO_LT's and PYTHON's, one character
 * or up to seven ASCII ones; else unused); NULL with err when out of memory. */
format_builder *format_builder_create(format_dialect dialect, const char *lt_follower,
                                      corral_error *err);

/* Let JSON's whitespace hold up to newlines newlines in a row, then its indentation (format's
 * holds one): for a family whose own layout leaves blank lines between a list's brackets and
 * its items (Cohere's action). Before the builder writes its first rule. */
void format_builder_set_newlines(format_builder *b, unsigned newlines);

/* The rules of schema, its local $refs pointing into root (which may change between calls:
 * the references known are then forgotten); name receives the rule that matches it. False
 * with the builder's error (a 400's message, "format: ..."). */
bool format_builder_schema(format_builder *b, const json_t *root, const json_t *schema,
                           const char *hint, char name[64]);

/* The same, of schema taken as of one type ("string", "object", ...). */
bool format_builder_type(format_builder *b, const json_t *root, const json_t *schema,
                         const char *type, char name[64]);

/* schema's "type", else the one its "properties" or "items" imply, else "": a new reference
 * (NULL when out of memory). */
json_t *format_schema_type(const json_t *schema);

/* The schema a local $ref of root points at, or NULL. */
const json_t *format_builder_resolve(const json_t *root, const char *ref);

/* A shared rule (space, integer, number, boolean, null, value, ...), written once. */
const char *format_builder_primitive(format_builder *b, const char *primitive);

/* A fresh rule name from a hint, into name[64]. */
void format_builder_rule_name(format_builder *b, const char *hint, char name[64]);

/* The stream rules are written to: one rule a line, "name ::= ...". */
FILE *format_builder_stream(format_builder *b);

/* text (UTF-8) written to the stream as a GBNF literal. */
void format_builder_text_literal(format_builder *b, const char *text);

/* A count keyword pair (minLength / maxLength, ...) of schema as the builder reads them:
 * -1 when absent, max -1 also when beyond what a grammar counts. */
bool format_builder_range(format_builder *b, const json_t *schema, const char *min_key,
                          const char *max_key, long *min, long *max);

/*
 * Free text with limits, as a rule: none of avoid (a NULL-terminated list of ASCII texts)
 * occurs in it; it is none of not_whole (NULL-terminated, lower-case ASCII words, matched in
 * any case); it does not
 * start with a character of not_first; with no_newline_ends it neither starts nor ends with
 * '\n'; its length in characters is within [min, max] (-1: no bound). With a bound, the
 * first characters of avoid's texts never occur in it at all. NUL never does.
 */
typedef struct format_text {
    const char *const *avoid;
    const char *const *not_whole;
    const char *not_first;
    bool no_newline_ends;
    long min, max;
} format_text;

bool format_builder_text(format_builder *b, const format_text *text, char name[64]);

/* Fail the builder with a message (as its own errors, "format: ..."); false. */
bool format_builder_fail(format_builder *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The grammar, "root ::= start" last, and the builder freed: malloc'ed, or NULL with err
 * (the builder's error, or out of memory). */
char *format_builder_finish(format_builder *b, const char *start);

/* Free a builder without a grammar. */
void format_builder_free(format_builder *b);

#endif
