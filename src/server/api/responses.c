/*
 * OpenAI's Responses API, POST /v1/responses, stateless as in ollama: the
 * request's `input` (a string or items: messages, function calls and their outputs,
 * reasoning; replayed web searches passed over) and `instructions` become an /api/chat body
 * for the generation core; the answer is a response object whose output items are reasoning
 * (the thinking, as a summary), the message and function calls, or, streamed, the named
 * events the SDKs accumulate (response.created … response.completed, each with a
 * sequence_number).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api/responses.h"

#include "server/api/api_build.h"
#include "server/api/api_serve.h"
#include "server/api/openai.h"
#include "server/api/sse.h"
#include "server/http/request_fields.h"
#include "server/server.h"

typedef enum item_kind { ITEM_NONE, ITEM_REASONING, ITEM_MESSAGE } item_kind;

/* One answer: what its response objects repeat, and a stream's progress. */
typedef struct responses_answer {
    char id[40];         /* resp_N */
    json_int_t created_at;
    json_t *echo;        /* the request's fields a response object repeats */
    json_t *output;      /* the output items finished so far (a stream's) */
    unsigned sequence;   /* of the next event */
    bool started;        /* response.created sent */
    bool incomplete;     /* the answer stopped at max_output_tokens */
    item_kind open;      /* the item a stream is writing */
    char item_id[40];
    char *text;          /* the open item's text so far */
    size_t text_len, text_cap;
    char model[];        /* as the request named it */
} responses_answer;

static atomic_uint_fast64_t ids_made;

static void make_id(char *buf, size_t size, const char *prefix)
{
    snprintf(buf, size, "%s_%" PRIu64, prefix, (uint64_t)atomic_fetch_add(&ids_made, 1) + 1);
}

static void answer_free(void *state)
{
    responses_answer *a = state;
    if (!a)
        return;
    json_decref(a->echo);
    json_decref(a->output);
    free(a->text);
    free(a);
}

static bool finished_by_length(const generation_done *done)
{
    return done->reason && strcmp(done->reason, "length") == 0;
}

/* The counts with the details OpenAI's SDKs type as always present (openai-python's
 * ResponseUsage, which the Agents SDK reads): cached_tokens are the prompt tokens the runner
 * had from an earlier request; reasoning tokens are not counted apart from the rest (the runner
 * reports one count for the answer), so they are 0 as in ollama. */
static json_t *usage(const generation_done *done)
{
    json_int_t input = done->prompt_tokens, output = done->eval_count;
    json_int_t cached = done->prompt_tokens - done->prompt_eval_count;
    return json_pack("{s:I,s:{s:I},s:I,s:{s:i},s:I}", "input_tokens", input,
                     "input_tokens_details", "cached_tokens", cached > 0 ? cached : 0,
                     "output_tokens", output, "output_tokens_details", "reasoning_tokens", 0,
                     "total_tokens", input + output);
}

/* A response object with output (consumed) and usage (consumed; NULL: null). completed_at is
 * the time an answer ended (completed or incomplete), null before and for a failure. */
static json_t *response_object(const responses_answer *a, const char *status, json_t *output,
                               json_t *response_usage)
{
    bool ended = strcmp(status, "completed") == 0 || strcmp(status, "incomplete") == 0;
    json_t *r = json_pack("{s:s,s:s,s:I,s:o,s:s,s:s,s:o,s:o,s:n,s:n}", "id", a->id, "object",
                          "response", "created_at", a->created_at, "completed_at",
                          ended ? json_integer((json_int_t)time(NULL)) : json_null(), "status",
                          status, "model", a->model, "output", output, "usage",
                          response_usage ? response_usage : json_null(), "error",
                          "incomplete_details");
    if (r && strcmp(status, "incomplete") == 0)
        json_object_set_new(r, "incomplete_details",
                            json_pack("{s:s}", "reason", "max_output_tokens"));
    if (r)
        json_object_update(r, a->echo);
    return r;
}

static json_t *message_item(const char *id, const char *text, size_t len, const char *status)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:s%,s:[],s:[]}]}", "type", "message", "id",
                     id, "status", status, "role", "assistant", "content", "type",
                     "output_text", "text", text, len, "annotations", "logprobs");
}

static json_t *reasoning_item(const char *id, const char *text, size_t len)
{
    return json_pack("{s:s,s:s,s:[{s:s,s:s%}]}", "type", "reasoning", "id", id, "summary",
                     "type", "summary_text", "text", text, len);
}

/* A tool call as a function_call item: arguments a JSON string, as OpenAI sends them. */
static json_t *function_call_item(const json_t *call, const char *status, bool with_arguments)
{
    char id[40];
    make_id(id, sizeof id, "fc");
    json_t *fn = json_object_get(call, "function");
    char *args = json_dumps(json_object_get(fn, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *item = json_pack("{s:s,s:s,s:O,s:O,s:s,s:s}", "type", "function_call", "id", id,
                             "call_id", json_object_get(call, "id"), "name",
                             json_object_get(fn, "name"), "arguments",
                             with_arguments && args ? args : "", "status", status);
    free(args);
    return item;
}

/* ---- streamed answers ---- */

static bool send_event(responses_answer *a, generation_out *out, const char *type,
                       json_t *data)
{
    return sse_typed_event(out, type,
                           json_pack("{s:I}", "sequence_number", (json_int_t)a->sequence++), data);
}

static bool start_response(responses_answer *a, generation_out *out)
{
    if (a->started)
        return true;
    a->started = true;
    return send_event(a, out, "response.created",
                      json_pack("{s:o}", "response",
                                response_object(a, "in_progress", json_array(), NULL))) &&
           send_event(a, out, "response.in_progress",
                      json_pack("{s:o}", "response",
                                response_object(a, "in_progress", json_array(), NULL)));
}

static json_int_t output_index(const responses_answer *a)
{
    return (json_int_t)json_array_size(a->output);
}

/* Finish the open item: its text's done events, then output_item.done. */
static bool close_item(responses_answer *a, generation_out *out)
{
    item_kind kind = a->open;
    if (kind == ITEM_NONE)
        return true;
    a->open = ITEM_NONE;
    const char *text = a->text ? a->text : "";
    json_int_t at = output_index(a);
    json_t *item = kind == ITEM_MESSAGE
                       ? message_item(a->item_id, text, a->text_len,
                                      a->incomplete ? "incomplete" : "completed")
                       : reasoning_item(a->item_id, text, a->text_len);
    json_t *part = json_copy(json_array_get(json_object_get(item, kind == ITEM_MESSAGE
                                                                      ? "content"
                                                                      : "summary"),
                                            0));
    bool ok;
    if (kind == ITEM_MESSAGE)
        ok = send_event(a, out, "response.output_text.done",
                        json_pack("{s:s,s:I,s:i,s:s%,s:[]}", "item_id", a->item_id,
                                  "output_index", at, "content_index", 0, "text", text,
                                  a->text_len, "logprobs")) &&
             send_event(a, out, "response.content_part.done",
                        json_pack("{s:s,s:I,s:i,s:O}", "item_id", a->item_id, "output_index",
                                  at, "content_index", 0, "part", part));
    else
        ok = send_event(a, out, "response.reasoning_summary_text.done",
                        json_pack("{s:s,s:I,s:i,s:s%}", "item_id", a->item_id, "output_index",
                                  at, "summary_index", 0, "text", text, a->text_len)) &&
             send_event(a, out, "response.reasoning_summary_part.done",
                        json_pack("{s:s,s:I,s:i,s:O}", "item_id", a->item_id, "output_index",
                                  at, "summary_index", 0, "part", part));
    json_decref(part);
    ok = ok && send_event(a, out, "response.output_item.done",
                          json_pack("{s:I,s:O}", "output_index", at, "item", item));
    ok = ok && json_array_append(a->output, item) == 0;
    json_decref(item);
    a->text_len = 0;
    return ok;
}

/* Make an item of kind the open one, with its first (empty) part. */
static bool open_item(responses_answer *a, generation_out *out, item_kind kind)
{
    if (a->open == kind)
        return true;
    if (!close_item(a, out))
        return false;
    a->open = kind;
    make_id(a->item_id, sizeof a->item_id, kind == ITEM_MESSAGE ? "msg" : "rs");
    json_int_t at = output_index(a);
    if (kind == ITEM_MESSAGE)
        return send_event(a, out, "response.output_item.added",
                          json_pack("{s:I,s:{s:s,s:s,s:s,s:s,s:[]}}", "output_index", at,
                                    "item", "type", "message", "id", a->item_id, "status",
                                    "in_progress", "role", "assistant", "content")) &&
               send_event(a, out, "response.content_part.added",
                          json_pack("{s:s,s:I,s:i,s:{s:s,s:s,s:[],s:[]}}", "item_id",
                                    a->item_id, "output_index", at, "content_index", 0, "part",
                                    "type", "output_text", "text", "", "annotations",
                                    "logprobs"));
    return send_event(a, out, "response.output_item.added",
                      json_pack("{s:I,s:{s:s,s:s,s:[]}}", "output_index", at, "item", "type",
                                "reasoning", "id", a->item_id, "summary")) &&
           send_event(a, out, "response.reasoning_summary_part.added",
                      json_pack("{s:s,s:I,s:i,s:{s:s,s:s}}", "item_id", a->item_id,
                                "output_index", at, "summary_index", 0, "part", "type",
                                "summary_text", "text", ""));
}

/* Text or thinking into the open item of its kind. */
static bool item_delta(responses_answer *a, generation_out *out, item_kind kind,
                       const char *text, size_t len)
{
    if (len == 0)
        return true;
    if (!open_item(a, out, kind))
        return false;
    if (len > a->text_cap - a->text_len) {
        size_t cap = a->text_cap ? a->text_cap : 256;
        while (len > cap - a->text_len)
            cap *= 2;
        char *grown = realloc(a->text, cap);
        if (!grown)
            return false;
        a->text = grown;
        a->text_cap = cap;
    }
    memcpy(a->text + a->text_len, text, len);
    a->text_len += len;
    json_int_t at = output_index(a);
    if (kind == ITEM_MESSAGE)
        return send_event(a, out, "response.output_text.delta",
                          json_pack("{s:s,s:I,s:i,s:s%,s:[]}", "item_id", a->item_id,
                                    "output_index", at, "content_index", 0, "delta", text, len,
                                    "logprobs"));
    return send_event(a, out, "response.reasoning_summary_text.delta",
                      json_pack("{s:s,s:I,s:i,s:s%}", "item_id", a->item_id, "output_index",
                                at, "summary_index", 0, "delta", text, len));
}

/* A tool call: its item, its arguments as one delta, and its end. */
static bool function_call_events(responses_answer *a, generation_out *out, const json_t *call)
{
    if (!close_item(a, out))
        return false;
    json_int_t at = output_index(a);
    json_t *item = function_call_item(call, "completed", true);
    json_t *added = json_copy(item);
    if (!item || !added) {
        json_decref(item);
        json_decref(added);
        return false;
    }
    json_object_set_new(added, "arguments", json_string(""));
    json_object_set_new(added, "status", json_string("in_progress"));
    json_t *id = json_object_get(item, "id"), *args = json_object_get(item, "arguments");
    bool ok = send_event(a, out, "response.output_item.added",
                         json_pack("{s:I,s:o}", "output_index", at, "item", added)) &&
              send_event(a, out, "response.function_call_arguments.delta",
                         json_pack("{s:O,s:I,s:O}", "item_id", id, "output_index", at, "delta",
                                   args)) &&
              send_event(a, out, "response.function_call_arguments.done",
                         json_pack("{s:O,s:I,s:O}", "item_id", id, "output_index", at,
                                   "arguments", args)) &&
              send_event(a, out, "response.output_item.done",
                         json_pack("{s:I,s:O}", "output_index", at, "item", item));
    return json_array_append_new(a->output, item) == 0 && ok;
}

static bool responses_piece(const generation_info *info, const generation_delta *d,
                            generation_out *out)
{
    responses_answer *a = info->state;
    if (!start_response(a, out) ||
        !item_delta(a, out, ITEM_REASONING, d->thinking, d->thinking_len) ||
        !item_delta(a, out, ITEM_MESSAGE, d->content, d->content_len))
        return false;
    size_t i;
    json_t *call;
    json_array_foreach(d->tool_calls, i, call)
        if (!function_call_events(a, out, call))
            return false;
    return true;
}

static bool responses_end(const generation_info *info, const generation_done *done,
                          generation_out *out)
{
    responses_answer *a = info->state;
    bool length = finished_by_length(done);
    a->incomplete = length;
    return start_response(a, out) && close_item(a, out) &&
           send_event(a, out, length ? "response.incomplete" : "response.completed",
                      json_pack("{s:o}", "response",
                                response_object(a, length ? "incomplete" : "completed",
                                                json_incref(a->output), usage(done))));
}

static bool responses_fail(const generation_info *info, const char *message, generation_out *out)
{
    responses_answer *a = info->state;
    if (!start_response(a, out))
        return false;
    json_t *response = response_object(a, "failed", json_incref(a->output), NULL);
    if (response)
        json_object_set_new(response, "error",
                            json_pack("{s:s,s:s}", "code", "server_error", "message", message));
    return send_event(a, out, "response.failed", json_pack("{s:o}", "response", response));
}

/* ---- whole answers ---- */

static json_t *responses_whole(const generation_info *info, const generation_done *done,
                               const generation_delta *answer)
{
    responses_answer *a = info->state;
    json_t *output = json_array();
    char id[40];
    if (answer->thinking_len > 0) {
        make_id(id, sizeof id, "rs");
        json_array_append_new(output, reasoning_item(id, answer->thinking, answer->thinking_len));
    }
    if (answer->content_len > 0 || json_array_size(answer->tool_calls) == 0) {
        make_id(id, sizeof id, "msg");
        json_array_append_new(output,
                              message_item(id, answer->content, answer->content_len,
                                           finished_by_length(done) ? "incomplete"
                                                                    : "completed"));
    }
    size_t i;
    json_t *call;
    json_array_foreach(answer->tool_calls, i, call)
        json_array_append_new(output, function_call_item(call, "completed", true));
    bool length = finished_by_length(done);
    return response_object(a, length ? "incomplete" : "completed", output, usage(done));
}

static json_t *responses_loaded(const generation_info *info, const char *reason)
{
    (void)reason;
    return response_object(info->state, "completed", json_array(),
                           json_pack("{s:i,s:i,s:i}", "input_tokens", 0, "output_tokens", 0,
                                     "total_tokens", 0));
}

const generation_shape responses_shape = {
    .stream_content_type = "text/event-stream",
    .stream_loaded = true,
    .piece = responses_piece,
    .end = responses_end,
    .fail = responses_fail,
    .whole = responses_whole,
    .loaded = responses_loaded,
    .error = openai_error,
    .free_state = answer_free,
};

/* ---- requests ---- */

/* The last message if it is the assistant's, else a new assistant message; valid until the
 * next message is added. NULL when out of memory. */
static chat_message *assistant_turn(chat_request *req)
{
    chat_message *last = req->n_messages ? &req->messages[req->n_messages - 1] : NULL;
    if (last && strcmp(last->role, "assistant") == 0)
        return last;
    if (!chat_request_add_text(req, "assistant", "", 0))
        return NULL;
    return &req->messages[req->n_messages - 1];
}

/* m's text and images moved to the end of turn's, the text after sep when both have some;
 * m is left empty. false when out of memory. */
static bool merge_message(chat_message *turn, chat_message *m, const char *sep)
{
    size_t have = strlen(turn->content), add = strlen(m->content);
    if (add && !chat_message_append_text(turn, &have, sep, m->content, add))
        return false;
    for (size_t i = 0; i < m->n_images; i++)
        if (!chat_message_add_image(turn, m->images[i].base64, m->images[i].len))
            return false;
    chat_message_clear(m);
    return true;
}

/* Whether one of m's tool calls has the id next answers (next a function_call_output). */
static bool answers_a_call(const chat_message *m, const json_t *next)
{
    const char *type = json_string_value(json_object_get(next, "type"));
    const char *id = json_string_value(json_object_get(next, "call_id"));
    if (!type || strcmp(type, "function_call_output") != 0 || !id)
        return false;
    for (size_t i = 0; i < m->n_tool_calls; i++)
        if (m->tool_calls[i].id && strcmp(m->tool_calls[i].id, id) == 0)
            return true;
    return false;
}

/*
 * A message item's message added to req, or an assistant's joined to the assistant turn
 * before it, as ollama merges them: into the turn a reasoning item just opened (thinking
 * only), since the answer and the thinking that led to it are one turn to the template; and
 * into a turn whose call the next item (next, NULL: none) answers, which a client replays
 * between a function_call and its output, since a template expects the result right after
 * its call. false when out of memory.
 */
static bool add_item_message(chat_request *req, chat_message *m, const json_t *next)
{
    chat_message *last = req->n_messages ? &req->messages[req->n_messages - 1] : NULL;
    if (last && strcmp(m->role, "assistant") == 0 && strcmp(last->role, "assistant") == 0) {
        if (last->thinking && !*last->content && !last->n_tool_calls && !last->n_images)
            return merge_message(last, m, "");
        if (answers_a_call(last, next))
            return merge_message(last, m, "\n");
    }
    return chat_request_push_message(req, m);
}

/*
 * An input_image part into m: its image_url a data: URL. A part with no URL (absent, null or
 * "", as one naming only a file_id is) is passed over, as ollama passes it over: Corral has
 * no store of uploaded files to find it in.
 */
static bool add_image_part(chat_message *m, const json_t *part, const char *where,
                           api_build *b)
{
    json_t *url = json_object_get(part, "image_url");
    if (!url || json_is_null(url) || (json_is_string(url) && json_string_length(url) == 0))
        return true;
    return api_build_image_url(m, url, where, b);
}

/*
 * An input_file part: refused in ollama's words, as a message's part or a result's (a file's
 * bytes are neither text nor an image a template can place).
 */
static bool refuse_file_part(const char *where, api_build *b)
{
    return api_refuse(b, 400, "%s: file inputs are not currently supported", where);
}

/*
 * A message item: content a string or parts, one message as ollama makes it: its input_text
 * and output_text parts' text joined as they come, its input_image parts (data: URLs) its
 * images, an input_file part a 400. next is the item after it (NULL: none).
 */
static bool add_message_item(const json_t *item, size_t at, const json_t *next,
                             chat_request *req, api_build *b)
{
    const char *role = json_string_value(json_object_get(item, "role"));
    json_t *content = json_object_get(item, "content");
    if (strcmp(role, "developer") == 0)
        role = "system";
    if (!json_is_string(content) && !json_is_array(content))
        return api_refuse(b, 400, "input[%zu].content must be a string or an array", at);
    chat_message m = {.role = strdup(role),
                      .content = json_is_string(content)
                                     ? strndup(json_string_value(content),
                                               json_string_length(content))
                                     : strdup("")};
    bool ok = (m.role && m.content) || API_OUT_OF_MEMORY(b);
    size_t len = strlen(m.content ? m.content : ""), k;
    json_t *part;
    json_array_foreach(ok && json_is_array(content) ? content : NULL, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        char where[64];
        snprintf(where, sizeof where, "input[%zu].content[%zu]", at, k);
        if (type && strcmp(type, "input_image") == 0) {
            ok = add_image_part(&m, part, where, b);
        } else if (type && strcmp(type, "input_file") == 0) {
            ok = refuse_file_part(where, b);
        } else if (!type || (strcmp(type, "input_text") != 0 && strcmp(type, "output_text") != 0) ||
                   !json_is_string(text)) {
            ok = api_refuse(b, 400, "input[%zu].content[%zu]: %s input is not supported yet", at,
                            k, type ? type : "untyped");
        } else {
            ok = chat_message_append_text(&m, &len, "", json_string_value(text),
                                          json_string_length(text)) ||
                 API_OUT_OF_MEMORY(b);
        }
        if (!ok)
            break;
    }
    ok = ok && (add_item_message(req, &m, next) || API_OUT_OF_MEMORY(b));
    chat_message_clear(&m);
    return ok;
}

/* A function_call item: a call of the assistant's turn (arguments parsed from their text;
 * none, or "", are no arguments, as ollama reads them), noted in names for the output that
 * answers it. */
static bool add_function_call(const json_t *item, size_t at, chat_request *req, json_t *names,
                              api_build *b)
{
    const char *name = json_string_value(json_object_get(item, "name"));
    const char *id = json_string_value(json_object_get(item, "call_id"));
    json_t *given = json_object_get(item, "arguments");
    const char *text = json_string_value(given);
    json_t *args = !given || json_is_null(given) || (text && !*text) ? json_object()
                   : text                     ? json_loads(text, 0, NULL)
                                              : NULL;
    bool ok = name && json_is_object(args)
                  ? true
                  : api_refuse(b, 400, "input[%zu]: a function_call needs a name and arguments "
                                       "that are a JSON object", at);
    chat_message *turn = ok ? assistant_turn(req) : NULL;
    ok = ok && ((turn && chat_message_add_tool_call(turn, id, name, args) &&
                 (!id || json_object_set_new(names, id, json_string(name)) == 0)) ||
                API_OUT_OF_MEMORY(b));
    json_decref(args);
    return ok;
}

/*
 * A function_call_output's output parts into the tool message: input_text / output_text
 * joined with nothing between, as ollama joins them; input_image (a data: URL) as its
 * images; input_file a 400.
 */
static bool read_output_parts(const json_t *parts, size_t at, chat_message *tool, api_build *b)
{
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(parts, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        char where[64];
        snprintf(where, sizeof where, "input[%zu].output[%zu]", at, k);
        if (type && strcmp(type, "input_image") == 0) {
            if (!add_image_part(tool, part, where, b))
                return false;
            continue;
        }
        if (type && strcmp(type, "input_file") == 0)
            return refuse_file_part(where, b);
        if (!type || (strcmp(type, "input_text") != 0 && strcmp(type, "output_text") != 0) ||
            !json_is_string(text))
            return api_refuse(b, 400, "input[%zu].output[%zu]: %s output is not supported yet",
                              at, k, type ? type : "untyped");
        if (!chat_message_append_text(tool, &len, "", json_string_value(text),
                                      json_string_length(text)))
            return API_OUT_OF_MEMORY(b);
    }
    return true;
}

/* A function_call_output item: a tool message named after its call; its output a string,
 * or parts (what a tool returning text and images sends). */
static bool add_function_output(const json_t *item, size_t at, chat_request *req,
                                const json_t *names, api_build *b)
{
    const char *call_id = json_string_value(json_object_get(item, "call_id"));
    json_t *output = json_object_get(item, "output");
    if (!call_id || !(json_is_string(output) || json_is_array(output)))
        return api_refuse(b, 400, "input[%zu]: a function_call_output needs a call_id and an "
                                  "output (a string or an array of parts)", at);
    const char *name = json_string_value(json_object_get(names, call_id));
    chat_message tool = {.role = strdup("tool"),
                         .content = json_is_string(output)
                                        ? strndup(json_string_value(output),
                                                  json_string_length(output))
                                        : strdup(""),
                         .tool_call_id = strdup(call_id),
                         .tool_name = name ? strdup(name) : NULL};
    bool ok = (tool.role && tool.content && tool.tool_call_id && (!name || tool.tool_name)) ||
              API_OUT_OF_MEMORY(b);
    ok = ok && (!json_is_array(output) || read_output_parts(output, at, &tool, b));
    ok = ok && (chat_request_push_message(req, &tool) || API_OUT_OF_MEMORY(b));
    chat_message_clear(&tool);
    return ok;
}

/* A reasoning item: its summary text as the thinking of the assistant's turn, else its
 * reasoning_text content (the raw reasoning, which clients such as Codex keep for open-weight
 * models and send back with an empty summary). encrypted_content is never read: from
 * OpenAI it is ciphertext. */
static bool add_reasoning(const json_t *item, chat_request *req, api_build *b)
{
    chat_message *turn = assistant_turn(req);
    json_t *text =
        json_object_get(json_array_get(json_object_get(item, "summary"), 0), "text");
    json_t *content = json_array_get(json_object_get(item, "content"), 0);
    const char *content_type = json_string_value(json_object_get(content, "type"));
    if (!json_is_string(text) && content_type && strcmp(content_type, "reasoning_text") == 0)
        text = json_object_get(content, "text");
    if (!turn)
        return API_OUT_OF_MEMORY(b);
    if (!json_is_string(text))
        return true;
    free(turn->thinking);
    turn->thinking = strndup(json_string_value(text), json_string_length(text));
    return turn->thinking || API_OUT_OF_MEMORY(b);
}

/*
 * input: a string (one user message) or items. A web_search_call item (a search run for an
 * earlier answer, which a client such as Codex replays) is passed over, as ollama passes it:
 * the model cannot use it, and the answer after it holds what the search found. Other item
 * types are refused, as ollama refuses them.
 */
static bool add_input(const json_t *input, chat_request *req, json_t *names, api_build *b)
{
    if (json_is_string(input))
        return chat_request_add_text(req, "user", json_string_value(input),
                                     json_string_length(input)) ||
               API_OUT_OF_MEMORY(b);
    if (!json_is_array(input))
        return api_refuse(b, 400, "input must be a string or an array of items");
    size_t i;
    json_t *item;
    json_array_foreach(input, i, item) {
        const char *type = json_string_value(json_object_get(item, "type"));
        const char *role = json_string_value(json_object_get(item, "role"));
        bool ok;
        if (role && (!type || strcmp(type, "message") == 0))
            ok = add_message_item(item, i, json_array_get(input, i + 1), req, b);
        else if (type && strcmp(type, "function_call") == 0)
            ok = add_function_call(item, i, req, names, b);
        else if (type && strcmp(type, "function_call_output") == 0)
            ok = add_function_output(item, i, req, names, b);
        else if (type && strcmp(type, "reasoning") == 0)
            ok = add_reasoning(item, req, b);
        else if (type && strcmp(type, "web_search_call") == 0)
            ok = true;
        else if (type && strcmp(type, "message") == 0)
            return api_refuse(b, 400, "input[%zu]: a message item needs a role", i);
        else if (!type)
            return api_refuse(b, 400, "input[%zu]: an item needs a type", i);
        else
            return api_refuse(b, 400, "input[%zu]: %s items are not supported", i, type);
        if (!ok)
            return false;
    }
    return true;
}

/* How deep namespaces may nest: a hostile body could otherwise recurse without end. */
#define NAMESPACE_DEPTH_MAX 8

/*
 * Function tools ({type: "function", name, description, parameters}) appended to out as
 * ollama's, named prefix + name. A "namespace" tool groups functions under its name: its
 * members are added as "<namespace>.<name>", as ollama expands them, so the model can call
 * each. where names the tool in a refusal.
 */
static bool add_tools(const json_t *tools, const char *prefix, const char *where, int depth,
                      json_t *out, char *message, size_t size)
{
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const char *type = json_string_value(json_object_get(tool, "type"));
        json_t *name = json_object_get(tool, "name");
        char at[96], full[256];
        snprintf(at, sizeof at, "%s[%zu]", where, i);
        if (type && strcmp(type, "namespace") == 0 && json_is_string(name) &&
            json_is_array(json_object_get(tool, "tools"))) {
            if (depth >= NAMESPACE_DEPTH_MAX) {
                snprintf(message, size, "%s: namespaces nest at most %d deep", at,
                         NAMESPACE_DEPTH_MAX);
                return false;
            }
            snprintf(full, sizeof full, "%s%s.", prefix, json_string_value(name));
            snprintf(at + strlen(at), sizeof at - strlen(at), ".tools");
            if (!add_tools(json_object_get(tool, "tools"), full, at, depth + 1, out, message,
                           size))
                return false;
            continue;
        }
        if (!type || strcmp(type, "function") != 0 || !json_is_string(name)) {
            snprintf(message, size, "%s: only function tools with a name (or namespaces of "
                                    "them) are supported", at);
            return false;
        }
        if ((size_t)snprintf(full, sizeof full, "%s%s", prefix, json_string_value(name)) >=
            sizeof full) {
            snprintf(message, size, "%s: the tool's name is too long", at);
            return false;
        }
        json_t *parameters = json_object_get(tool, "parameters");
        json_array_append_new(out, json_pack("{s:s,s:{s:s,s:O*,s:O?}}", "type", "function",
                                             "function", "name", full, "description",
                                             json_object_get(tool, "description"), "parameters",
                                             parameters));
    }
    return true;
}

static json_t *native_tools(const json_t *tools, char *message, size_t size)
{
    json_t *out = json_array();
    if (!out)
        snprintf(message, size, "out of memory");
    if (out && !add_tools(tools, "", "tools", 0, out, message, size)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* text.format as ollama's format: json_schema's schema, json_object as "json". */
static bool read_text_format(const json_t *body, chat_request *req, api_build *b)
{
    json_t *format = json_object_get(json_object_get(body, "text"), "format");
    const char *type = json_string_value(json_object_get(format, "type"));
    json_t *schema = json_object_get(format, "schema");
    if (!type || strcmp(type, "text") == 0)
        return true;
    if (strcmp(type, "json_object") == 0)
        return (req->format = json_string("json")) || API_OUT_OF_MEMORY(b);
    if (strcmp(type, "json_schema") == 0 && json_is_object(schema)) {
        req->format = json_incref(schema);
        return true;
    }
    return api_refuse(b, 400, "text.format must be text, json_object or json_schema with a schema");
}

/* Sampling fields as ollama options, with max_output_tokens as num_predict. */
static json_t *read_options(const json_t *body)
{
    json_t *options = json_object();
    static const char *const same[][2] = {
        {"temperature", "temperature"}, {"top_p", "top_p"}, {"max_output_tokens", "num_predict"}};
    for (size_t i = 0; options && i < sizeof same / sizeof same[0]; i++) {
        json_t *v = json_object_get(body, same[i][0]);
        if (v && !json_is_null(v))
            json_object_set(options, same[i][1], v);
    }
    return options;
}

/* tools (withheld when tool_choice is none), tool_choice, reasoning.effort and
 * text.format. */
static bool read_features(const json_t *body, chat_request *req, api_build *b)
{
    json_t *tools = json_object_get(body, "tools");
    const char *choice = json_string_value(json_object_get(body, "tool_choice"));
    if (json_array_size(tools) > 0 && !(choice && strcmp(choice, "none") == 0) &&
        (!(req->tools = native_tools(tools, b->message, b->size)) ||
         !chat_request_check_tools(req->tools, b->message, b->size))) {
        b->status = 400;
        return false;
    }
    if (!openai_read_tool_choice(json_object_get(body, "tool_choice"), false, req, b))
        return false;
    if (!openai_read_reasoning(body, &req->think, b->message, b->size)) {
        b->status = 400;
        return false;
    }
    return read_text_format(body, req, b);
}

unsigned responses_parse(const json_t *body, chat_request **out, char *message, size_t size)
{
    corral_error err = {{0}};
    if (!request_fields_check(REQUEST_API_RESPONSES, body, &err)) {
        snprintf(message, size, "%.255s", err.message);
        return 400;
    }
    api_build b = {.message = message, .size = size, .status = 200};
    json_t *previous = json_object_get(body, "previous_response_id");
    if (previous && !json_is_null(previous)) {
        api_refuse(&b, 400, "previous_response_id is not supported: Corral stores no responses; "
                            "send the conversation as input");
        return b.status;
    }
    /* a background response is one the client polls for later, which needs it stored */
    if (json_is_true(json_object_get(body, "background"))) {
        api_refuse(&b, 400, "background is not supported: Corral stores no responses; "
                            "stream the response instead");
        return b.status;
    }
    const char *truncation = json_string_value(json_object_get(body, "truncation"));
    if (truncation && strcmp(truncation, "auto") != 0 && strcmp(truncation, "disabled") != 0) {
        api_refuse(&b, 400, "truncation must be auto or disabled");
        return b.status;
    }
    chat_request *req = chat_request_create(true);
    json_t *names = json_object(); /* call ids -> names, for the function_call_outputs */
    const char *model = json_string_value(json_object_get(body, "model"));
    json_t *instructions = json_object_get(body, "instructions");
    json_t *input = json_object_get(body, "input");
    bool ok = (req && names && (!model || (req->model = strdup(model))) &&
               (req->options = read_options(body)) &&
               (!json_is_string(instructions) || json_string_length(instructions) == 0 ||
                chat_request_add_text(req, "system", json_string_value(instructions),
                                      json_string_length(instructions)))) ||
              API_OUT_OF_MEMORY(&b);
    if (req) {
        req->stream = json_is_true(json_object_get(body, "stream"));
        /* "disabled" is OpenAI's word for a 400 when the input does not fit; "auto" and no
         * word at all drop the oldest messages, as ollama's chat does */
        req->truncate = !(truncation && strcmp(truncation, "disabled") == 0);
    }
    ok = ok && add_input(input, req, names, &b);
    json_decref(names);
    if (ok && json_is_array(input) && json_array_size(input) == 0)
        ok = api_refuse(&b, 400, "input: at least one item is required");
    ok = ok && read_features(body, req, &b);
    if (!ok) {
        chat_request_free(req);
        return b.status;
    }
    *out = req;
    return 200;
}

/* The request's settings a response object repeats, with OpenAI's defaults, and the fields
 * of OpenAI's response object that name what Corral does not do (no stored, background or
 * prompt-cache-keyed responses; one service tier; no logprobs here). truncation is "auto"
 * when unset since that is what the request gets. */
static json_t *echo_fields(const json_t *body)
{
    json_t *echo = json_pack("{s:n,s:n,s:n,s:n,s:[],s:s,s:b,s:{s:{s:s}},s:{s:n,s:n},s:{},"
                             "s:n,s:b,s:s,s:b,s:s,s:i,s:n,s:i,s:i,s:n,s:n,s:n}",
                             "instructions", "max_output_tokens", "temperature", "top_p", "tools",
                             "tool_choice", "auto", "parallel_tool_calls", 1, "text", "format",
                             "type", "text", "reasoning", "effort", "summary", "metadata",
                             "previous_response_id", "store", 0, "truncation", "auto",
                             "background", 0, "service_tier", "default", "top_logprobs", 0,
                             "max_tool_calls", "presence_penalty", 0, "frequency_penalty", 0,
                             "prompt_cache_key", "safety_identifier", "user");
    static const char *const repeated[] = {"instructions", "max_output_tokens", "temperature",
                                           "top_p", "tools", "tool_choice", "text", "reasoning",
                                           "metadata", "parallel_tool_calls", "truncation",
                                           "prompt_cache_key", "safety_identifier", "user"};
    for (size_t i = 0; echo && i < sizeof repeated / sizeof repeated[0]; i++) {
        json_t *v = json_object_get(body, repeated[i]);
        json_t *fallback = json_object_get(echo, repeated[i]);
        /* text and reasoning keep the defaults the request leaves out: Codex sends text as
         * {"verbosity": ...} alone, and a response's text always has a format */
        if (json_is_object(v) && json_is_object(fallback))
            json_object_update(fallback, v);
        else if (v && !json_is_null(v))
            json_object_set(echo, repeated[i], v);
    }
    return echo;
}

void *responses_answer_create(const json_t *body)
{
    const char *model = json_string_value(json_object_get(body, "model"));
    size_t len = model ? strlen(model) : 0;
    responses_answer *answer = calloc(1, sizeof *answer + len + 1);
    if (!answer)
        return NULL;
    make_id(answer->id, sizeof answer->id, "resp");
    answer->created_at = (json_int_t)time(NULL);
    answer->echo = echo_fields(body);
    answer->output = json_array();
    memcpy(answer->model, model ? model : "", len + 1);
    if (!answer->echo || !answer->output) {
        answer_free(answer);
        return NULL;
    }
    return answer;
}

static void handle_responses(void *ctx, const http_request *req, http_reply *reply)
{
    json_t *body = openai_read_body(req, reply);
    if (!body)
        return;
    char message[512];
    chat_request *request = NULL;
    unsigned status = responses_parse(body, &request, message, sizeof message);
    responses_answer *answer = status == 200 ? responses_answer_create(body) : NULL;
    api_serve_parsed(ctx, status, message, request, &responses_shape, answer, reply);
    json_decref(body);
}

static const http_route routes[] = {
    {"POST", "/v1/responses", false, handle_responses, NULL},
};

const route_table routes_responses = {routes, sizeof routes / sizeof routes[0]};
