/*
 * The dialect table tests' shared part (api_fixture.h).
 */
#include "api_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *api_json(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!v)
        fail_msg("bad test JSON %s: %s", text, jerr.text);
    return v;
}

static json_t *text_or_null(const char *text)
{
    return text ? json_string(text) : json_null();
}

json_t *describe_request(const chat_request *req)
{
    json_t *d = chat_request_template_input(req);
    assert_non_null(d);
    json_t *think = chat_think_json(req->think);
    json_object_set_new(d, "think", think ? think : json_null());
    json_object_set_new(d, "model", text_or_null(req->model));
    json_object_set_new(d, "chat", json_boolean(req->chat));
    json_object_set_new(d, "raw", json_boolean(req->raw));
    json_t *images = json_array();
    for (size_t i = 0; i < req->n_images; i++)
        json_array_append_new(images, json_stringn(req->images[i].base64, req->images[i].len));
    json_object_set_new(d, "images", images);
    json_object_set(d, "format", req->format ? req->format : json_null());
    json_object_set(d, "options", req->options ? req->options : json_null());
    json_object_set_new(d, "stream", json_boolean(req->stream));
    if (req->has_keep_alive)
        json_object_set_new(d, "keep_alive_ns", json_integer(req->keep_alive_ns));
    json_object_set_new(d, "logprobs", json_boolean(req->logprobs));
    json_object_set_new(d, "top_logprobs", json_integer(req->top_logprobs));
    json_object_set_new(d, "truncate", json_boolean(req->truncate));
    json_object_set_new(d, "shift", json_boolean(req->shift));
    json_object_set_new(d, "count_only", json_boolean(req->count_only));
    static const char *const choices[] = {"auto", "required", "named"};
    json_object_set_new(d, "tool_choice", json_string(choices[req->tool_choice]));
    json_object_set_new(d, "tool_choice_name", text_or_null(req->tool_choice_name));
    return d;
}

void api_expect_subset(const json_t *expected, const json_t *actual, const char *where)
{
    const char *key;
    json_t *want;
    json_object_foreach((json_t *)expected, key, want) {
        json_t *got = json_object_get(actual, key);
        bool same = json_is_null(want) ? !got || json_is_null(got) : json_equal(want, got);
        if (!same) {
            char *w = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
            char *g = got ? json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            fail_msg("%s: %s is %s, want %s", where, key, g ? g : "absent", w);
        }
    }
}

void api_run_parse_cases(const parse_case *cases, size_t n, api_parse_fn parse)
{
    for (size_t i = 0; i < n; i++) {
        const parse_case *c = &cases[i];
        json_t *body = api_json(c->body);
        chat_request *req = NULL;
        char message[512] = "";
        unsigned status = parse(body, &req, message, sizeof message);
        if (status != c->status)
            fail_msg("%s: status %u (%s), want %u", c->name, status, message, c->status);
        if (status == 200) {
            assert_non_null(req);
            json_t *want = api_json(c->expect);
            json_t *got = describe_request(req);
            api_expect_subset(want, got, c->name);
            json_decref(want);
            json_decref(got);
        } else if (!strstr(message, c->expect)) {
            fail_msg("%s: message \"%s\", want it to contain \"%s\"", c->name, message,
                     c->expect);
        }
        chat_request_free(req);
        json_decref(body);
    }
}

json_t *api_shape_whole(const generation_shape *shape, generation_info *info, const char *done,
                        const generation_delta *answer)
{
    json_t *d = api_json(done);
    generation_done ended = generation_done_read(d);
    json_t *out = shape->whole(info, &ended, answer);
    json_decref(d);
    assert_non_null(out);
    return out;
}

char *api_shape_stream(const generation_shape *shape, generation_info *info,
                       const generation_delta *pieces, size_t n_pieces, const char *done)
{
    generation_out *out = generation_out_create();
    assert_non_null(out);
    for (size_t i = 0; i < n_pieces; i++) {
        info->n_tool_calls += json_array_size(pieces[i].tool_calls);
        assert_true(shape->piece(info, &pieces[i], out));
    }
    json_t *d = api_json(done);
    generation_done ended = generation_done_read(d);
    assert_true(shape->end(info, &ended, out));
    json_decref(d);
    size_t len;
    const char *bytes = generation_out_bytes(out, &len);
    char *text = strndup(bytes ? bytes : "", len);
    generation_out_free(out);
    return text;
}
