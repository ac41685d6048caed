/*
 * Structured outputs: a request's `format` ("json", or a JSON schema) as the GBNF grammar the
 * runner's sampler enforces (corral_grammar_create). The grammars follow llama.cpp's
 * json-schema-to-grammar shapes — bounded whitespace, bounded digits — except that nothing
 * may follow the top-level value, so that a model cannot pad its answer until num_predict.
 */
#ifndef CORRAL_SERVER_FORMAT_GRAMMAR_H
#define CORRAL_SERVER_FORMAT_GRAMMAR_H

#include <jansson.h>

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

#endif
