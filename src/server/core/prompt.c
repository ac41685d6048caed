/*
 * Prompt building (see prompt.h). Templates are parsed per request: they are small, and a
 * model's layers can change between requests (create replaces a manifest).
 */
#include "server/core/prompt.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "corral/engine.h"
#include "server/core/harmony_model.h"
#include "server/core/renderer_model.h"
#include "server/models/model_info.h"
#include "template/harmony.h"
#include "util/checked.h"

/* A string metadata value of the model file as a new JSON string, or NULL. */
static json_t *meta_string(const corral_model_file *f, const char *key)
{
    long i = corral_model_file_find_meta(f, key);
    if (i < 0 || corral_model_file_meta_type(f, (size_t)i) != CORRAL_META_STRING)
        return NULL;
    size_t len;
    const char *s = corral_model_file_meta_string(f, (size_t)i, 0, &len);
    return json_stringn(s, len);
}

/* Text of token id (from tokenizer.ggml.<id_key>) as a JSON string; "" when unknown. */
static json_t *special_token_text(const corral_model_file *f, const char *id_key)
{
    long id = corral_model_file_find_meta(f, id_key);
    long tokens = corral_model_file_find_meta(f, "tokenizer.ggml.tokens");
    if (id >= 0 && tokens >= 0 && corral_model_file_meta_type(f, (size_t)id) != CORRAL_META_ARRAY &&
        corral_model_file_meta_elem_type(f, (size_t)tokens) == CORRAL_META_STRING) {
        uint64_t index = corral_model_file_meta_uint(f, (size_t)id, 0);
        if (index < corral_model_file_meta_count(f, (size_t)tokens)) {
            size_t len;
            const char *s = corral_model_file_meta_string(f, (size_t)tokens, index, &len);
            return json_stringn(s, len);
        }
    }
    return json_string("");
}

static bool is_system(const json_t *message)
{
    const char *role = json_string_value(json_object_get(message, "role"));
    return role && strcmp(role, "system") == 0;
}

/* messages the template sees: model SYSTEM (unless the request brings one), model
 * MESSAGES (unless a generate request continues a `context`), then the request's. */
static json_t *assemble_messages(const model_ref *ref, const json_t *request, bool chat)
{
    json_t *messages = json_array();
    const json_t *req_messages = json_object_get(request, "messages");
    const char *system = json_string_value(json_object_get(request, "system"));
    bool request_has_system = chat ? is_system(json_array_get(req_messages, 0)) : system != NULL;
    if (!chat && system)
        json_array_append_new(messages, json_pack("{s:s,s:s}", "role", "system", "content", system));
    else if (!request_has_system && ref->system)
        json_array_append_new(messages,
                              json_pack("{s:s,s:s}", "role", "system", "content", ref->system));
    if (ref->messages && (chat || !json_object_get(request, "context")))
        json_array_extend(messages, ref->messages);
    if (chat) {
        json_array_extend(messages, (json_t *)req_messages);
    } else {
        const char *prompt = json_string_value(json_object_get(request, "prompt"));
        json_array_append_new(messages,
                              json_pack("{s:s,s:s}", "role", "user", "content", prompt ? prompt : ""));
    }
    return messages;
}

/* messages without those before window->first but the system ones, as ollama truncates. */
static json_t *window_messages(json_t *messages, prompt_window *window)
{
    window->n_messages = json_array_size(messages);
    window->n_dropped = 0;
    if (window->first == 0)
        return messages;
    assert(window->first < window->n_messages); /* the last message is always kept */
    json_t *kept = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
        if (i >= window->first || is_system(m))
            json_array_append(kept, m);
        else
            window->n_dropped++;
    json_decref(messages);
    return kept;
}

/* Most text of one message the thinking filter reads. */
#define PROMPT_MAX_MESSAGE_BYTES (64u << 20)

/*
 * Earlier assistant turns lose the thinking written into their content between the
 * template's tags (clients send back what the model wrote): ollama does this for qwen3 and
 * deepseek-r1 and notes that every thinking model gains from it (fewer tokens; the model does
 * not read its old reasoning as part of its answers), so Corral does it for every template
 * with thinking tags. Turns after the last user message, the current answer's tool round
 * trips, keep theirs. Changed messages are copies: the request's stay as they are.
 */
static bool drop_old_thinking(json_t *messages, const corral_output_tags *tags)
{
    if (!tags->think_open[0])
        return true;
    corral_output_tags think_only = *tags;
    think_only.tool_open[0] = '\0';
    size_t last_user = 0, i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && strcmp(role, "user") == 0)
            last_user = i;
    }
    for (i = 0; i < last_user; i++) {
        m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (!role || strcmp(role, "assistant") != 0 || !json_is_string(content) ||
            !strstr(json_string_value(content), tags->think_open))
            continue;
        corral_output_parser *parser =
            corral_output_parser_create(&think_only, false, PROMPT_MAX_MESSAGE_BYTES);
        corral_output_delta split;
        corral_error err;
        json_t *copy = parser ? json_copy(m) : NULL;
        bool ok = copy && corral_output_parser_feed(parser, json_string_value(content),
                                                    json_string_length(content), true, &split,
                                                    &err) &&
                  json_object_set_new(copy, "content",
                                      json_stringn(split.content, split.content_len)) == 0;
        if (ok)
            ok = json_array_set_new(messages, i, copy) == 0; /* takes copy either way */
        else
            json_decref(copy);
        corral_output_parser_free(parser);
        if (!ok)
            return false;
    }
    return true;
}

static char *render_jinja(const corral_model_file *f, json_t *chat_template,
                          json_t *messages, const json_t *request, corral_output_tags *tags,
                          corral_error *err)
{
    const char *src = json_string_value(chat_template);
    corral_template *tmpl =
        corral_template_parse(CORRAL_TEMPLATE_JINJA, src, json_string_length(chat_template), err);
    if (!tmpl)
        return NULL;
    corral_template_output_tags(tmpl, tags);
    if (!drop_old_thinking(messages, tags)) {
        corral_error_set(err, "out of memory");
        corral_template_free(tmpl);
        return NULL;
    }
    /* a template's {{ bos_token }} stays: the runner's tokenizer keeps one BOS
     * (corral_tokenize_prompt) */
    json_t *vars = json_pack("{s:O,s:o,s:o,s:b}", "messages", messages, "bos_token",
                             special_token_text(f, "tokenizer.ggml.bos_token_id"), "eos_token",
                             special_token_text(f, "tokenizer.ggml.eos_token_id"),
                             "add_generation_prompt", 1);
    json_t *tools = json_object_get(request, "tools");
    if (json_array_size(tools))
        json_object_set(vars, "tools", tools);
    json_t *think = json_object_get(request, "think");
    if (think && !json_is_null(think))
        json_object_set_new(vars, "enable_thinking", json_boolean(!json_is_false(think)));
    size_t len;
    char *text = corral_template_render(tmpl, vars, NULL, &len, err);
    json_decref(vars);
    corral_template_free(tmpl);
    return text;
}

const corral_renderer *prompt_renderer(const model_ref *ref, const json_t *request, bool chat)
{
    if (!chat && json_string_value(json_object_get(request, "template")))
        return NULL;
    if (harmony_model_renders(ref->config, ref->template_text))
        return NULL;
    return renderer_model_find(ref->config, ref->template_text);
}

static char *build(const model_ref *ref, const json_t *request, bool chat, prompt_window *window,
                   corral_output_tags *tags, corral_error *err)
{
    memset(tags, 0, sizeof *tags);
    const char *override = chat ? NULL : json_string_value(json_object_get(request, "template"));
    const char *go_src = override ? override : ref->template_text;
    json_t *messages = assemble_messages(ref, request, chat);
    if (messages && window)
        messages = window_messages(messages, window);
    if (!messages) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    char *text = NULL;
    size_t len;
    if (!override && harmony_model_renders(ref->config, ref->template_text)) {
        text = harmony_render(messages, chat ? json_object_get(request, "tools") : NULL,
                              json_object_get(request, "think"), NULL, NULL, &len, err);
        json_decref(messages);
        return text;
    }
    const corral_renderer *renderer = prompt_renderer(ref, request, chat);
    if (renderer) {
        text = renderer->render(messages, chat ? json_object_get(request, "tools") : NULL,
                                json_object_get(request, "think"), NULL, &len, err);
        corral_renderer_output_tags(renderer, tags);
        json_decref(messages);
        return text;
    }
    if (!override && ref->model_path) {
        corral_model_file *f = corral_model_file_open(ref->model_path, err);
        json_t *chat_template = f && !(go_src && model_info_uses_go_template(go_src, f))
                                    ? meta_string(f, "tokenizer.chat_template")
                                    : NULL;
        if (chat_template)
            text = render_jinja(f, chat_template, messages, request, tags, err);
        json_decref(chat_template);
        corral_model_file_close(f);
        if (chat_template || !f) {
            json_decref(messages);
            return text;
        }
    }
    corral_template *tmpl = go_src ? corral_template_parse_ollama(go_src, strlen(go_src), err)
                                   : corral_template_parse(CORRAL_TEMPLATE_GO, "{{ .Prompt }}", 13, err);
    if (tmpl && go_src) {
        corral_template_output_tags(tmpl, tags);
        if (!drop_old_thinking(messages, tags)) {
            corral_error_set(err, "out of memory");
            corral_template_free(tmpl);
            tmpl = NULL;
        }
    }
    if (tmpl) {
        json_t *input = json_deep_copy(request);
        json_object_set(input, "messages", messages);
        if (harmony_model_parses(ref->config, ref->template_text)) {
            /* harmony's effort levels stop at high; tools as its templates read them */
            const char *think = json_string_value(json_object_get(input, "think"));
            if (think && strcmp(think, "max") == 0)
                json_object_set_new(input, "think", json_string("high"));
            json_t *tools = json_object_get(input, "tools");
            if (json_is_array(tools))
                json_object_set_new(input, "tools", harmony_model_template_tools(tools));
        }
        if (!chat)
            json_object_del(input, "prompt"); /* the prompt is the last message now */
        const char *suffix = json_string_value(json_object_get(request, "suffix"));
        if (!chat && suffix && *suffix) /* fill-in-the-middle runs on .Prompt/.Suffix directly */
            json_object_set(input, "prompt", json_object_get(request, "prompt"));
        text = corral_template_render_chat(tmpl, input, NULL, &len, err);
        json_decref(input);
        corral_template_free(tmpl);
    }
    json_decref(messages);
    return text;
}

char *prompt_build(const model_ref *ref, const json_t *request, bool chat, prompt_window *window,
                   corral_output_tags *tags, corral_error *err)
{
    char *text = build(ref, request, chat, window, tags, err);
    /* a harmony answer is split by channels, whatever template wrote the prompt */
    bool own_template = !chat && json_string_value(json_object_get(request, "template"));
    tags->harmony = !own_template && harmony_model_parses(ref->config, ref->template_text);
    return text;
}

/* Adds the length of string key of object to *sum; SIZE_MAX once it would overflow. */
static void add_text_bytes(const json_t *object, const char *key, size_t *sum)
{
    const json_t *text = json_object_get(object, key);
    if (json_is_string(text) && !checked_add_size(*sum, json_string_length(text), sum))
        *sum = SIZE_MAX;
}

size_t prompt_request_text_bytes(const json_t *request, bool chat)
{
    size_t sum = 0;
    if (!chat) {
        add_text_bytes(request, "prompt", &sum);
        add_text_bytes(request, "system", &sum);
        add_text_bytes(request, "suffix", &sum);
        return sum;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(request, "messages"), i, m) {
        add_text_bytes(m, "content", &sum);
        add_text_bytes(m, "thinking", &sum);
    }
    return sum;
}
