/*
 * Chat request -> prompt: builds the data a template sees from a request and
 * applies ollama's rendering rules for Go templates: images numbered [img-N], same-role
 * messages merged, .System as all system messages, legacy templates (no .Messages) run once
 * per turn with the last turn cut after {{ .Response }}, fill-in-the-middle with
 * .Prompt/.Suffix. Jinja templates get the request's own variables (messages, tools,
 * bos_token, add_generation_prompt…).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/collate.h"
#include "template/go_template.h"
#include "template/jinja_template.h"
#include "template/sandbox.h"
#include "template/tbuf.h"
#include "template/template.h"

static const char *str_field(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/*
 * Each image becomes [img-N] (N counting across the request), in place of the message's
 * first remaining "[img]" or else before its text, as ollama numbers them for the runner.
 */
static json_t *tag_images(const json_t *messages, size_t max_bytes)
{
    json_t *out = json_array();
    size_t n_images = 0;
    for (size_t i = 0; out && i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i);
        json_t *images = json_object_get(m, "images");
        if (!json_is_object(m) || !json_array_size(images)) {
            if (json_array_append(out, m) != 0)
                goto fail;
            continue;
        }
        tbuf prefix, text;
        tbuf_init(&prefix, max_bytes);
        tbuf_init(&text, max_bytes);
        bool ok = tbuf_puts(&text, str_field(m, "content"));
        for (size_t k = 0; ok && k < json_array_size(images); k++, n_images++) {
            char tag[32];
            snprintf(tag, sizeof tag, "[img-%zu]", n_images);
            char *slot = text.data ? strstr(text.data, "[img]") : NULL;
            if (!slot) {
                ok = tbuf_puts(&prefix, tag);
                continue;
            }
            tbuf rewritten;
            tbuf_init(&rewritten, max_bytes);
            size_t at = (size_t)(slot - text.data);
            ok = tbuf_append(&rewritten, text.data, at) && tbuf_puts(&rewritten, tag) &&
                 tbuf_puts(&rewritten, slot + 5);
            tbuf_free(&text);
            text = rewritten;
        }
        ok = ok && tbuf_append(&prefix, text.data ? text.data : "", text.len);
        json_t *copy = ok ? json_copy(m) : NULL;
        ok = copy &&
             json_object_set_new(
                 copy, "content",
                 json_stringn_nocheck(prefix.data ? prefix.data : "", prefix.len)) == 0 &&
             json_array_append_new(out, copy) == 0;
        tbuf_free(&prefix);
        tbuf_free(&text);
        if (!ok)
            goto fail;
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* Messages of the request, or ones made from system/prompt/response (/api/generate). */
static json_t *request_messages(const json_t *request)
{
    json_t *messages = json_object_get(request, "messages");
    if (json_is_array(messages))
        return json_incref(messages);
    messages = json_array();
    const char *roles[][2] = {{"system", "system"}, {"prompt", "user"}, {"response", "assistant"}};
    for (size_t i = 0; messages && i < 3; i++) {
        const char *text = str_field(request, roles[i][0]);
        if (*text)
            json_array_append_new(messages,
                                  json_pack("{ssss}", "role", roles[i][1], "content", text));
    }
    return messages;
}

static void set_think(json_t *data, const json_t *request)
{
    json_t *think = json_object_get(request, "think");
    bool is_set = think && !json_is_null(think);
    const char *level = json_is_string(think) ? json_string_value(think)
                        : json_is_true(think) ? "medium"
                                              : "";
    json_object_set_new(data, "Think",
                        json_boolean(json_is_true(think) || (json_is_string(think) && *level)));
    json_object_set_new(data, "ThinkLevel", json_string(level));
    json_object_set_new(data, "IsThinkSet", json_boolean(is_set));
}

static bool render_turn(const go_tree *tree, const char *system, const char *prompt,
                        const char *response, size_t cut_after, tsandbox *sb, tbuf *out)
{
    json_t *data = json_pack("{ssssss}", "System", system, "Prompt", prompt, "Response", response);
    if (!data)
        return tsandbox_fail(sb, 0, "out of memory");
    bool ok = go_render(tree, data, cut_after, sb, out);
    json_decref(data);
    return ok;
}

/* ollama's legacy path: one render per (system, user, assistant) turn. */
static bool render_legacy(const go_tree *tree, const json_t *messages, tsandbox *sb, tbuf *out)
{
    const char *system = "", *prompt = "", *response = "";
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        const char *role = str_field(m, "role"), *content = str_field(m, "content");
        bool flush = (!strcmp(role, "system") && (*prompt || *response)) ||
                     (!strcmp(role, "user") && *response);
        if (flush) {
            if (!render_turn(tree, system, prompt, response, SIZE_MAX, sb, out))
                return false;
            system = prompt = response = "";
        }
        if (!strcmp(role, "system"))
            system = content;
        else if (!strcmp(role, "user"))
            prompt = content;
        else if (!strcmp(role, "assistant"))
            response = content;
    }
    return render_turn(tree, system, prompt, response, go_tree_response_seq(tree), sb, out);
}

static bool render_go(const go_tree *tree, const json_t *request, tsandbox *sb, tbuf *out)
{
    const char *prompt = str_field(request, "prompt"), *suffix = str_field(request, "suffix");
    if (*prompt && *suffix) {
        json_t *data = json_pack("{ssssss}", "Prompt", prompt, "Suffix", suffix, "Response", "");
        bool ok = data && go_render(tree, data, SIZE_MAX, sb, out);
        json_decref(data);
        return ok || tsandbox_fail(sb, 0, "out of memory");
    }
    json_t *given = request_messages(request);
    json_t *messages = given ? tag_images(given, sb->max_bytes) : NULL;
    json_decref(given);
    tbuf system;
    tbuf_init(&system, sb->max_bytes);
    json_t *collated = messages ? collate_messages(messages, &system) : NULL;
    json_decref(messages);
    bool ok;
    if (!collated) {
        ok = tsandbox_fail(sb, 0, "out of memory or messages too large");
    } else if (go_tree_uses_field(tree, "messages")) {
        json_t *data = json_pack("{s:s#,s:O,s:s}", "System", system.data ? system.data : "",
                                 (int)system.len, "Messages", collated, "Response", "");
        json_t *tools = json_object_get(request, "tools");
        ok = data && json_object_set(data, "Tools", tools ? tools : json_null()) == 0;
        if (ok) {
            set_think(data, request);
            ok = go_render(tree, data, SIZE_MAX, sb, out);
        } else {
            tsandbox_fail(sb, 0, "out of memory");
        }
        json_decref(data);
    } else {
        ok = render_legacy(tree, collated, sb, out);
    }
    json_decref(collated);
    tbuf_free(&system);
    return ok;
}

char *corral_template_render_chat(const corral_template *tmpl, const json_t *request,
                                  const corral_template_limits *limits, size_t *len,
                                  corral_error *err)
{
    if (corral_template_syntax_of(tmpl) == CORRAL_TEMPLATE_JINJA)
        return corral_template_render(tmpl, request, limits, len, err);
    const go_tree *tree = corral_template_go_tree(tmpl);
    tsandbox sb;
    tsandbox_init(&sb, tree->src, tree->src_len, limits, err);
    tbuf out;
    tbuf_init(&out, sb.max_bytes);
    if (!render_go(tree, request, &sb, &out)) {
        if (!sb.failed)
            corral_error_set(err, "template render failed");
        tbuf_free(&out);
        return NULL;
    }
    char *text = tbuf_take(&out, len);
    if (!text)
        corral_error_set(err, "out of memory");
    return text;
}

corral_template *corral_template_parse_ollama(const char *src, size_t len, corral_error *err)
{
    corral_template *tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, src, len, err);
    if (!tmpl || corral_template_uses_field(tmpl, "messages") ||
        corral_template_uses_field(tmpl, "response"))
        return tmpl;
    /* ollama appends {{ .Response }} to a template that has no place for the answer. */
    corral_template_free(tmpl);
    size_t extra = strlen("{{ .Response }}");
    char *with_response = malloc(len + extra + 1);
    if (!with_response) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    memcpy(with_response, src, len);
    memcpy(with_response + len, "{{ .Response }}", extra + 1);
    tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, with_response, len + extra, err);
    free(with_response);
    return tmpl;
}
