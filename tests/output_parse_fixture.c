/* Feeding an answer to an output parser cut every way (output_parse_fixture.h). */
#include "output_parse_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void append(char *dst, const char *src, size_t n)
{
    size_t len = strlen(dst);
    assert_true(len + n < 4096);
    memcpy(dst + len, src, n);
    dst[len + n] = '\0';
}

void output_parse_split(output_parser_make_fn make, void *ctx, const char *text,
                        const size_t *splits, size_t n_splits, output_parsed *out)
{
    memset(out, 0, sizeof *out);
    out->calls = json_array();
    corral_output_parser *p = make(ctx);
    assert_non_null(p);
    size_t len = strlen(text), at = 0;
    for (size_t i = 0; i <= n_splits; i++) {
        size_t end = i < n_splits ? splits[i] : len;
        corral_output_delta d;
        corral_error err = {{0}};
        assert_true(corral_output_parser_feed(p, text + at, end - at, i == n_splits, &d, &err));
        append(out->content, d.content, d.content_len);
        append(out->thinking, d.thinking, d.thinking_len);
        json_array_extend(out->calls, (json_t *)d.tool_calls);
        at = end;
    }
    corral_output_parser_free(p);
}

void output_parse_expect(output_parser_make_fn make, void *ctx, const char *text,
                         const char *content, const char *thinking, const char *calls_json)
{
    size_t len = strlen(text);
    json_error_t jerr;
    json_t *want_calls = json_loads(calls_json, 0, &jerr);
    if (!want_calls)
        fail_msg("bad JSON in test: %s: %s", jerr.text, calls_json);
    size_t *bytes = malloc((len + 1) * sizeof *bytes);
    assert_non_null(bytes);
    for (size_t i = 0; i < len; i++)
        bytes[i] = i + 1;
    for (size_t split = 0; split <= len + 1; split++) {
        output_parsed got;
        if (split <= len)
            output_parse_split(make, ctx, text, &split, 1, &got);
        else
            output_parse_split(make, ctx, text, bytes, len ? len - 1 : 0, &got);
        if (strcmp(got.content, content) || strcmp(got.thinking, thinking) ||
            !json_equal(got.calls, want_calls)) {
            char *calls = json_dumps(got.calls, JSON_COMPACT);
            fail_msg("split %zu of [%s]: content [%s] thinking [%s] calls %s", split, text,
                     got.content, got.thinking, calls);
        }
        json_decref(got.calls);
    }
    free(bytes);
    json_decref(want_calls);
}
