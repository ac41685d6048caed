/*
 * The typed request (chat_request.h): building, freeing, reading /api/chat's and
 * /api/generate's JSON into it, and the JSON the prompt templates read back out of it.
 */
#include "server/core/chat_request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

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
    json_decref(req->format);
    json_decref(req->options);
    free(req);
}

/* ---- building ---- */

bool chat_request_push_message(chat_request *req, chat_message *m)
{
    if ((!m->role && !(m->role = strdup(""))) || (!m->content && !(m->content = strdup(""))))
        return false;
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

/* ---- reading /api/chat's and /api/generate's JSON ---- */

/* What parsing a body is doing: where a mistake is reported, and whether memory ran out. */
typedef struct parse {
    char *message;
    size_t size;
    unsigned status; /* 200 until something fails */
} parse;

static bool refuse(parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool refuse(parse *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, p->size, fmt, ap);
    va_end(ap);
    p->status = 400;
    return false;
}

static bool out_of_memory(parse *p)
{
    snprintf(p->message, p->size, "out of memory");
    p->status = 500;
    return false;
}

/* A copy of v's text (NULL when v is not a string); false only when out of memory. */
static bool copy_string(parse *p, const json_t *v, char **out)
{
    *out = NULL;
    if (!json_is_string(v))
        return true;
    *out = strndup(json_string_value(v), json_string_length(v));
    return *out || out_of_memory(p);
}

static bool is_string_or_null(const json_t *v)
{
    return !v || json_is_null(v) || json_is_string(v);
}

/* images: base64 strings, kept as given; where names the field for a message. */
static bool read_images(parse *p, const json_t *images, const char *where, chat_image **out,
                        size_t *n)
{
    size_t count = json_array_size(images);
    if (count == 0)
        return true;
    if (!(*out = calloc(count, sizeof **out)))
        return out_of_memory(p);
    size_t i;
    json_t *image;
    json_array_foreach(images, i, image) {
        if (!json_is_string(image))
            return refuse(p, "%simages[%zu] must be a base64 string", where, i);
        if (!copy_string(p, image, &(*out)[i].base64))
            return false;
        (*out)[i].len = json_string_length(image);
        *n = i + 1;
    }
    return true;
}

static bool read_tool_calls(parse *p, const json_t *calls, size_t at, chat_message *m)
{
    if (calls && !json_is_null(calls) && !json_is_array(calls))
        return refuse(p, "messages[%zu].tool_calls must be an array", at);
    size_t count = json_array_size(calls);
    if (count == 0)
        return true;
    if (!(m->tool_calls = calloc(count, sizeof *m->tool_calls)))
        return out_of_memory(p);
    size_t k;
    json_t *call;
    json_array_foreach(calls, k, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *arguments = json_object_get(fn, "arguments");
        json_t *index = json_object_get(fn, "index");
        if (!json_is_string(json_object_get(fn, "name")) ||
            (arguments && !json_is_null(arguments) && !json_is_object(arguments)))
            return refuse(p, "messages[%zu].tool_calls[%zu] must be {\"function\": "
                             "{\"name\", \"arguments\": {...}}}", at, k);
        chat_tool_call *c = &m->tool_calls[k];
        m->n_tool_calls = k + 1;
        c->index = json_is_integer(index) ? json_integer_value(index) : -1;
        c->arguments = json_is_object(arguments) ? json_incref(arguments) : NULL;
        if (!copy_string(p, json_object_get(fn, "name"), &c->name) ||
            !copy_string(p, json_object_get(call, "id"), &c->id))
            return false;
    }
    return true;
}

/* One message: its text fields strings (absent or null role and content: "", as ollama's Go
 * structs decode them, so no template meets an undefined content), its tool calls each a
 * function with a name and object arguments (what templates read of them). */
static bool read_message(parse *p, const json_t *in, size_t at, chat_message *m)
{
    static const char *const text_fields[] = {"role", "content", "thinking", "tool_name"};
    char **targets[] = {&m->role, &m->content, &m->thinking, &m->tool_name};
    if (!json_is_object(in))
        return refuse(p, "messages[%zu] must be an object", at);
    for (size_t f = 0; f < sizeof text_fields / sizeof text_fields[0]; f++) {
        json_t *v = json_object_get(in, text_fields[f]);
        if (!is_string_or_null(v))
            return refuse(p, "messages[%zu].%s must be a string", at, text_fields[f]);
        if (!copy_string(p, v, targets[f]))
            return false;
        if (f < 2 && !*targets[f] && !(*targets[f] = strdup("")))
            return out_of_memory(p);
    }
    char where[48];
    snprintf(where, sizeof where, "messages[%zu].", at);
    return read_tool_calls(p, json_object_get(in, "tool_calls"), at, m) &&
           copy_string(p, json_object_get(in, "tool_call_id"), &m->tool_call_id) &&
           read_images(p, json_object_get(in, "images"), where, &m->images, &m->n_images);
}

static bool read_messages(parse *p, const json_t *messages, chat_request *req)
{
    if (messages && !json_is_null(messages) && !json_is_array(messages))
        return refuse(p, "messages must be an array");
    size_t count = json_array_size(messages);
    if (count == 0)
        return true;
    if (!(req->messages = calloc(count, sizeof *req->messages)))
        return out_of_memory(p);
    req->messages_cap = count;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        req->n_messages = i + 1;
        if (!read_message(p, m, i, &req->messages[i]))
            return false;
    }
    return true;
}

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

/* tools: what a template reads of them must be there. */
static bool read_tools(parse *p, const json_t *tools, chat_request *req)
{
    if (!chat_request_check_tools(tools, p->message, p->size)) {
        p->status = 400;
        return false;
    }
    if (json_array_size(tools) > 0)
        req->tools = json_incref((json_t *)tools);
    return true;
}

static const char *const think_levels[] = {"low", "medium", "high", "max"};

/* think: absent or null, a bool, or a level. */
static bool read_think(parse *p, const json_t *think, chat_request *req)
{
    req->think = !think || json_is_null(think) ? CHAT_THINK_UNSET
                 : json_is_true(think)         ? CHAT_THINK_ON
                                               : CHAT_THINK_OFF;
    if (!think || json_is_null(think) || json_is_boolean(think))
        return true;
    for (size_t i = 0; json_is_string(think) && i < sizeof think_levels / sizeof *think_levels;
         i++)
        if (strcmp(json_string_value(think), think_levels[i]) == 0) {
            req->think = (chat_think)(CHAT_THINK_LOW + i);
            return true;
        }
    return refuse(p, "invalid think value: must be true, false, \"low\", \"medium\", \"high\" "
                     "or \"max\"");
}

static bool read_flags(parse *p, const json_t *body, chat_request *req)
{
    static const char *const flags[] = {"truncate", "shift"};
    bool *targets[] = {&req->truncate, &req->shift};
    for (size_t i = 0; i < 2; i++) {
        json_t *flag = json_object_get(body, flags[i]);
        if (flag && !json_is_null(flag) && !json_is_boolean(flag))
            return refuse(p, "%s must be a boolean", flags[i]);
        *targets[i] = !json_is_false(flag);
    }
    return true;
}

static bool read_logprobs(parse *p, const json_t *body, chat_request *req)
{
    json_t *logprobs = json_object_get(body, "logprobs");
    json_t *top = json_object_get(body, "top_logprobs");
    if (logprobs && !json_is_null(logprobs) && !json_is_boolean(logprobs))
        return refuse(p, "logprobs must be a boolean");
    if (top && !json_is_null(top) &&
        (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > 20))
        return refuse(p, "top_logprobs must be between 0 and 20");
    req->logprobs = json_is_true(logprobs);
    req->top_logprobs = (int)json_integer_value(top);
    return true;
}

static bool read_keep_alive(parse *p, const json_t *v, chat_request *req)
{
    if (!v || json_is_null(v))
        return true;
    req->has_keep_alive = true;
    if (json_is_number(v)) { /* seconds */
        req->keep_alive_ns = server_duration_ns(json_number_value(v) * 1e9);
        return true;
    }
    if (json_is_string(v) && server_parse_duration(json_string_value(v), &req->keep_alive_ns))
        return true;
    return refuse(p, "invalid keep_alive duration");
}

static bool read_completion(parse *p, const json_t *body, chat_request *req)
{
    json_t *context = json_object_get(body, "context");
    if (json_is_array(context))
        req->context = json_incref(context);
    req->raw = json_is_true(json_object_get(body, "raw"));
    return copy_string(p, json_object_get(body, "prompt"), &req->prompt) &&
           copy_string(p, json_object_get(body, "suffix"), &req->suffix) &&
           copy_string(p, json_object_get(body, "system"), &req->system) &&
           copy_string(p, json_object_get(body, "template"), &req->template_text) &&
           read_images(p, json_object_get(body, "images"), "", &req->images, &req->n_images);
}

unsigned chat_request_parse_native(const json_t *body, bool chat, chat_request **out,
                                   char *message, size_t size)
{
    parse p = {.message = message, .size = size, .status = 200};
    chat_request *req = chat_request_create(chat);
    if (!req) {
        out_of_memory(&p);
        return p.status;
    }
    json_t *format = json_object_get(body, "format");
    json_t *options = json_object_get(body, "options");
    bool plain_text = !format || json_is_null(format) ||
                      (json_is_string(format) && json_string_length(format) == 0);
    req->format = plain_text ? NULL : json_incref(format);
    req->options = json_is_object(options) ? json_incref(options) : NULL;
    req->stream = !json_is_false(json_object_get(body, "stream"));
    req->debug_render_only = json_is_true(json_object_get(body, "_debug_render_only"));
    bool ok = copy_string(&p, json_object_get(body, "model"), &req->model) &&
              read_keep_alive(&p, json_object_get(body, "keep_alive"), req) &&
              (chat ? read_tools(&p, json_object_get(body, "tools"), req) &&
                          read_messages(&p, json_object_get(body, "messages"), req)
                    : read_completion(&p, body, req)) &&
              read_flags(&p, body, req) && read_think(&p, json_object_get(body, "think"), req) &&
              read_logprobs(&p, body, req);
    if (!ok) {
        chat_request_free(req);
        return p.status;
    }
    *out = req;
    return 200;
}

/* ---- the templates' view ---- */

json_t *chat_think_json(chat_think think)
{
    switch (think) {
    case CHAT_THINK_UNSET: return NULL;
    case CHAT_THINK_OFF: return json_false();
    case CHAT_THINK_ON: return json_true();
    default: return json_string(think_levels[think - CHAT_THINK_LOW]);
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
