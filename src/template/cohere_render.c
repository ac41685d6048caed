/*
 * The Cohere prompt (cohere.h), laid out as ollama's `cohere` renderer lays it out, with its
 * whitespace: the template it follows writes its blocks untrimmed, so the tools list, the
 * action block and the result block carry the blank lines and indents of that template.
 */
#include <stdio.h>
#include <strings.h>

#include "template/cohere.h"
#include "template/gorender.h"
#include "template/tbuf.h"

#define TURN "<|START_OF_TURN_TOKEN|>"
#define END_TURN "<|END_OF_TURN_TOKEN|>"
#define SYSTEM_TURN TURN "<|SYSTEM_TOKEN|>"
#define CHATBOT_TURN TURN "<|CHATBOT_TOKEN|>"

static bool role_is(const json_t *m, const char *role)
{
    return strcasecmp(gorender_str(m, "role"), role) == 0;
}

/* s as Go's json.Marshal writes a string. */
static bool put_json_string(tbuf *out, const char *s)
{
    json_t *v = json_string(s);
    bool ok = v && gorender_value(out, v);
    json_decref(v);
    return ok;
}

/* One tool of the list: its function's name, description and parameters, "responses" null. */
static bool tool_entry(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    json_t *params = gorender_parameters_object(json_object_get(fn, "parameters"));
    bool ok = params && tbuf_puts(out, "{\"name\": ") &&
              put_json_string(out, gorender_str(fn, "name")) &&
              tbuf_puts(out, ", \"description\": ") &&
              put_json_string(out, gorender_str(fn, "description")) &&
              tbuf_puts(out, ", \"parameters\": ") &&
              gorender_json_spaced(out, params, true, false) &&
              tbuf_puts(out, ", \"responses\": null}");
    json_decref(params);
    return ok;
}

static bool tools_section(tbuf *out, const json_t *tools)
{
    size_t n = json_array_size(tools);
    bool ok =
        tbuf_puts(out, "# Available Tools\n```json\n[\n") && (n > 0 || tbuf_puts(out, "\n\n"));
    for (size_t i = 0; ok && i < n; i++)
        ok = tbuf_puts(out, "\n    ") && tool_entry(out, json_array_get(tools, i)) &&
             (i + 1 == n || tbuf_putc(out, ',')) && tbuf_puts(out, "\n\n");
    return ok && tbuf_puts(out, "\n]\n```");
}

/* The calls' ids renumbered across the history: the next number, and the first number an id
 * was given remembered in ids (id -> its number's text). */
typedef struct call_ids {
    json_t *ids;
    unsigned long next;
} call_ids;

static bool next_call_id(call_ids *c, const char *id, char num[24])
{
    snprintf(num, 24, "%lu", c->next++);
    return !*id || json_object_get(c->ids, id) ||
           json_object_set_new(c->ids, id, json_string(num)) == 0;
}

static bool tool_result(tbuf *out, const call_ids *c, const json_t *m)
{
    const char *id = gorender_str(m, "tool_call_id");
    const char *num = json_string_value(json_object_get(c->ids, id));
    json_t *wrapped = json_pack("{s:s}", "content", gorender_str(m, "content"));
    bool ok = wrapped && tbuf_puts(out, "\n    {\n        \"tool_call_id\": \"") &&
              tbuf_puts(out, num ? num : id) &&
              tbuf_puts(out, "\",\n        \"results\": {\n\n            \n            \"0\": ") &&
              gorender_json_spaced(out, wrapped, true, true) &&
              tbuf_puts(out, "\n\n        },\n        \"is_error\": null\n    }");
    json_decref(wrapped);
    return ok;
}

static bool thinking_block(tbuf *out, const char *thinking)
{
    return !*thinking || (tbuf_puts(out, COHERE_THINK_OPEN) && tbuf_puts(out, thinking) &&
                          tbuf_puts(out, COHERE_THINK_CLOSE));
}

static bool action_turn(tbuf *out, call_ids *c, const json_t *m)
{
    const json_t *calls = json_object_get(m, "tool_calls");
    bool ok = tbuf_puts(out, CHATBOT_TURN "\n            \n                ") &&
              thinking_block(out, gorender_str(m, "thinking")) &&
              tbuf_puts(out, COHERE_TOOL_OPEN "[");
    for (size_t i = 0; ok && i < json_array_size(calls); i++) {
        const json_t *call = json_array_get(calls, i);
        const json_t *fn = json_object_get(call, "function");
        char num[24];
        ok = next_call_id(c, gorender_str(call, "id"), num) &&
             tbuf_puts(out, "\n\n    {\"tool_call_id\": \"") && tbuf_puts(out, num) &&
             tbuf_puts(out, "\", \"tool_name\": \"") && tbuf_puts(out, gorender_str(fn, "name")) &&
             tbuf_puts(out, "\", \"parameters\": ") &&
             gorender_arguments_spaced(out, json_object_get(fn, "arguments")) &&
             tbuf_putc(out, '}') && (i + 1 == json_array_size(calls) || tbuf_putc(out, ','));
    }
    return ok && tbuf_puts(out, "\n\n]<|END_ACTION|>" END_TURN);
}

char *cohere_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    tbuf out;
    tbuf_init(&out, (limits ? limits : &defaults)->max_output_bytes);
    size_t n = json_array_size(messages), start = 0;
    const char *system = "";
    if (n > 0 && role_is(json_array_get(messages, 0), "system")) {
        system = gorender_str(json_array_get(messages, 0), "content");
        start = 1;
    }
    call_ids c = {json_object(), 0};
    bool ok = c.ids && tbuf_puts(&out, SYSTEM_TURN "<|START_TEXT|>") &&
              (!*system || (tbuf_puts(&out, system) && tbuf_puts(&out, "\n\n\n\n"))) &&
              tools_section(&out, tools) && tbuf_puts(&out, "<|END_TEXT|>" END_TURN);
    bool continued = false;
    for (size_t i = start; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *content = gorender_str(m, "content");
        if (role_is(m, "system") || role_is(m, "user")) {
            ok = tbuf_puts(&out, role_is(m, "user") ? TURN "<|USER_TOKEN|>" : SYSTEM_TURN) &&
                 tbuf_puts(&out, "<|START_TEXT|>") && tbuf_puts(&out, content) &&
                 tbuf_puts(&out, "<|END_TEXT|>" END_TURN);
        } else if ((role_is(m, "assistant") || role_is(m, "chatbot")) &&
                   json_array_size(json_object_get(m, "tool_calls")) > 0) {
            ok = action_turn(&out, &c, m);
        } else if (role_is(m, "assistant") || role_is(m, "chatbot")) {
            continued = i + 1 == n;
            ok = tbuf_puts(&out, CHATBOT_TURN) &&
                 thinking_block(&out, gorender_str(m, "thinking")) &&
                 tbuf_puts(&out, "<|START_TEXT|>") && tbuf_puts(&out, content) &&
                 (continued || tbuf_puts(&out, "<|END_TEXT|>" END_TURN));
        } else if (role_is(m, "tool")) {
            ok = tbuf_puts(&out, SYSTEM_TURN "<|START_TOOL_RESULT|>[") && tool_result(&out, &c, m);
            while (ok && i + 1 < n && role_is(json_array_get(messages, i + 1), "tool"))
                ok = tbuf_putc(&out, ',') && tool_result(&out, &c, json_array_get(messages, ++i));
            ok = ok && tbuf_puts(&out, "\n\n]<|END_TOOL_RESULT|>" END_TURN);
        }
    }
    bool thinks = !gorender_think_set(think) || gorender_think_on(think);
    if (ok && !continued)
        ok = tbuf_puts(&out, CHATBOT_TURN COHERE_THINK_OPEN) &&
             (thinks || tbuf_puts(&out, COHERE_THINK_CLOSE));
    json_decref(c.ids);
    return gorender_finish(&out, ok, "cohere", len, err);
}
