/*
 * The typed request (chat_request.h): building and freeing it, the checks every dialect
 * shares, and the JSON the prompt templates read back out of it.
 */
#include "server/core/chat_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

chat_request *chat_request_create(bool chat)
{
    chat_request *req = calloc(1, sizeof *req);
    if (!req)
        return NULL;
    req->chat = chat;
    req->stream = req->truncate = req->shift = true;
    return req;
}

static void free_images(chat_image *images, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(images[i].base64);
    free(images);
}

void chat_message_clear(chat_message *m)
{
    free(m->role);
    free(m->content);
    free(m->thinking);
    free(m->tool_name);
    free(m->tool_call_id);
    for (size_t i = 0; i < m->n_tool_calls; i++) {
        free(m->tool_calls[i].id);
        free(m->tool_calls[i].name);
        json_decref(m->tool_calls[i].arguments);
    }
    free(m->tool_calls);
    free_images(m->images, m->n_images);
    *m = (chat_message){0};
}

void chat_request_free(chat_request *req)
{
    if (!req)
        return;
    free(req->model);
    for (size_t i = 0; i < req->n_messages; i++)
        chat_message_clear(&req->messages[i]);
    free(req->messages);
    free(req->prompt);
    free(req->suffix);
    free(req->system);
    free(req->template_text);
    json_decref(req->context);
    free_images(req->images, req->n_images);
    json_decref(req->tools);
    free(req->tool_choice_name);
    json_decref(req->format);
    json_decref(req->options);
    free(req);
}

/* ---- building ---- */

void chat_role_normalize(char *role)
{
    for (; *role; role++)
        if (*role >= 'A' && *role <= 'Z')
            *role = (char)(*role - 'A' + 'a');
}

bool chat_request_push_message(chat_request *req, chat_message *m)
{
    if ((!m->role && !(m->role = strdup(""))) || (!m->content && !(m->content = strdup(""))))
        return false;
    chat_role_normalize(m->role);
    if (req->n_messages == req->messages_cap) {
        size_t cap = req->messages_cap ? 2 * req->messages_cap : 8;
        chat_message *grown = cap > SIZE_MAX / sizeof *grown
                                  ? NULL
                                  : realloc(req->messages, cap * sizeof *grown);
        if (!grown)
            return false;
        req->messages = grown;
        req->messages_cap = cap;
    }
    req->messages[req->n_messages++] = *m;
    *m = (chat_message){0};
    return true;
}

bool chat_request_add_text(chat_request *req, const char *role, const char *content,
                           size_t content_len)
{
    chat_message m = {.role = strdup(role), .content = strndup(content, content_len)};
    if (m.role && m.content && chat_request_push_message(req, &m))
        return true;
    chat_message_clear(&m);
    return false;
}

bool chat_message_add_tool_call(chat_message *m, const char *id, const char *name,
                                json_t *arguments)
{
    chat_tool_call *grown = realloc(m->tool_calls, (m->n_tool_calls + 1) * sizeof *grown);
    if (!grown)
        return false;
    m->tool_calls = grown;
    chat_tool_call c = {.id = id ? strdup(id) : NULL, .name = strdup(name),
                        .arguments = json_incref(arguments), .index = (int64_t)m->n_tool_calls};
    if (!c.name || (id && !c.id)) {
        free(c.id);
        free(c.name);
        json_decref(c.arguments);
        return false;
    }
    m->tool_calls[m->n_tool_calls++] = c;
    return true;
}

/* ---- checks ---- */

bool chat_request_check_tools(const json_t *tools, char *message, size_t size)
{
    if (tools && !json_is_null(tools) && !json_is_array(tools)) {
        snprintf(message, size, "tools must be an array");
        return false;
    }
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        json_t *fn = json_object_get(tool, "function");
        json_t *parameters = json_object_get(fn, "parameters");
        if (!json_is_string(json_object_get(fn, "name")) ||
            (parameters && !json_is_null(parameters) && !json_is_object(parameters))) {
            snprintf(message, size, "tools[%zu] must be {\"type\": \"function\", \"function\": "
                                    "{\"name\", \"parameters\": {...}}}", i);
            return false;
        }
    }
    return true;
}

/* ---- the templates' view ---- */

const char *chat_think_name(chat_think think)
{
    static const char *const levels[] = {"low", "medium", "high", "max"};
    return think >= CHAT_THINK_LOW && think <= CHAT_THINK_MAX ? levels[think - CHAT_THINK_LOW]
                                                              : NULL;
}

json_t *chat_think_json(chat_think think)
{
    switch (think) {
    case CHAT_THINK_UNSET: return NULL;
    case CHAT_THINK_OFF: return json_false();
    case CHAT_THINK_ON: return json_true();
    default: return json_string(chat_think_name(think));
    }
}

/* Set key to value (consumed) unless value is NULL; false when out of memory. */
static bool set_if(json_t *obj, const char *key, json_t *value)
{
    return !value || json_object_set_new(obj, key, value) == 0;
}

static json_t *string_or_null(const char *text)
{
    return text ? json_string(text) : NULL;
}

static json_t *images_json(const chat_image *images, size_t n)
{
    if (n == 0)
        return NULL;
    json_t *out = json_array();
    for (size_t i = 0; out && i < n; i++)
        if (json_array_append_new(out, json_stringn(images[i].base64, images[i].len)) != 0) {
            json_decref(out);
            return NULL;
        }
    return out;
}

static json_t *tool_calls_json(const chat_message *m)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < m->n_tool_calls; i++) {
        const chat_tool_call *c = &m->tool_calls[i];
        json_t *fn = json_object();
        json_t *call = json_object();
        bool ok = fn && call && set_if(call, "id", string_or_null(c->id)) &&
                  json_object_set(call, "function", fn) == 0 &&
                  (c->index < 0 || set_if(fn, "index", json_integer(c->index))) &&
                  set_if(fn, "name", json_string(c->name)) &&
                  (!c->arguments || json_object_set(fn, "arguments", c->arguments) == 0) &&
                  json_array_append(out, call) == 0;
        json_decref(fn);
        json_decref(call);
        if (!ok) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *message_json(const chat_message *m)
{
    json_t *out = json_pack("{s:s,s:s}", "role", m->role, "content", m->content);
    bool ok = out && set_if(out, "thinking", string_or_null(m->thinking)) &&
              set_if(out, "tool_name", string_or_null(m->tool_name)) &&
              set_if(out, "tool_call_id", string_or_null(m->tool_call_id));
    json_t *calls = ok && m->n_tool_calls ? tool_calls_json(m) : NULL;
    json_t *images = ok && m->n_images ? images_json(m->images, m->n_images) : NULL;
    ok = ok && (!m->n_tool_calls || (calls && set_if(out, "tool_calls", calls))) &&
         (!m->n_images || (images && set_if(out, "images", images)));
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *chat_request_template_input(const chat_request *req)
{
    json_t *input = json_object();
    bool ok = input != NULL;
    if (ok && req->chat) {
        json_t *messages = json_array();
        ok = messages && json_object_set_new(input, "messages", messages) == 0;
        for (size_t i = 0; ok && i < req->n_messages; i++) {
            json_t *m = message_json(&req->messages[i]);
            ok = m && json_array_append_new(messages, m) == 0;
        }
    } else if (ok) {
        ok = set_if(input, "prompt", string_or_null(req->prompt)) &&
             set_if(input, "suffix", string_or_null(req->suffix)) &&
             set_if(input, "system", string_or_null(req->system)) &&
             set_if(input, "template", string_or_null(req->template_text)) &&
             (!req->context || json_object_set(input, "context", req->context) == 0);
    }
    ok = ok && (!req->tools || json_object_set(input, "tools", req->tools) == 0) &&
         set_if(input, "think", chat_think_json(req->think));
    if (!ok) {
        json_decref(input);
        return NULL;
    }
    return input;
}

bool chat_message_append_text(chat_message *m, size_t *len, const char *sep, const char *text,
                              size_t n)
{
    size_t gap = *len ? strlen(sep) : 0;
    char *grown = realloc(m->content, *len + gap + n + 1);
    if (!grown)
        return false;
    m->content = grown;
    memcpy(grown + *len, sep, gap);
    memcpy(grown + *len + gap, text, n);
    *len += gap + n;
    grown[*len] = '\0';
    return true;
}

bool chat_message_add_image(chat_message *m, const char *base64, size_t len)
{
    chat_image *grown = realloc(m->images, (m->n_images + 1) * sizeof *grown);
    if (!grown)
        return false;
    m->images = grown;
    char *copy = strndup(base64, len);
    if (!copy)
        return false;
    m->images[m->n_images++] = (chat_image){.base64 = copy, .len = len};
    return true;
}

