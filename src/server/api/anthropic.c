/*
 * Anthropic's Messages API, /v1/messages, over the generation core: a request
 * is translated into an /api/chat body (system and content blocks as messages, tool_use and
 * tool_result, server_tool_use and web_search_tool_result as tool calls and results, thinking
 * as think, blocks a model cannot use passed over), and the answer takes Anthropic's
 * shape: content blocks (thinking, text, tool_use), stop_reason and usage, or a stream of
 * named server-sent events (message_start, content_block_start/delta/stop, message_delta,
 * message_stop). The API key and anthropic-version are not checked.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/api/anthropic.h"

#include "server/api/api_build.h"
#include "server/api/api_serve.h"
#include "server/api/sse.h"
#include "server/core/tool_grammar.h"
#include "server/http/body.h"
#include "server/http/json_lossy.h"
#include "server/http/request_fields.h"
#include "server/server.h"

typedef enum block_kind { BLOCK_TEXT, BLOCK_THINKING } block_kind;

/* What the events of one answer share, and the content block a stream has open. */
typedef struct anthropic_answer {
    char id[40];      /* msg_N */
    bool started;     /* message_start sent */
    int open_index;   /* the open content block; -1: none */
    block_kind open_kind;
    int next_index;
    char model[];     /* as the request named it */
} anthropic_answer;

static atomic_uint_fast64_t errors_made;

/* An error body as Anthropic's (and ollama's) carry it, with a request_id of its own. */
void anthropic_reply_error(http_reply *reply, unsigned status, const char *message)
{
    const char *type = status == 400   ? "invalid_request_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 503 ? "overloaded_error"
                                       : "api_error";
    char request_id[32];
    snprintf(request_id, sizeof request_id, "req_%" PRIu64,
             (uint64_t)atomic_fetch_add(&errors_made, 1) + 1);
    http_reply_json(reply, status, json_pack("{s:s,s:{s:s,s:o*},s:s}", "type", "error", "error",
                                             "type", type, "message",
                                             json_string_lossy(message, strlen(message)),
                                             "request_id", request_id));
}

static const char *stop_reason(const generation_info *info, const generation_done *done)
{
    const char *reason = done->reason;
    if (info->n_tool_calls > 0)
        return "tool_use";
    if (done->stop_sequence)
        return "stop_sequence";
    return reason && strcmp(reason, "length") == 0 ? "max_tokens" : "end_turn";
}

static json_t *usage(const generation_done *done)
{
    return json_pack("{s:I,s:I}", "input_tokens", (json_int_t)done->prompt_tokens,
                     "output_tokens", (json_int_t)done->eval_count);
}

/* The message object: content (consumed), stop_reason NULL while streaming, usage consumed. */
static json_t *message_object(const generation_info *info, json_t *content, const char *reason,
                              json_t *message_usage)
{
    const anthropic_answer *a = info->state;
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s?,s:n,s:o}", "id", a->id, "type", "message",
                     "role", "assistant", "model", a->model, "content", content, "stop_reason",
                     reason, "stop_sequence", "usage", message_usage);
}

/* The stop string that ended the answer, or null. */
static json_t *stop_sequence(const generation_done *done)
{
    return done->stop_sequence ? json_string(done->stop_sequence) : json_null();
}

/* A tool call as a tool_use block (input empty: a stream sends it as a delta). */
static json_t *tool_use_block(const json_t *call, bool with_input)
{
    json_t *fn = json_object_get(call, "function");
    json_t *input = json_object_get(fn, "arguments");
    return json_pack("{s:s,s:O,s:O,s:o}", "type", "tool_use", "id", json_object_get(call, "id"),
                     "name", json_object_get(fn, "name"), "input",
                     with_input && input ? json_incref(input) : json_object());
}

/* ---- streamed answers ---- */

/* One event: its type, first as Anthropic writes it, then data's fields (consumed). */
static bool send_event(generation_out *out, const char *type, json_t *data)
{
    return sse_typed_event(out, type, NULL, data);
}

/* message_start (with the prompt's tokens, which the runner tells with its first piece; the
 * output's are counted when the answer ends) and a ping. */
static bool start_message(const generation_info *info, generation_out *out)
{
    anthropic_answer *a = info->state;
    if (a->started)
        return true;
    a->started = true;
    json_t *counts = json_pack("{s:I,s:i}", "input_tokens", (json_int_t)info->prompt_tokens,
                               "output_tokens", 0);
    return send_event(out, "message_start",
                      json_pack("{s:o}", "message", message_object(info, json_array(), NULL,
                                                                   counts))) &&
           send_event(out, "ping", json_object());
}

/* End the open block; a thinking block first gets its (empty) signature, as Anthropic's
 * always carry one: Corral's thinking is not signed. */
static bool close_block(anthropic_answer *a, generation_out *out)
{
    if (a->open_index < 0)
        return true;
    int index = a->open_index;
    a->open_index = -1;
    if (a->open_kind == BLOCK_THINKING &&
        !send_event(out, "content_block_delta",
                    json_pack("{s:i,s:{s:s,s:s}}", "index", index, "delta", "type",
                              "signature_delta", "signature", "")))
        return false;
    return send_event(out, "content_block_stop", json_pack("{s:i}", "index", index));
}

static bool open_block(anthropic_answer *a, generation_out *out, json_t *block, block_kind kind)
{
    if (!close_block(a, out)) {
        json_decref(block);
        return false;
    }
    a->open_index = a->next_index++;
    a->open_kind = kind;
    return send_event(out, "content_block_start",
                      json_pack("{s:i,s:o}", "index", a->open_index, "content_block", block));
}

/* Text or thinking into the open block of its kind, opening one if need be. */
static bool block_delta(anthropic_answer *a, generation_out *out, block_kind kind,
                        const char *text, size_t len)
{
    if (len == 0)
        return true;
    const char *field = kind == BLOCK_TEXT ? "text" : "thinking";
    if ((a->open_index < 0 || a->open_kind != kind) &&
        !open_block(a, out, json_pack("{s:s,s:s}", "type", field, field, ""), kind))
        return false;
    return send_event(out, "content_block_delta",
                      json_pack("{s:i,s:{s:s,s:s%}}", "index", a->open_index, "delta", "type",
                                kind == BLOCK_TEXT ? "text_delta" : "thinking_delta", field, text,
                                len));
}

/* A tool call: its block, its input as one input_json_delta, and its end. */
static bool tool_use_events(anthropic_answer *a, generation_out *out, const json_t *call)
{
    json_t *args = json_object_get(json_object_get(call, "function"), "arguments");
    char *json = args ? json_dumps(args, JSON_COMPACT) : strdup("{}");
    bool ok = json && open_block(a, out, tool_use_block(call, false), BLOCK_TEXT) &&
              send_event(out, "content_block_delta",
                         json_pack("{s:i,s:{s:s,s:s}}", "index", a->open_index, "delta", "type",
                                   "input_json_delta", "partial_json", json)) &&
              close_block(a, out);
    free(json);
    return ok;
}

static bool anthropic_piece(const generation_info *info, const generation_delta *d,
                            generation_out *out)
{
    anthropic_answer *a = info->state;
    if (!start_message(info, out) ||
        !block_delta(a, out, BLOCK_THINKING, d->thinking, d->thinking_len) ||
        !block_delta(a, out, BLOCK_TEXT, d->content, d->content_len))
        return false;
    size_t i;
    json_t *call;
    json_array_foreach(d->tool_calls, i, call)
        if (!tool_use_events(a, out, call))
            return false;
    return true;
}

static bool anthropic_end(const generation_info *info, const generation_done *done,
                          generation_out *out)
{
    anthropic_answer *a = info->state;
    return start_message(info, out) && close_block(a, out) &&
           send_event(out, "message_delta",
                      json_pack("{s:{s:s,s:o},s:o}", "delta", "stop_reason",
                                stop_reason(info, done), "stop_sequence", stop_sequence(done),
                                "usage", usage(done))) &&
           send_event(out, "message_stop", json_object());
}

static bool anthropic_fail(const generation_info *info, const char *message, generation_out *out)
{
    (void)info;
    return send_event(out, "error",
                      json_pack("{s:{s:s,s:s}}", "error", "type", "api_error", "message", message));
}

/* ---- whole answers ---- */

static json_t *anthropic_whole(const generation_info *info, const generation_done *done,
                               const generation_delta *answer)
{
    json_t *content = json_array();
    if (answer->thinking_len > 0)
        json_array_append_new(content, json_pack("{s:s,s:s%,s:s}", "type", "thinking",
                                                 "thinking", answer->thinking,
                                                 answer->thinking_len, "signature", ""));
    if (answer->content_len > 0 ||
        (answer->thinking_len == 0 && json_array_size(answer->tool_calls) == 0))
        json_array_append_new(content, json_pack("{s:s,s:s%}", "type", "text", "text",
                                                 answer->content, answer->content_len));
    size_t i;
    json_t *call;
    json_array_foreach(answer->tool_calls, i, call)
        json_array_append_new(content, tool_use_block(call, true));
    json_t *message = message_object(info, content, stop_reason(info, done), usage(done));
    if (message)
        json_object_set_new(message, "stop_sequence", stop_sequence(done));
    return message;
}

static json_t *anthropic_loaded(const generation_info *info, const char *reason)
{
    (void)reason;
    static const generation_done none = {0};
    static const generation_delta nothing = {.content = "", .thinking = ""};
    return anthropic_whole(info, &none, &nothing);
}

static json_t *anthropic_counted(const generation_info *info, int64_t n_tokens)
{
    (void)info;
    return json_pack("{s:I}", "input_tokens", (json_int_t)n_tokens);
}

/* Also count_tokens' shape: its answer {"input_tokens": N} (counted), its errors the
 * Messages API's. */
const generation_shape anthropic_shape = {
    .stream_content_type = "text/event-stream",
    .stream_loaded = true,
    .think_optional = true, /* Anthropic's thinking on a model without it is dropped */
    .piece = anthropic_piece,
    .end = anthropic_end,
    .fail = anthropic_fail,
    .whole = anthropic_whole,
    .loaded = anthropic_loaded,
    .error = anthropic_reply_error,
    .counted = anthropic_counted,
};

/* ---- requests ---- */

/* Append text (len bytes) to a growing buffer, sep before it unless it is the first. */
static bool append_text(char **buf, size_t *len, size_t *cap, const char *sep, const char *text,
                        size_t n)
{
    size_t sep_len = *len ? strlen(sep) : 0, need = *len + sep_len + n + 1;
    if (need > *cap) {
        size_t grown_cap = *cap ? *cap : 256;
        while (grown_cap < need)
            grown_cap *= 2;
        char *grown = realloc(*buf, grown_cap);
        if (!grown)
            return false;
        *buf = grown;
        *cap = grown_cap;
    }
    memcpy(*buf + *len, sep, sep_len);
    *len += sep_len;
    memcpy(*buf + *len, text, n);
    *len += n;
    (*buf)[*len] = '\0';
    return true;
}

/*
 * A text block's text after the texts before it: with nothing between, as ollama joins the
 * blocks of a message, a tool result or a system prompt, unless a document (which ollama
 * does not read) came just before, which stands apart by document_sep.
 */
static bool join_text(char **buf, size_t *len, size_t *cap, bool after_document,
                      const char *document_sep, const char *text, size_t n)
{
    return append_text(buf, len, cap, after_document ? document_sep : "", text, n);
}

/* An image block's source: base64 data goes with the message's images; any other source (a
 * URL: Corral fetches nothing) is refused with ollama's messages. where names the block in a
 * refusal ("messages.0.content.1"). */
static bool add_image(chat_message *turn, const json_t *source, const char *where, api_build *b)
{
    const char *type = json_string_value(json_object_get(source, "type"));
    const json_t *data = json_object_get(source, "data");
    if (type && strcmp(type, "base64") != 0)
        return api_refuse(b, 400, "%s.source: invalid image source type: %.32s. Only base64 "
                                  "images are supported.", where, type);
    if (!type || !json_is_string(data))
        return api_refuse(b, 400, "%s.source: invalid image source", where);
    return chat_message_add_image(turn, json_string_value(data), json_string_length(data)) ||
           API_OUT_OF_MEMORY(b);
}

/*
 * A document block's text, appended to *buf after sep: its title, a blank line, then a text
 * source's data or a content source's string or text blocks (blank lines between). Corral
 * reads no PDFs: a PDF (base64 or URL) or a file reference becomes a line saying it was left
 * out, so that the model can say so and a history holding one (Claude Code keeps a PDF it
 * read in every later request) still runs. Any other source is refused; where names the
 * block in a refusal.
 */
static bool add_document(const json_t *block, const char *where, const char *sep, char **buf,
                         size_t *len, size_t *cap, api_build *b)
{
    const json_t *source = json_object_get(block, "source");
    const char *type = json_string_value(json_object_get(source, "type"));
    const json_t *data = json_object_get(source, "data");
    const json_t *content = json_object_get(source, "content");
    const json_t *title = json_object_get(block, "title");
    bool text_source = type && strcmp(type, "text") == 0 && json_is_string(data);
    bool content_source = type && strcmp(type, "content") == 0 &&
                          (json_is_string(content) || json_is_array(content));
    if (type && (strcmp(type, "base64") == 0 || strcmp(type, "url") == 0 ||
                 strcmp(type, "file") == 0)) {
        static const char open[] = "[document", close[] = " left out: this server reads only "
                                                          "text documents, not PDFs or files]";
        bool titled = json_is_string(title) && json_string_length(title) > 0;
        bool ok = append_text(buf, len, cap, sep, open, sizeof open - 1) &&
                  (!titled || (append_text(buf, len, cap, "", " \"", 2) &&
                               append_text(buf, len, cap, "", json_string_value(title),
                                           json_string_length(title)) &&
                               append_text(buf, len, cap, "", "\"", 1))) &&
                  append_text(buf, len, cap, "", close, sizeof close - 1);
        return ok || API_OUT_OF_MEMORY(b);
    }
    if (!text_source && !content_source)
        return api_refuse(b, 400, "%s.source: only text documents are read (a text or content "
                                  "source; a PDF or a file is left out)", where);
    const json_t *parts = content_source && json_is_array(content) ? content : NULL;
    size_t i;
    const json_t *part;
    json_array_foreach(parts, i, part) { /* checked first: a refusal appends nothing */
        const char *part_type = json_string_value(json_object_get(part, "type"));
        if (!part_type || strcmp(part_type, "text") != 0 ||
            !json_is_string(json_object_get(part, "text")))
            return api_refuse(b, 400, "%s.source.content.%zu: only text blocks are read", where,
                              i);
    }
    /* the first piece follows what came before with sep, the others a blank line */
    bool first = true, ok = true;
    if (json_is_string(title) && json_string_length(title) > 0) {
        ok = append_text(buf, len, cap, sep, json_string_value(title), json_string_length(title));
        first = false;
    }
    const json_t *whole = text_source ? data : json_is_string(content) ? content : NULL;
    if (ok && whole)
        ok = append_text(buf, len, cap, first ? sep : "\n\n", json_string_value(whole),
                         json_string_length(whole));
    json_array_foreach(parts, i, part) {
        const json_t *t = json_object_get(part, "text");
        if (!ok || !(ok = append_text(buf, len, cap, first ? sep : "\n\n",
                                      json_string_value(t), json_string_length(t))))
            break;
        first = false;
    }
    return ok || API_OUT_OF_MEMORY(b);
}

/*
 * A tool_result's content into its tool message: a string, or blocks: text blocks joined
 * with nothing between, as ollama joins them, a text document on lines of its own, image
 * blocks as the message's images (what a tool that reads
 * a picture or takes a screenshot sends back, as Claude Code's do). Blocks of other types
 * (search_result, tool_reference, ...) are passed over, as ollama passes them, so a history
 * that holds them still replays. where names the tool_result block.
 */
static bool read_tool_result(const json_t *content, const char *where, chat_message *tool,
                             api_build *b)
{
    if (!content || json_is_null(content))
        return (tool->content = strdup("")) || API_OUT_OF_MEMORY(b);
    if (json_is_string(content))
        return (tool->content = strndup(json_string_value(content),
                                        json_string_length(content))) ||
               API_OUT_OF_MEMORY(b);
    if (!json_is_array(content))
        return api_refuse(b, 400, "%s.content: must be a string or an array of blocks", where);
    char *text = NULL;
    size_t len = 0, cap = 0, i;
    bool ok = true;
    json_t *block;
    bool after_document = false;
    json_array_foreach(content, i, block) {
        const char *type = json_string_value(json_object_get(block, "type"));
        json_t *t = json_object_get(block, "text");
        char inner[96];
        snprintf(inner, sizeof inner, "%s.content.%zu", where, i);
        if (type && strcmp(type, "text") == 0) {
            ok = !json_is_string(t)
                     ? api_refuse(b, 400, "%s.text: must be a string", inner)
                     : join_text(&text, &len, &cap, after_document, "\n", json_string_value(t),
                                 json_string_length(t)) ||
                           API_OUT_OF_MEMORY(b);
            after_document = after_document && json_string_length(t) == 0;
        } else if (type && strcmp(type, "image") == 0)
            ok = add_image(tool, json_object_get(block, "source"), inner, b);
        else if (type && strcmp(type, "document") == 0)
            ok = (after_document = add_document(block, inner, "\n", &text, &len, &cap, b));
        else if (!type)
            ok = api_refuse(b, 400, "%s: must be a block with a type", inner);
        if (!ok)
            break;
    }
    ok = ok && ((tool->content = text ? text : strdup("")) || API_OUT_OF_MEMORY(b));
    if (!ok)
        free(text);
    return ok;
}

/* Whether v is a web search's error ({"type": "web_search_tool_result_error", "error_code"}). */
static bool is_search_error(const json_t *v)
{
    const char *type = json_string_value(json_object_get(v, "type"));
    return type && strcmp(type, "web_search_tool_result_error") == 0;
}

/*
 * A web_search_tool_result's content as its tool message's text, written as ollama writes it
 * for the model: a line "- TITLE: URL" for each web_search_result (other result types passed
 * over), or, when the search failed, "web_search_tool_result_error: CODE" alone; a string as
 * it is. where names the block in a refusal.
 */
static bool web_search_text(const json_t *content, const char *where, chat_message *tool,
                            api_build *b)
{
    if (json_is_string(content))
        return (tool->content = strndup(json_string_value(content),
                                        json_string_length(content))) ||
               API_OUT_OF_MEMORY(b);
    const json_t *error = is_search_error(content) ? content : NULL;
    if (!error && !json_is_array(content))
        return api_refuse(b, 400, "%s.content: must be a string, an array of results or an "
                                  "error", where);
    char *text = NULL;
    size_t len = 0, cap = 0, i;
    bool ok = true;
    const json_t *result;
    json_array_foreach(error ? NULL : content, i, result) {
        const char *type = json_string_value(json_object_get(result, "type"));
        if (!type) {
            ok = api_refuse(b, 400, "%s.content.%zu: must be a result with a type", where, i);
            break;
        }
        if (is_search_error(result)) {
            error = result;
            break;
        }
        if (strcmp(type, "web_search_result") != 0)
            continue;
        const char *title = json_string_value(json_object_get(result, "title"));
        const char *url = json_string_value(json_object_get(result, "url"));
        if (!(ok = append_text(&text, &len, &cap, "", "- ", 2) &&
                   append_text(&text, &len, &cap, "", title ? title : "",
                               title ? strlen(title) : 0) &&
                   append_text(&text, &len, &cap, "", ": ", 2) &&
                   append_text(&text, &len, &cap, "", url ? url : "", url ? strlen(url) : 0) &&
                   append_text(&text, &len, &cap, "", "\n", 1))) {
            ok = API_OUT_OF_MEMORY(b);
            break;
        }
    }
    if (ok && error) {
        static const char prefix[] = "web_search_tool_result_error";
        const char *code = json_string_value(json_object_get(error, "error_code"));
        len = 0; /* the error is the whole result */
        ok = (append_text(&text, &len, &cap, "", prefix, sizeof prefix - 1) &&
              (!code || !*code ||
               (append_text(&text, &len, &cap, "", ": ", 2) &&
                append_text(&text, &len, &cap, "", code, strlen(code))))) ||
             API_OUT_OF_MEMORY(b);
    }
    ok = ok && ((tool->content = text ? text : strdup("")) || API_OUT_OF_MEMORY(b));
    if (!ok)
        free(text);
    return ok;
}

/* Move req's last message to index at, the ones from at on one further. */
static void move_last_message(chat_request *req, size_t at)
{
    chat_message last = req->messages[req->n_messages - 1];
    memmove(&req->messages[at + 1], &req->messages[at],
            (req->n_messages - 1 - at) * sizeof last);
    req->messages[at] = last;
}

/*
 * One Anthropic message as the request's messages, as ollama makes them: one message of its
 * role with its text blocks (joined with nothing between, as ollama joins them) and text
 * documents (a blank line around each), images, thinking,
 * and tool_use and server_tool_use blocks as tool calls; its tool_result and
 * web_search_tool_result blocks as tool messages (named from names, the calls so far by id),
 * before a user's message and after an assistant's, where a server tool's results follow its
 * calls. Blocks of other types (redacted_thinking, mcp_tool_use, container_upload, ...) are
 * passed over, as ollama passes them, so that a history a client replays with them still
 * reads. A message left with no text, thinking, call or image (an empty string, only empty
 * text blocks) makes none, as in ollama, so that the template renders no empty turn.
 */
static bool add_message(const json_t *m, size_t at, chat_request *req, json_t *names, api_build *b)
{
    const char *role = json_string_value(json_object_get(m, "role"));
    json_t *content = json_object_get(m, "content");
    if (!role || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
        return api_refuse(b, 400, "messages.%zu.role: must be user or assistant", at);
    if (json_is_string(content))
        return json_string_length(content) == 0 ||
               chat_request_add_text(req, role, json_string_value(content),
                                     json_string_length(content)) ||
               API_OUT_OF_MEMORY(b);
    if (!json_is_array(content))
        return api_refuse(b, 400, "messages.%zu.content: must be a string or an array", at);
    chat_message turn = {0};
    char *text_buf = NULL;
    size_t text_len = 0, text_cap = 0;
    bool ok = true;
    size_t first_result = req->n_messages;
    char where[64]; /* messages.N.content.K, for refusals */
    bool after_document = false;
    size_t k;
    json_t *block;
    json_array_foreach(content, k, block) {
        const char *type = json_string_value(json_object_get(block, "type"));
        const char *text = json_string_value(json_object_get(block, "text"));
        if (!ok)
            break;
        if (type && strcmp(type, "text") == 0) {
            ok = text ? !*text ||
                            join_text(&text_buf, &text_len, &text_cap, after_document, "\n\n",
                                      text, strlen(text)) ||
                            API_OUT_OF_MEMORY(b)
                      : api_refuse(b, 400, "messages.%zu.content.%zu.text: must be a string", at,
                                   k);
            after_document = after_document && text && !*text;
        } else if (type && strcmp(type, "thinking") == 0) {
            json_t *thinking = json_object_get(block, "thinking");
            if (thinking && !json_is_null(thinking) && !json_is_string(thinking))
                ok = api_refuse(b, 400, "messages.%zu.content.%zu.thinking: must be a string",
                                at, k);
            else if (json_is_string(thinking)) {
                free(turn.thinking);
                ok = (turn.thinking = strndup(json_string_value(thinking),
                                              json_string_length(thinking))) ||
                     API_OUT_OF_MEMORY(b);
            }
        } else if (type && (strcmp(type, "tool_use") == 0 ||
                            strcmp(type, "server_tool_use") == 0)) {
            const char *name = json_string_value(json_object_get(block, "name"));
            const char *id = json_string_value(json_object_get(block, "id"));
            json_t *input = json_object_get(block, "input");
            if (!name || !json_is_object(input))
                ok = api_refuse(b, 400, "messages.%zu.content.%zu: %s needs a name and an "
                                        "input object", at, k, type);
            else
                ok = (chat_message_add_tool_call(&turn, id, name, input) &&
                      (!id || json_object_set_new(names, id, json_string(name)) == 0)) ||
                     API_OUT_OF_MEMORY(b);
        } else if (type && (strcmp(type, "tool_result") == 0 ||
                            strcmp(type, "web_search_tool_result") == 0)) {
            const char *id = json_string_value(json_object_get(block, "tool_use_id"));
            const char *name = id ? json_string_value(json_object_get(names, id)) : NULL;
            json_t *result = json_object_get(block, "content");
            chat_message tool = {0};
            snprintf(where, sizeof where, "messages.%zu.content.%zu", at, k);
            ok = (strcmp(type, "tool_result") == 0 ? read_tool_result(result, where, &tool, b)
                                                   : web_search_text(result, where, &tool, b)) &&
                 (((tool.role = strdup("tool")) && (!id || (tool.tool_call_id = strdup(id))) &&
                   (!name || (tool.tool_name = strdup(name))) &&
                   chat_request_push_message(req, &tool)) ||
                  API_OUT_OF_MEMORY(b));
            chat_message_clear(&tool);
        } else if (type && strcmp(type, "image") == 0) {
            snprintf(where, sizeof where, "messages.%zu.content.%zu", at, k);
            ok = add_image(&turn, json_object_get(block, "source"), where, b);
        } else if (type && strcmp(type, "document") == 0) {
            /* its text is one more of the message's texts, where the model reads it */
            snprintf(where, sizeof where, "messages.%zu.content.%zu", at, k);
            ok = after_document =
                add_document(block, where, "\n\n", &text_buf, &text_len, &text_cap, b);
        } else if (!type) {
            ok = api_refuse(b, 400, "messages.%zu.content.%zu: must be a block with a type", at,
                            k);
        }
    }
    if (ok && (text_len > 0 || (turn.thinking && *turn.thinking) || turn.n_tool_calls > 0 ||
               turn.n_images > 0)) {
        turn.role = strdup(role);
        turn.content = strndup(text_buf ? text_buf : "", text_len);
        ok = (turn.role && turn.content && chat_request_push_message(req, &turn)) ||
             API_OUT_OF_MEMORY(b);
        if (ok && strcmp(role, "assistant") == 0)
            move_last_message(req, first_result);
    }
    free(text_buf);
    chat_message_clear(&turn);
    return ok;
}

/*
 * system: a string or text blocks, one system message as ollama makes it (Claude Code sends
 * its system prompt as several blocks, and a template expects one system turn at the top):
 * the text blocks' text joined with nothing between, as ollama joins them. Any other block
 * (an image, a document) is passed over as ollama passes it over: a system turn has only
 * text. An empty system makes none, as in ollama, so the model's own system prompt stays.
 */
static bool add_system(const json_t *system, chat_request *req, api_build *b)
{
    if (!system || json_is_null(system))
        return true;
    if (json_is_string(system))
        return json_string_length(system) == 0 ||
               chat_request_add_text(req, "system", json_string_value(system),
                                     json_string_length(system)) ||
               API_OUT_OF_MEMORY(b);
    if (!json_is_array(system))
        return api_refuse(b, 400, "system: must be a string or an array of text blocks");
    char *text = NULL;
    size_t len = 0, cap = 0, i;
    json_t *block;
    bool ok = true;
    json_array_foreach(system, i, block) {
        const char *type = json_string_value(json_object_get(block, "type"));
        json_t *t = json_object_get(block, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(t))
            continue;
        if (!append_text(&text, &len, &cap, "", json_string_value(t), json_string_length(t))) {
            ok = API_OUT_OF_MEMORY(b);
            break;
        }
    }
    ok = ok && (len == 0 || chat_request_add_text(req, "system", text, len) ||
                API_OUT_OF_MEMORY(b));
    free(text);
    return ok;
}

/*
 * Anthropic's tools ({name, description, input_schema}) as ollama's function tools. A tool
 * without input_schema (or with a null one) is a function without parameters, as ollama
 * reads it: the templates then render the empty parameters ollama renders, and a forced
 * call may carry any object.
 */
static json_t *native_tools(const json_t *tools, char *message, size_t size)
{
    json_t *out = json_array();
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        json_t *name = json_object_get(tool, "name");
        json_t *schema = json_object_get(tool, "input_schema");
        const char *type = json_string_value(json_object_get(tool, "type"));
        if (type && strcmp(type, "custom") != 0) { /* web_search_20250305, bash_..., ... */
            snprintf(message, size, "tools.%zu: %.64s is a server tool, which Corral does not "
                                    "run; only custom tools are supported", i, type);
            json_decref(out);
            return NULL;
        }
        if (!json_is_string(name)) {
            snprintf(message, size, "tools.%zu: a tool needs a name", i);
            json_decref(out);
            return NULL;
        }
        if (json_is_null(schema))
            schema = NULL;
        if (schema && !json_is_object(schema)) {
            snprintf(message, size, "tools.%zu: input_schema must be an object", i);
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, json_pack("{s:s,s:{s:O,s:O*,s:O*}}", "type", "function",
                                             "function", "name", name, "description",
                                             json_object_get(tool, "description"), "parameters",
                                             schema));
    }
    return out;
}

/* Sampling fields as ollama options, with max_tokens as num_predict. */
static json_t *read_options(const json_t *body)
{
    json_t *options = json_pack("{s:O}", "num_predict", json_object_get(body, "max_tokens"));
    static const char *const same[] = {"temperature", "top_p", "top_k"};
    for (size_t i = 0; options && i < sizeof same / sizeof same[0]; i++) {
        json_t *v = json_object_get(body, same[i]);
        if (v && !json_is_null(v))
            json_object_set(options, same[i], v);
    }
    json_t *stops = json_object_get(body, "stop_sequences");
    if (options && json_is_array(stops))
        json_object_set(options, "stop", stops);
    return options;
}

/*
 * output_config.effort (a string or absent) as the think level, read as ollama reads it, its
 * case and surrounding white space aside (xhigh, which Anthropic puts between high and max, is
 * high). ollama ignores a value it does not know, so a newer level a client sends leaves
 * thinking as it was rather than failing the request.
 */
static void read_effort(const json_t *effort, chat_request *req)
{
    if (!json_is_string(effort))
        return;
    static const struct {
        const char *effort;
        chat_think think;
    } levels[] = {{"low", CHAT_THINK_LOW}, {"medium", CHAT_THINK_MEDIUM},
                  {"high", CHAT_THINK_HIGH}, {"xhigh", CHAT_THINK_HIGH},
                  {"max", CHAT_THINK_MAX}};
    const char *given = json_string_value(effort);
    size_t len = json_string_length(effort);
    while (len > 0 && isspace((unsigned char)given[0])) {
        given++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)given[len - 1]))
        len--;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strlen(levels[i].effort) == len && strncasecmp(given, levels[i].effort, len) == 0) {
            req->think = levels[i].think;
            break;
        }
}

/*
 * tool_choice {"type": "auto"} and {"type": "none"} (the caller withholds the tools) leave
 * the choice to the model; "any" and {"type": "tool", "name"} force a call (exactly one,
 * which honours disable_parallel_tool_use). false with the 400.
 */
static bool read_tool_choice(const json_t *choice, chat_request *req, api_build *b)
{
    const char *type = json_string_value(json_object_get(choice, "type"));
    const char *name = json_string_value(json_object_get(choice, "name"));
    if (!choice || json_is_null(choice) ||
        (type && (strcmp(type, "auto") == 0 || strcmp(type, "none") == 0)))
        return true;
    if (type && strcmp(type, "any") == 0) {
        req->tool_choice = CHAT_TOOL_CHOICE_REQUIRED;
        return true;
    }
    if (type && strcmp(type, "tool") == 0 && name)
        return tool_choice_set_named(req, name) || API_OUT_OF_MEMORY(b);
    return api_refuse(b, 400, "tool_choice: must be {\"type\": \"auto\"}, {\"type\": \"any\"}, "
                              "{\"type\": \"none\"} or {\"type\": \"tool\", \"name\": ...}");
}

/* tools (withheld when tool_choice is none), tool_choice, thinking (else
 * output_config.effort) and output_config.format. */
static bool read_features(const json_t *body, chat_request *req, api_build *b)
{
    const char *choice = json_string_value(json_object_get(json_object_get(body, "tool_choice"),
                                                           "type"));
    json_t *tools = json_object_get(body, "tools");
    if (json_array_size(tools) > 0 && !(choice && strcmp(choice, "none") == 0) &&
        !(req->tools = native_tools(tools, b->message, b->size))) {
        b->status = 400;
        return false;
    }
    if (!read_tool_choice(json_object_get(body, "tool_choice"), req, b))
        return false;
    /* As ollama reads them: thinking "enabled" is think true, whatever the effort, and
     * "disabled" is false; with any other type ("adaptive", which Claude Code sends with an
     * effort, or a newer one) or none, output_config.effort alone sets the level, and without
     * one the model thinks as it would. budget_tokens is accepted and not enforced. */
    const char *thinking =
        json_string_value(json_object_get(json_object_get(body, "thinking"), "type"));
    json_t *effort = json_object_get(json_object_get(body, "output_config"), "effort");
    if (effort && !json_is_null(effort) && !json_is_string(effort))
        return api_refuse(b, 400, "output_config.effort: must be a string");
    if (thinking && strcmp(thinking, "enabled") == 0)
        req->think = CHAT_THINK_ON;
    else if (thinking && strcmp(thinking, "disabled") == 0)
        req->think = CHAT_THINK_OFF;
    else
        read_effort(effort, req);
    json_t *format = json_object_get(json_object_get(body, "output_config"), "format");
    if (!format || json_is_null(format)) /* structured outputs */
        return true;
    json_t *schema = json_object_get(format, "schema");
    const char *type = json_string_value(json_object_get(format, "type"));
    if (!type || strcmp(type, "json_schema") != 0 || !json_is_object(schema))
        return api_refuse(b, 400, "output_config.format: must be {\"type\": \"json_schema\", "
                                  "\"schema\": {...}}");
    req->format = json_incref(schema);
    return true;
}

/* A messages body, or a count_tokens one (counting: no max_tokens, nothing generated). */
static unsigned parse_body(const json_t *body, bool counting, chat_request **out, char *message,
                           size_t size)
{
    corral_error err = {{0}};
    if (!request_fields_check(REQUEST_API_ANTHROPIC, body, &err)) {
        snprintf(message, size, "%.255s", err.message);
        return 400;
    }
    api_build b = {.message = message, .size = size, .status = 200};
    json_t *max_tokens = json_object_get(body, "max_tokens");
    json_t *in = json_object_get(body, "messages");
    bool ok = counting || (json_is_integer(max_tokens) && json_integer_value(max_tokens) > 0)
                  ? json_is_array(in) || api_refuse(&b, 400, "messages: must be an array")
                  : api_refuse(&b, 400, "max_tokens: required, and greater than 0");
    if (!ok)
        return b.status;
    chat_request *req = chat_request_create(true);
    json_t *names = json_object(); /* tool_use ids -> names, for the tool_results */
    const char *model = json_string_value(json_object_get(body, "model"));
    ok = (req && names && (!model || (req->model = strdup(model))) &&
               (req->options = counting ? json_object() : read_options(body))) ||
              API_OUT_OF_MEMORY(&b);
    if (req) {
        req->stream = !counting && json_is_true(json_object_get(body, "stream"));
        req->count_only = counting;
    }
    ok = ok && add_system(json_object_get(body, "system"), req, &b);
    size_t i;
    json_t *m;
    json_array_foreach(in, i, m)
        if (ok)
            ok = add_message(m, i, req, names, &b);
    json_decref(names);
    if (ok && json_array_size(in) == 0)
        ok = api_refuse(&b, 400, "messages: at least one message is required");
    ok = ok && read_features(body, req, &b);
    if (!ok) {
        chat_request_free(req);
        return b.status;
    }
    *out = req;
    return 200;
}

unsigned anthropic_parse(const json_t *body, chat_request **out, char *message, size_t size)
{
    return parse_body(body, false, out, message, size);
}

unsigned anthropic_parse_count(const json_t *body, chat_request **out, char *message,
                               size_t size)
{
    return parse_body(body, true, out, message, size);
}

static atomic_uint_fast64_t answers_made;

void *anthropic_answer_create(const json_t *body)
{
    const char *model = json_string_value(json_object_get(body, "model"));
    size_t len = model ? strlen(model) : 0;
    anthropic_answer *answer = calloc(1, sizeof *answer + len + 1);
    if (!answer)
        return NULL;
    snprintf(answer->id, sizeof answer->id, "msg_%" PRIu64,
             (uint64_t)atomic_fetch_add(&answers_made, 1) + 1);
    answer->open_index = -1;
    memcpy(answer->model, model ? model : "", len + 1);
    return answer;
}

/* A Messages API body, parsed by parse (a count_tokens request is marked count_only). */
static void serve_body(void *ctx, const http_request *req, http_reply *reply,
                       unsigned (*parse)(const json_t *, chat_request **, char *, size_t))
{
    char message[512];
    json_t *body = http_body_object(req, message, sizeof message);
    chat_request *request = NULL;
    unsigned status = body ? parse(body, &request, message, sizeof message) : 400;
    anthropic_answer *answer = status == 200 ? anthropic_answer_create(body) : NULL;
    api_serve_parsed(ctx, status, message, request, &anthropic_shape, answer, reply);
    json_decref(body);
}

static void handle_messages(void *ctx, const http_request *req, http_reply *reply)
{
    serve_body(ctx, req, reply, anthropic_parse);
}

/* /v1/messages/count_tokens: the prompt the same body would make, counted by the model's own
 * tokenizer (the model is loaded for it), images included. */
static void handle_count_tokens(void *ctx, const http_request *req, http_reply *reply)
{
    serve_body(ctx, req, reply, anthropic_parse_count);
}

static const http_route routes[] = {
    {"POST", "/v1/messages", false, handle_messages, NULL},
    {"POST", "/v1/messages/count_tokens", false, handle_count_tokens, NULL},
};

const route_table routes_anthropic = {routes, sizeof routes / sizeof routes[0]};
