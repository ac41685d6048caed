/*
 * What the dialect table tests (tests/test_api_*.c) share: a parse case is a body and either
 * the fields the typed request must have (a JSON subset of describe_request's view) or the
 * status and message of the refusal; a shape is driven with a made-up answer and its output
 * compared as JSON.
 */
#ifndef CORRAL_TESTS_API_FIXTURE_H
#define CORRAL_TESTS_API_FIXTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/core/chat_request.h"
#include "server/core/generation.h"

typedef unsigned (*api_parse_fn)(const json_t *body, chat_request **out, char *message,
                                 size_t size);

typedef struct parse_case {
    const char *name;
    const char *body;    /* JSON */
    unsigned status;     /* 200, or the refusal's */
    const char *expect;  /* 200: a JSON object every key of which describe_request matches
                          * (null: absent); else a substring of the refusal's message */
} parse_case;

json_t *api_json(const char *text);

/* Every field of req as JSON: model, chat, messages (as the templates see them), prompt,
 * suffix, system, template, raw, context, images (a completion's), tools, think, format,
 * options, stream, keep_alive_ns (absent when unset), logprobs, top_logprobs, truncate,
 * shift, count_only, tool_choice ("auto", "required" or "named") and tool_choice_name. */
json_t *describe_request(const chat_request *req);

/* Each key of expected equals actual's (JSON null: actual lacks it or has null). */
void api_expect_subset(const json_t *expected, const json_t *actual, const char *where);

void api_run_parse_cases(const parse_case *cases, size_t n, api_parse_fn parse);

/* shape->whole of answer with the runner's done message (JSON, read as generation_done). */
json_t *api_shape_whole(const generation_shape *shape, generation_info *info,
                        const char *done, const generation_delta *answer);

/* The bytes a stream of pieces then done (JSON) makes, NUL-terminated (free()). */
char *api_shape_stream(const generation_shape *shape, generation_info *info,
                       const generation_delta *pieces, size_t n_pieces, const char *done);

#endif
