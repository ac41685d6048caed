/*
 * Generation options: the table of every option ollama knows, with its JSON
 * type, and the one check every caller of an `options` object uses (/api/generate, /api/chat,
 * /api/embed, /api/create `parameters`). Unknown keys are ignored, wrong types rejected with
 * ollama's messages, floats given to int options truncated. Knows nothing of defaults or of
 * what an option does; the scheduler and runner read the normalised object.
 */
#ifndef CORRAL_OPTIONS_OPTIONS_H
#define CORRAL_OPTIONS_OPTIONS_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"

typedef enum option_type {
    OPTION_INT,          /* JSON integer; a real is truncated toward zero */
    OPTION_FLOAT,        /* JSON integer or real */
    OPTION_BOOL,         /* JSON true/false */
    OPTION_STRING_ARRAY, /* JSON array of strings (only `stop`) */
} option_type;

/* What an OPTION_INT outside its range gets. */
typedef enum option_bound {
    BOUND_NONE,     /* any 64-bit integer (seed, or options Corral ignores) */
    BOUND_REJECT,   /* a 400 naming the range */
    BOUND_SATURATE, /* the nearest end of the range: a bigger count means "as much as there is" */
} option_bound;

typedef struct option_info {
    const char *name;
    option_type type;
    option_bound bound;
    long long min, max; /* the range of an OPTION_INT with a bound */
} option_info;

/* The option called name, or NULL if ollama has no such option (then it is ignored). */
const option_info *options_find(const char *name);

/* Every known option, in ollama's documented order (for show's parameters text and docs). */
const option_info *options_all(size_t *n_options);

/* The type's name as ollama's messages spell it: "integer", "float32", "boolean", "array". */
const char *option_type_name(option_type type);

/*
 * Check an `options` object (NULL or JSON null: no options) and return a new object with
 * only the known keys, null values dropped, int options as JSON integers and float options
 * as JSON reals, so readers can use json_integer_value / json_number_value directly. Integers
 * are in their option's range (saturated where the table says so; num_thread at most the
 * machine's online CPUs, as more threads than cores only wait on each other), reals within
 * float32's. NULL with err on a wrong type: `option "top_k" must be of type integer`, or a
 * value out of range (HTTP 400).
 */
json_t *options_normalize(const json_t *options, corral_error *err);

#endif
