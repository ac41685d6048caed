/*
 * Shared by the output parser tests: feed a model's answer to a parser in every way a stream
 * may cut it (whole, at each byte boundary in two chunks, one byte at a time) and expect
 * the same content, thinking and tool calls from each.
 */
#ifndef CORRAL_TESTS_OUTPUT_PARSE_FIXTURE_H
#define CORRAL_TESTS_OUTPUT_PARSE_FIXTURE_H

#include "template/template.h"

/* A fresh parser for one pass over the answer; ctx is the caller's. */
typedef corral_output_parser *(*output_parser_make_fn)(void *ctx);

/* What came out of one pass: content and thinking text, and the calls (a JSON array the
 * caller frees). */
typedef struct output_parsed {
    char content[4096];
    char thinking[4096];
    json_t *calls;
} output_parsed;

/* text fed to a parser from make in n_splits + 1 chunks, cut at splits (ascending; 0 and
 * the end implied), into out. */
void output_parse_split(output_parser_make_fn make, void *ctx, const char *text,
                        const size_t *splits, size_t n_splits, output_parsed *out);

/* text, cut every way above and fed to a parser from make, gives exactly content, thinking
 * and the calls of calls_json (a JSON array text). Fails the current cmocka test with the
 * cut and what came out otherwise. */
void output_parse_expect(output_parser_make_fn make, void *ctx, const char *text,
                         const char *content, const char *thinking, const char *calls_json);

#endif
