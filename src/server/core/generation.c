/*
 * The generation core behind /api/generate, /api/chat and the OpenAI-compatible endpoints
 * (generation.h). A request is checked, its prompt rendered, a runner acquired from the
 * scheduler, and the runner's JSON lines turned into the shape's bytes one message at a time
 * (streamed) or gathered into one body (stream:false).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "runner/prompt_images.h"
#include "runner/protocol.h"
#include "server/sched/runner_client.h"
#include "server/core/generation.h"
#include "server/core/chat_request.h"
#include "server/core/format_grammar.h"
#include "server/metrics.h"
#include "server/core/image_input.h"
#include "server/core/model_request.h"
#include "server/core/prompt.h"
#include "server/core/prompt_fit.h"
#include "server/core/renderer_model.h"
#include "server/core/tool_grammar.h"
#include "server/sched/scheduler.h"
#include "template/cohere.h"
#include "template/harmony.h"
#include "template/template.h"
#include "util/log.h"

/* Most model text the output parser holds back (an unfinished tool call) or hands on at
 * once. */
#define GENERATION_MAX_HELD_BYTES (16u << 20)

_Static_assert(sizeof(((http_request_facts *)0)->model) >= CORRAL_NAME_STRING_MAX,
               "a display name fits the request's facts");

struct generation_out {
    char *data;
    size_t len, cap;
};

typedef struct generation {
    server *srv;
    const generation_shape *shape;
    generation_info info;
    bool stream;
    model_ref *ref;
    const chat_request *req; /* borrowed until the runner's request is made */
    chat_think think; /* the request's, once the model's capabilities have settled it */
    json_t *input;    /* what the prompt templates read of the request */
    image_input images;     /* the request's images, checked, with their markers' nonce */
    json_t *runner_images;  /* what the runner gets: each image and its offset in the prompt */
    char requested_model[CORRAL_NAME_STRING_MAX]; /* the name as the request gave it */
    char *grammar; /* GBNF from `format`, NULL for free text */
    /* The grammar waits for this text: an answer that starts in thinking is constrained only
     * after the closing tag. "": from the first token. */
    char grammar_after[sizeof(((corral_output_tags *)0)->think_close)];
    /* When the prompt does not open the thinking: the answer may open it with this text,
     * then waits for grammar_after; or answer in the grammar at once. */
    char grammar_open[sizeof(((corral_output_tags *)0)->think_open)];
    /* What a forced call's prompt ends with, once its history is final: harmony's or
     * Glimmer's message header (tool_grammar_harmony, tool_grammar_glimmer), Cohere's action
     * tag after what closes the prompt's open block (tool_grammar_cohere); NULL for none. */
    char *prompt_tail;
    /* The end of prompt_tail that opens the answer, which the output parser reads first (all
     * of a Glimmer header, Cohere's tag) */
    const char *tail_opening;
    corral_output_parser *parser; /* splits thinking and tool calls off; NULL: all content */
    json_t *calls; /* the tool calls of the last split, with their ids */
    /* token log-probabilities (when asked for): a stream's not yet sent, or all of a whole
     * answer's */
    json_t *lps;
    prompt_window window; /* a chat's: which messages its prompt renders */
    char *counted_text;   /* the prompt the runner counted last (image requests), and its count */
    unsigned count_status; /* a failed count's: 400 when the runner refused the prompt */
    struct prompt_size {
        size_t n_tokens, image_tokens, largest_image, n_images;
    } counted;
    runner_handle *runner;
    runner_conn *conn;
    int client_fd;       /* the HTTP client's socket, watched for its leaving; -1: unknown */
    bool client_gone;    /* it left: the answer stops with no more bytes */
    int64_t keep_alive_ns;
    /* stream state: out's bytes from sent on are still to go */
    generation_out out;
    size_t sent;
    bool finished;
    /* aggregate state (stream:false) */
    generation_out content, thinking;
    json_t *all_calls;
    /* for the request log and the metrics */
    http_request_facts *facts;
    bool had_text; /* a piece of text has come (time to first token is measured) */
} generation;

json_t *generation_created_at(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32], out[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[16];
    snprintf(frac, sizeof frac, "%09ld", ts.tv_nsec);
    size_t n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0') /* Go trims trailing zeros */
        frac[--n] = '\0';
    snprintf(out, sizeof out, "%s%s%sZ", date, n ? "." : "", frac);
    return json_string(out);
}

json_t *generation_debug_info(const char *prompt, size_t n_images)
{
    json_t *info = json_pack("{s:s}", "rendered_template", prompt);
    if (info && n_images > 0) /* ollama omits a zero count */
        json_object_set_new(info, "image_count", json_integer((json_int_t)n_images));
    return info;
}

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

generation_done generation_done_read(const json_t *msg)
{
    json_t *tokens = json_object_get(msg, "tokens");
    json_t *stop = json_object_get(msg, "stop_sequence");
    generation_done d = {
        .reason = json_string_value(json_object_get(msg, "done_reason")),
        .stop_sequence = json_is_string(stop) ? json_string_value(stop) : NULL,
        .prompt_eval_count = json_integer_value(json_object_get(msg, "prompt_eval_count")),
        .prompt_eval_duration_ns = json_integer_value(json_object_get(msg, "prompt_eval_duration")),
        .eval_count = json_integer_value(json_object_get(msg, "eval_count")),
        .eval_duration_ns = json_integer_value(json_object_get(msg, "eval_duration")),
        .context = json_is_array(tokens) ? tokens : NULL,
        .context_shifts = json_integer_value(json_object_get(msg, "context_shifts")),
        .prompt_truncated = json_integer_value(json_object_get(msg, "prompt_truncated")),
        .draft_tokens = json_integer_value(json_object_get(msg, "draft_tokens")),
        .draft_accepted = json_integer_value(json_object_get(msg, "draft_accepted")),
    };
    /* the context holds the prompt and the answer: the prompt is what the answer did not add */
    d.prompt_tokens = d.context ? (int64_t)json_array_size(tokens) - d.eval_count +
                                      json_integer_value(json_object_get(msg, "image_tokens"))
                                : d.prompt_eval_count;
    return d;
}

int64_t generation_elapsed_ns(const generation_info *info)
{
    return monotonic_ns() - info->start_ns;
}

static bool out_append(generation_out *out, const char *bytes, size_t n)
{
    if (n == 0)
        return true;
    if (n > out->cap - out->len) {
        size_t cap = out->cap ? out->cap : 256;
        while (n > cap - out->len) {
            if (cap > SIZE_MAX / 2)
                return false;
            cap *= 2;
        }
        char *grown = realloc(out->data, cap);
        if (!grown)
            return false;
        out->data = grown;
        out->cap = cap;
    }
    memcpy(out->data + out->len, bytes, n);
    out->len += n;
    return true;
}

generation_out *generation_out_create(void)
{
    return calloc(1, sizeof(generation_out));
}

void generation_out_free(generation_out *out)
{
    if (out)
        free(out->data);
    free(out);
}

const char *generation_out_bytes(const generation_out *out, size_t *len)
{
    *len = out->len;
    return out->data;
}

bool generation_out_text(generation_out *out, const char *text)
{
    return out_append(out, text, strlen(text));
}

bool generation_out_json(generation_out *out, const char *prefix, json_t *obj, const char *suffix)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    bool ok = text && generation_out_text(out, prefix) && generation_out_text(out, text) &&
              generation_out_text(out, suffix);
    free(text);
    return ok;
}

static void free_shape_state(const generation_shape *shape, void *state)
{
    if (shape->free_state)
        shape->free_state(state);
    else
        free(state);
}

static void generation_free(generation *g)
{
    runner_conn_close(g->conn); /* before release: closing cancels a running request */
    if (g->runner)
        scheduler_release(g->srv->sched, g->runner);
    model_ref_free(g->ref);
    json_decref(g->input);
    image_input_clear(&g->images);
    json_decref(g->runner_images);
    free(g->counted_text);
    free(g->grammar);
    free(g->prompt_tail);
    corral_output_parser_free(g->parser);
    json_decref(g->calls);
    json_decref(g->lps);
    free_shape_state(g->shape, g->info.state);
    free(g->out.data);
    free(g->content.data);
    free(g->thinking.data);
    json_decref(g->all_calls);
    free(g);
}

/* The HTTP client has left: the work stops (the caller closes the runner connection or leaves
 * the queue), said in one line. */
static void note_client_gone(generation *g, const char *stage)
{
    g->client_gone = true;
    log_write(LOG_INFO, "client left: its request stops",
              (log_field[]){LOG_STR("model", g->facts->model), LOG_STR("while", stage),
                            LOG_NUM("after_ms", (double)generation_elapsed_ns(&g->info) / 1e6)},
              3);
}

/* scheduler_acquire's question while the request waits in the queue. */
static bool client_left(const void *state)
{
    const generation *g = state;
    return http_client_gone(g->client_fd);
}

/* A piece of text has come from the runner: the first is the time to first token. */
static void note_piece(generation *g)
{
    if (!g->had_text)
        metrics_observe_first_token(monotonic_ns() - g->info.start_ns);
    g->had_text = true;
}

/* The runner's done message: the request's token counts and time between tokens. */
static void note_done(generation *g, const generation_done *done)
{
    metrics_add_tokens(done->prompt_tokens, done->eval_count);
    metrics_observe_inter_token(done->eval_duration_ns, done->eval_count);
    g->facts->prompt_tokens = done->prompt_tokens;
    g->info.prompt_tokens = done->prompt_tokens;
    g->facts->generated_tokens = done->eval_count;
    g->facts->draft_tokens = done->draft_tokens;
    g->facts->draft_accepted = done->draft_accepted;
}

static void reply_error(const generation *g, http_reply *reply, unsigned status,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void reply_error(const generation *g, http_reply *reply, unsigned status,
                        const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    g->shape->error(reply, status, message);
}

/* ollama's tool call ids: "call_" and 8 random characters of [a-z0-9]. */
static void tool_call_id(char id[14])
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) { /* ids need not be secret */
        int64_t t = monotonic_ns();
        memcpy(r, &t, sizeof r);
    }
    memcpy(id, "call_", 5);
    for (size_t i = 0; i < sizeof r; i++)
        id[5 + i] = alphabet[r[i] % (sizeof alphabet - 1)];
    id[13] = '\0';
}

/* The model's next text (final: the answer has ended) as a delta of the answer. */
static bool split_output(generation *g, const char *text, size_t len, bool final,
                         generation_delta *d, corral_error *err)
{
    *d = (generation_delta){.content = text, .content_len = len};
    if (!g->parser)
        return true;
    corral_output_delta split;
    if (!corral_output_parser_feed(g->parser, text, len, final, &split, err))
        return false;
    json_array_clear(g->calls);
    size_t i;
    json_t *call;
    json_array_foreach(split.tool_calls, i, call) {
        char id[14];
        tool_call_id(id);
        if (json_array_append_new(g->calls, json_pack("{s:s,s:O}", "id", id, "function",
                                                      json_object_get(call, "function"))) != 0) {
            corral_error_set(err, "out of memory");
            return false;
        }
    }
    g->info.n_tool_calls += json_array_size(g->calls);
    *d = (generation_delta){.content = split.content, .content_len = split.content_len,
                            .thinking = split.thinking, .thinking_len = split.thinking_len,
                            .tool_calls = g->calls};
    return true;
}

static bool delta_is_empty(const generation_delta *d)
{
    return d->content_len == 0 && d->thinking_len == 0 && json_array_size(d->tool_calls) == 0;
}

/* The shape's bytes for the runner's next text (final: the runner's done message follows). */
/*
 * The shape's bytes for the runner's next text and its tokens' log-probabilities (final: the
 * runner's done message follows). Log-probabilities wait for text to go with, but not past
 * the end.
 */
static bool stream_text(generation *g, const json_t *logprobs, const char *text, size_t len,
                        bool final)
{
    generation_delta d;
    corral_error err = {{0}};
    bool ok = !logprobs || json_array_extend(g->lps, (json_t *)logprobs) == 0;
    if (!ok)
        corral_error_set(&err, "out of memory");
    if (!ok || !split_output(g, text, len, final, &d, &err)) {
        g->finished = true;
        return g->shape->fail(&g->info, err.message, &g->out);
    }
    if (!g->info.chat && json_array_size(d.tool_calls) > 0) { /* for the final chunk */
        if (json_array_extend(g->all_calls, (json_t *)d.tool_calls) != 0) {
            g->finished = true;
            return g->shape->fail(&g->info, "out of memory", &g->out);
        }
        d.tool_calls = NULL;
    }
    bool with_lps = json_array_size(g->lps) > 0 && (!delta_is_empty(&d) || final);
    if (with_lps)
        d.logprobs = g->lps;
    ok = (delta_is_empty(&d) && !with_lps) || g->shape->piece(&g->info, &d, &g->out);
    if (with_lps)
        json_array_clear(g->lps);
    return ok;
}

/* The next runner message of a streaming generation as the shape's bytes; false at the end. */
static bool next_bytes(generation *g)
{
    if (g->finished)
        return false;
    g->out.len = g->sent = 0;
    corral_error err;
    json_t *msg = runner_conn_next(g->conn, &err);
    bool ok;
    if (!msg && runner_conn_client_gone(g->conn)) {
        note_client_gone(g, g->had_text ? "generating" : "before the first piece");
        g->finished = true;
        return false;
    }
    if (!msg) {
        scheduler_report_failure(g->srv->sched, g->runner);
        ok = g->shape->fail(&g->info, err.message, &g->out);
        g->finished = true;
        return ok;
    }
    json_t *content = json_object_get(msg, "content");
    json_t *error = json_object_get(msg, "error");
    json_t *logprobs = json_object_get(msg, "logprobs");
    if (json_is_string(content)) {
        note_piece(g);
        json_t *prompt_tokens = /* only the first piece carries it */
            g->info.prompt_tokens ? NULL : json_object_get(msg, "prompt_tokens");
        if (json_is_integer(prompt_tokens))
            g->info.prompt_tokens = json_integer_value(prompt_tokens);
        ok = stream_text(g, logprobs, json_string_value(content), json_string_length(content),
                         false);
    } else if (json_is_string(error)) {
        ok = g->shape->fail(&g->info, json_string_value(error), &g->out);
        g->finished = true;
    } else {
        generation_done done = generation_done_read(msg);
        note_done(g, &done);
        ok = stream_text(g, logprobs, "", 0, true);
        if (!g->info.chat)
            done.tool_calls = g->all_calls;
        ok = ok && (g->finished || g->shape->end(&g->info, &done, &g->out));
        g->finished = true;
    }
    json_decref(msg);
    return ok;
}

static ssize_t stream_next(void *state, char *buf, size_t max)
{
    generation *g = state;
    while (g->sent == g->out.len)
        if (!next_bytes(g))
            return g->finished && !g->client_gone && g->sent == g->out.len ? 0 : -1;
    size_t n = g->out.len - g->sent < max ? g->out.len - g->sent : max;
    memcpy(buf, g->out.data + g->sent, n);
    g->sent += n;
    return (ssize_t)n;
}

static void stream_close(void *state)
{
    generation_free(state);
}

/* Add the runner's next text (final: the last) to the answer gathered for stream:false. */
static bool gather_text(generation *g, const json_t *logprobs, const char *text, size_t len,
                        bool final, corral_error *err)
{
    generation_delta d;
    if (!split_output(g, text, len, final, &d, err))
        return false;
    if ((logprobs && json_array_extend(g->lps, (json_t *)logprobs) != 0) ||
        !out_append(&g->content, d.content, d.content_len) ||
        !out_append(&g->thinking, d.thinking, d.thinking_len) ||
        (d.tool_calls && json_array_extend(g->all_calls, (json_t *)d.tool_calls) != 0)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

/* stream:false: read everything, then answer once. */
static void answer_whole(generation *g, http_reply *reply)
{
    corral_error err;
    for (;;) {
        json_t *msg = runner_conn_next(g->conn, &err);
        if (!msg && runner_conn_client_gone(g->conn)) {
            note_client_gone(g, g->had_text ? "generating" : "before the first piece");
            reply_error(g, reply, SCHEDULER_ABANDONED, "%s", err.message);
            return;
        }
        if (!msg) {
            scheduler_report_failure(g->srv->sched, g->runner);
            reply_error(g, reply, 500, "%s", err.message);
            return;
        }
        json_t *content = json_object_get(msg, "content");
        json_t *error = json_object_get(msg, "error");
        bool last = !json_is_string(content);
        generation_done done = generation_done_read(msg);
        if (!last)
            note_piece(g);
        else if (!json_is_string(error))
            note_done(g, &done);
        if (json_is_string(error)) {
            const char *text = json_string_value(error);
            reply_error(g, reply, runner_error_status(msg), "%s", text);
        } else if (!gather_text(g, json_object_get(msg, "logprobs"),
                                last ? "" : json_string_value(content),
                                last ? 0 : json_string_length(content), last, &err)) {
            reply_error(g, reply, 500, "%s", err.message);
            last = true;
        } else if (last) {
            generation_delta answer = {
                .content = g->content.data ? g->content.data : "",
                .content_len = g->content.len,
                .thinking = g->thinking.data ? g->thinking.data : "",
                .thinking_len = g->thinking.len,
                .tool_calls = g->all_calls,
                .logprobs = g->lps,
            };
            if (g->shape->reply_whole)
                g->shape->reply_whole(reply, &g->info, &done, &answer);
            else
                http_reply_json(reply, 200, g->shape->whole(&g->info, &done, &answer));
        }
        json_decref(msg);
        if (last)
            return;
    }
}

/* Is there anything to generate? (No prompt / no messages means load or unload.) */
static bool has_input(const chat_request *req)
{
    return req->chat ? req->n_messages > 0 : req->prompt && *req->prompt;
}

/*
 * The grammar `format` asks for: NULL with *ok for none (absent, null or ""), the JSON
 * object grammar for "json", a JSON schema's grammar; NULL with !*ok and err otherwise.
 */
static char *format_grammar(const json_t *format, bool *ok, corral_error *err)
{
    *ok = true;
    if (!format || json_is_null(format) ||
        (json_is_string(format) && json_string_length(format) == 0))
        return NULL;
    char *grammar = NULL;
    if (json_is_string(format) && strcmp(json_string_value(format), "json") == 0) {
        if (!(grammar = format_grammar_json_object()))
            corral_error_set(err, "out of memory");
    } else if (json_is_object(format)) {
        grammar = format_grammar_from_schema(format, err);
    } else {
        corral_error_set(err, "invalid format: expected \"json\" or a JSON schema object");
    }
    *ok = grammar != NULL;
    return grammar;
}

static bool think_is_on(chat_think think)
{
    return think != CHAT_THINK_UNSET && think != CHAT_THINK_OFF;
}

/*
 * tools and think against what the model can do, as ollama does: a capability the model
 * lacks is a 400 (an embedding model cannot generate at all); a thinking model thinks
 * unless asked not to. false when it has answered.
 */
static bool check_features(generation *g, http_reply *reply)
{
    const chat_request *req = g->req;
    const char *name = req->model;
    g->info.logprobs = req->logprobs;
    corral_error err = {{0}};
    json_t *caps = model_request_capabilities(g->srv, g->ref, &err);
    if (!caps) {
        reply_error(g, reply, 500, "%s", err.message);
        return false;
    }
    bool hears = model_request_has_capability(caps, "audio");
    /* media: images need the model's projector, audio its audio capability; each item must be
     * one Corral can decode (an image) or recognise (audio) */
    if (image_input_present(req)) {
        char message[CORRAL_ERROR_MAX + 32];
        bool refused = true;
        if (!image_input_prepare(&g->images, req, g->ref->projector_path != NULL, message,
                                 sizeof message))
            reply_error(g, reply, 400, "%s", message);
        else if (g->images.n_images > g->images.n_audio && !g->ref->projector_path)
            reply_error(g, reply, 400, "model does not support images");
        else if (g->images.n_audio && !hears)
            reply_error(g, reply, 400, "\"%s\" does not support audio", name);
        else if (model_request_in_family(g->ref, "mllama") && image_input_more_than_one(req))
            reply_error(g, reply, 400, "this model only supports one image while more than one "
                                       "image requested");
        else
            refused = false;
        /* the renderer sees markers in the text, not which message held an image: its
         * refusal of one in a system message is made here, before anything is rendered */
        const corral_renderer *renderer =
            refused ? NULL : renderer_model_find(g->ref->config, g->ref->template_text);
        if (renderer && renderer->text_only_system &&
            image_input_in_system(req, message, sizeof message)) {
            reply_error(g, reply, 400, "%s", message);
            refused = true;
        }
        if (refused) {
            json_decref(caps);
            return false;
        }
    }
    bool completes = model_request_has_capability(caps, "completion");
    bool has_tools = model_request_has_capability(caps, "tools");
    bool thinks = model_request_has_capability(caps, "thinking");
    bool inserts = model_request_has_capability(caps, "insert");
    json_decref(caps);
    const char *suffix = req->chat ? NULL : req->suffix;
    if (!completes) {
        reply_error(g, reply, 400, "\"%s\" does not support %s", name,
                    req->chat ? "chat" : "generate");
        return false;
    }
    if (req->chat && json_array_size(req->tools) > 0 && !has_tools) {
        reply_error(g, reply, 400, "\"%s\" does not support tools", name);
        return false;
    }
    if (suffix && *suffix && !inserts) { /* fill-in-the-middle needs .Suffix in the template */
        reply_error(g, reply, 400, "\"%s\" does not support insert", name);
        return false;
    }
    if (think_is_on(req->think) && !thinks && !g->shape->think_optional) {
        reply_error(g, reply, 400, "\"%s\" does not support thinking", name);
        return false;
    }
    g->think = req->think;
    if (think_is_on(g->think) && !thinks) /* the shape's API drops it */
        g->think = CHAT_THINK_UNSET;
    else if (g->think == CHAT_THINK_UNSET && thinks)
        g->think = CHAT_THINK_ON;
    return true;
}

/*
 * A harmony answer always goes through its parser: gpt-oss writes its channels whatever think
 * says (and its thinking is reported then too, as ollama does). A format constrains the final
 * channel's text, after its header, unless the prompt already opened that channel; a forced
 * call's grammar starts at once, the prompt ending with the call's header.
 */
static bool create_harmony_parser(generation *g, const char *prompt)
{
    static const char final_header[] = "<|channel|>final<|message|>";
    const char *last_start = NULL;
    for (const char *at = prompt; (at = strstr(at, "<|start|>")); at++)
        last_start = at;
    if (g->grammar && !g->prompt_tail && !(last_start && strstr(last_start, final_header)))
        memcpy(g->grammar_after, final_header, sizeof final_header);
    g->parser = harmony_output_parser_create(
        prompt, g->info.chat ? g->req->tools : NULL, GENERATION_MAX_HELD_BYTES);
    return g->parser != NULL;
}

/*
 * The parser that splits the answer by the template's tags: thinking when it is on, tool
 * calls when the request offers tools; none when neither applies, unless the call syntax
 * frames every answer in marks that are not content (corral_output_framed). The answer starts in
 * thinking when the prompt ends with the opening tag; with a format, the grammar then waits
 * for the closing tag, and when the prompt does not open the thinking, the answer may open it
 * (grammar_open) or answer in the format at once.
 */
static bool create_parser(generation *g, const char *prompt, corral_output_tags *tags)
{
    if (tags->harmony && !g->info.raw)
        return create_harmony_parser(g, prompt);
    if (g->info.raw || !think_is_on(g->think))
        tags->think_open[0] = tags->think_close[0] = '\0';
    /* calls are read where a chat offers tools, and in a generate's answer where the model's
     * config names a parser, as ollama's /api/generate runs that parser (without tools) */
    const char *parser = json_string_value(json_object_get(g->ref->config, "parser"));
    bool reads_calls = g->info.chat ? json_array_size(g->req->tools) > 0 : parser && *parser;
    if (g->info.raw || !reads_calls)
        tags->tool_open[0] = '\0';
    if (!tags->think_open[0] && !tags->tool_open[0] &&
        (g->info.raw || !corral_output_framed(tags->calls)))
        return true;
    size_t n = strlen(prompt), open = strlen(tags->think_open);
    while (n > 0 && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n' || prompt[n - 1] == '\t' ||
                     prompt[n - 1] == '\r'))
        n--;
    bool in_thinking = open && n >= open && memcmp(prompt + n - open, tags->think_open, open) == 0;
    /* after a forced call's header (prompt_tail) the grammar starts at once */
    if (open && g->grammar && !g->prompt_tail)
        memcpy(g->grammar_after, tags->think_close, sizeof g->grammar_after);
    if (open && g->grammar && !g->prompt_tail && !in_thinking)
        memcpy(g->grammar_open, tags->think_open, sizeof g->grammar_open);
    g->parser = corral_output_parser_create(tags, in_thinking, GENERATION_MAX_HELD_BYTES);
    if (g->parser && tags->tool_open[0])
        corral_output_parser_set_tools(g->parser, g->req->tools);
    /* the header or tag the prompt ends with opens the answer: the parser reads it first, as
     * if the model had written it (nothing of it is content) */
    corral_output_delta opening;
    corral_error err = {{0}};
    return g->parser &&
           (!g->tail_opening || corral_output_parser_feed(g->parser, g->tail_opening,
                                                          strlen(g->tail_opening), false,
                                                          &opening, &err));
}

/*
 * A forced tool call (tool_grammar.h): the grammar of one call in the template's shape, in
 * place of a format's (tool_choice_check refused the two together); a call syntax
 * tool_grammar.c has no grammar of (corral_call_syntax) is a 400. Harmony's call header is
 * made of control tokens a grammar cannot ask for: the prompt ends with it (prompt_tail),
 * after the open message the prompt may leave (a prefilled answer or thinking) is closed, so
 * the answer is the arguments alone and a forced call on gpt-oss skips its analysis.
 * Glimmer's header ends in a control token too: it follows the "<|start|>assistant" its
 * renderer ends every prompt with, and the answer is the call's ATEM block, with no thinking
 * before it. Cohere's action tag is a control token in its vocabularies: the prompt ends with
 * it, after its open thinking is closed empty, and the answer is the action's list. False
 * when it has answered.
 */
static bool force_tool_call(generation *g, const corral_output_tags *tags, const char *prompt,
                            http_reply *reply)
{
    const chat_request *req = g->req;
    corral_error err = {{0}};
    const char *name = req->tool_choice == CHAT_TOOL_CHOICE_NAMED ? req->tool_choice_name : NULL;
    if (tags->harmony) {
        static const char next[] = "<|start|>assistant";
        char *header = NULL;
        if (!(g->grammar = tool_grammar_harmony(req->tools, name, &header, &err))) {
            reply_error(g, reply, 400, "%s", err.message);
            return false;
        }
        size_t n = strlen(prompt), k = sizeof next - 1;
        bool opened = n >= k && memcmp(prompt + n - k, next, k) == 0;
        if (asprintf(&g->prompt_tail, "%s%s", opened ? "" : "<|end|><|start|>assistant",
                     header) < 0) {
            g->prompt_tail = NULL;
            free(header);
            reply_error(g, reply, 500, "out of memory");
            return false;
        }
        free(header);
        return true;
    }
    if (tags->calls == CORRAL_CALLS_GLIMMER) {
        if (!(g->grammar = tool_grammar_glimmer(req->tools, name, &g->prompt_tail, &err))) {
            reply_error(g, reply, 400, "%s", err.message);
            return false;
        }
        g->tail_opening = g->prompt_tail;
        return true;
    }
    if (tags->calls == CORRAL_CALLS_COHERE) {
        g->grammar = tool_grammar_cohere(req->tools, name, prompt, &g->prompt_tail, &err);
        if (!g->grammar) {
            reply_error(g, reply, 400, "%s", err.message);
            return false;
        }
        g->tail_opening = g->prompt_tail + strlen(g->prompt_tail) - strlen(COHERE_TOOL_OPEN);
        return true;
    }
    if (!(g->grammar = tool_grammar_create(req->tools, name, tags, &err))) {
        reply_error(g, reply, 400, "%s", err.message);
        return false;
    }
    return true;
}

/* The prompt with the forced call's header at its end, in place (prompt_tail). */
static bool append_prompt_tail(const generation *g, char **prompt)
{
    if (!g->prompt_tail)
        return true;
    size_t n = strlen(*prompt), k = strlen(g->prompt_tail);
    char *longer = realloc(*prompt, n + k + 1);
    if (!longer)
        return false;
    memcpy(longer + n, g->prompt_tail, k + 1);
    *prompt = longer;
    return true;
}

/* The model, options and prompt of the request; false when it has answered an error. */
static bool prepare(generation *g, json_t **options, char **prompt, http_reply *reply)
{
    const chat_request *req = g->req;
    corral_error err = {{0}};
    const char *name = req->model;
    if (!name || !*name) {
        reply_error(g, reply, 400, "model is required");
        return false;
    }
    g->keep_alive_ns = req->has_keep_alive ? req->keep_alive_ns : g->srv->config.keep_alive_ns;
    unsigned status = model_request_open(g->srv, name, &g->ref, &err);
    if (status != 200) {
        reply_error(g, reply, status, "%s", err.message);
        return false;
    }
    /* Answers echo the name as the request spelled it, as ollama's do ("m", not "m:latest"). */
    snprintf(g->requested_model, sizeof g->requested_model, "%s", name);
    g->info.model = g->requested_model;
    snprintf(g->facts->model, sizeof g->facts->model, "%s", g->ref->display);
    if (!g->ref->model_path) {
        reply_error(g, reply, 400, "\"%s\" does not support %s", name,
                    g->info.chat ? "chat" : "generate");
        return false;
    }
    if (model_request_retired(g->ref, &err)) {
        reply_error(g, reply, 500, "%s", err.message);
        return false;
    }
    if (!check_features(g, reply))
        return false;
    char choice_message[256];
    if (!tool_choice_check(req, choice_message, sizeof choice_message)) {
        reply_error(g, reply, 400, "%s", choice_message);
        return false;
    }
    if (!(*options = model_request_options(g->ref, req->options, &err))) {
        reply_error(g, reply, 400, "%s", err.message);
        return false;
    }
    bool format_ok;
    g->grammar = format_grammar(req->format, &format_ok, &err);
    if (!format_ok) {
        reply_error(g, reply, 400, "%s", err.message);
        return false;
    }
    if (!has_input(req) && !req->debug_render_only)
        return true;
    chat_request settled = *req; /* the think the model's capabilities settled on */
    settled.think = g->think;
    if (!(g->input = chat_request_template_input(&settled))) {
        reply_error(g, reply, 500, "out of memory");
        return false;
    }
    const corral_renderer *renderer =
        g->info.raw ? NULL : prompt_renderer(g->ref, g->input, g->info.chat);
    if (g->images.n_images && !g->info.raw &&
        !image_input_mark(&g->images, req, g->input, renderer && renderer->spaced_media)) {
        reply_error(g, reply, 500, "out of memory");
        return false;
    }
    /* text past the template's output cap cannot render: the request's fault (413, as for a
     * body over its cap), not the template's (500). Measured before rendering, since the
     * render's own failure does not say which of its limits stopped it. */
    size_t max_prompt = corral_template_default_limits().max_output_bytes;
    if (!g->info.raw && prompt_request_text_bytes(g->input, g->info.chat) > max_prompt) {
        reply_error(g, reply, 413,
                    "the prompt renders to more than %zu MiB, the most a template may write",
                    max_prompt >> 20);
        return false;
    }
    corral_output_tags tags = {0};
    *prompt = g->info.raw ? strdup(req->prompt ? req->prompt : "")
                          : prompt_build(g->ref, g->input, g->info.chat, &g->window, &tags, &err);
    if (*prompt && g->images.n_images && g->info.raw &&
        !image_input_mark_raw(&g->images, prompt)) {
        reply_error(g, reply, 500, "out of memory");
        return false;
    }
    if (!*prompt) {
        reply_error(g, reply, 500, "%s", err.message);
        return false;
    }
    bool samples = !req->count_only && !req->debug_render_only; /* else no grammar is used */
    if (samples && tool_choice_forces(req) && !force_tool_call(g, &tags, *prompt, reply))
        return false;
    /* the parser reads the prompt's end, the forced call's header included */
    char *parsed = g->prompt_tail ? strdup(*prompt) : *prompt;
    bool parser_ok = parsed && append_prompt_tail(g, &parsed) && create_parser(g, parsed, &tags);
    if (parsed != *prompt)
        free(parsed);
    if (!parser_ok) {
        reply_error(g, reply, 500, "out of memory");
        return false;
    }
    if (req->debug_render_only) {
        json_t *images = g->images.n_images ? image_input_extract(&g->images, *prompt) : NULL;
        size_t n_images = json_array_size(images);
        json_decref(images);
        http_reply_json(reply, 200,
                        g->shape->rendered(&g->info, generation_debug_info(*prompt, n_images)));
        return false;
    }
    return true;
}

/*
 * What the runner makes of a rendered prompt (its image markers in place) into g->counted:
 * the tokens a completion of it starts from, a generate's context and the images counted
 * (from their sizes: nothing is encoded). false with err and g->count_status (an image the
 * runner refuses is the client's 400).
 */
static bool count_prompt(generation *g, const char *text, corral_error *err)
{
    g->count_status = 500;
    char *copy = strdup(text);
    json_t *images = copy && g->images.n_images ? image_input_extract(&g->images, copy) : NULL;
    json_t *req = copy ? json_pack("{s:s,s:s}", "op", "count", "prompt", copy) : NULL;
    free(copy);
    bool ok = req && (!g->images.n_images || images) &&
              (!json_array_size(images) || json_object_set(req, "images", images) == 0) &&
              (g->info.chat || !g->req->context ||
               json_object_set(req, "context", g->req->context) == 0);
    size_t n_images = json_array_size(images);
    json_decref(images);
    if (!ok) {
        json_decref(req);
        corral_error_set(err, "out of memory");
        return false;
    }
    runner_conn *conn = runner_conn_open(runner_handle_socket(g->runner), req,
                                         g->srv->config.runner_timeout_ns, err);
    json_decref(req);
    json_t *answer = conn ? runner_conn_next(conn, err) : NULL;
    runner_conn_close(conn);
    if (!answer) {
        scheduler_report_failure(g->srv->sched, g->runner);
        return false;
    }
    json_t *n_tokens = json_object_get(answer, "n_tokens");
    const char *error = json_string_value(json_object_get(answer, "error"));
    ok = json_is_integer(n_tokens) && json_integer_value(n_tokens) >= 0;
    if (ok) {
        g->counted = (struct prompt_size){
            .n_tokens = (size_t)json_integer_value(n_tokens),
            .image_tokens = (size_t)json_integer_value(json_object_get(answer, "image_tokens")),
            .largest_image = (size_t)json_integer_value(json_object_get(answer, "largest_image")),
            .n_images = n_images};
        free(g->counted_text);
        ok = (g->counted_text = strdup(text)) != NULL;
        if (!ok)
            corral_error_set(err, "out of memory");
    } else {
        corral_error_set(err, "%s", error ? error : "the runner's count answer has no n_tokens");
        g->count_status = runner_error_status(answer);
    }
    json_decref(answer);
    return ok;
}

static bool count_for_fit(void *state, const char *prompt, size_t *n_tokens, corral_error *err)
{
    generation *g = state;
    if (!count_prompt(g, prompt, err))
        return false;
    *n_tokens = g->counted.n_tokens;
    return true;
}

/*
 * ollama's `truncate` for a chat (prompt_fit.h), images counted at their tokens. Fitting
 * leaves the runner one cell for the answer (its own limit), so the runner never cuts a kept
 * prompt. A text prompt that fits costs at most one count round trip. When even the last
 * message alone is too long it goes as it is: a text one the runner cuts, keeping its first
 * num_keep and its last tokens, as ollama's does; one with images is refused
 * (check_image_prompt). false when it has answered an error.
 */
static bool fit_history(generation *g, char **prompt, http_reply *reply)
{
    size_t limit = runner_handle_n_ctx(g->runner) - 1;
    /* Every token but BOS, EOS and SentencePiece's leading space stands for at least one byte
     * of the text, so a prompt this short fits without asking the runner; an image's marker
     * stands for many more tokens than its bytes. */
    if (!g->images.n_images && strlen(*prompt) + 3 <= limit)
        return true;
    corral_error err = {{0}};
    g->count_status = 500; /* prompt_fit's own failures are the server's */
    if (!prompt_fit(g->ref, g->input, &g->window, limit, count_for_fit, g, prompt, &err)) {
        reply_error(g, reply, g->count_status, "%s", err.message);
        return false;
    }
    g->info.messages_dropped = g->window.n_dropped;
    return true;
}

/*
 * A prompt with images is never cut, whatever `truncate` says (a cut could split an image's
 * tokens, which mean nothing apart): one the context cannot hold is a 400 naming the numbers,
 * as a text prompt with truncate:false is a 400; so is one with more images than the runner
 * takes. false when it has answered.
 */
static bool check_image_prompt(generation *g, const char *prompt, http_reply *reply)
{
    corral_error err = {{0}};
    if (!(g->counted_text && strcmp(g->counted_text, prompt) == 0) &&
        !count_prompt(g, prompt, &err)) {
        reply_error(g, reply, g->count_status, "%s", err.message);
        return false;
    }
    const struct prompt_size *size = &g->counted;
    uint32_t n_ctx = runner_handle_n_ctx(g->runner);
    if (size->n_images > PROMPT_MAX_IMAGES) {
        reply_error(g, reply, 400, "at most %d images per request, not %zu", PROMPT_MAX_IMAGES,
                    size->n_images);
        return false;
    }
    /* the kind of the request's media items, for the numbers' words: a clip of minutes
     * takes thousands of tokens */
    size_t n_audio = g->images.n_audio;
    const char *kind = !n_audio ? "image" : n_audio == g->images.n_images ? "clip" : "media item";
    if (size->largest_image >= n_ctx) {
        reply_error(g, reply, 400, "%s: %s %s takes %zu tokens and the context holds %u "
                    "(raise num_ctx)", RUNNER_ERROR_INPUT_TOO_LONG, *kind == 'i' ? "an" : "a",
                    kind, size->largest_image, n_ctx);
        return false;
    }
    if (size->n_tokens >= n_ctx) {
        reply_error(g, reply, 400, "%s: the prompt takes %zu tokens (%zu of them for %zu "
                    "%s%s) and the context holds %u; a prompt with %ss is not truncated",
                    RUNNER_ERROR_INPUT_TOO_LONG, size->n_tokens, size->image_tokens,
                    size->n_images, kind, size->n_images == 1 ? "" : "s", n_ctx, kind);
        return false;
    }
    return true;
}

/*
 * /api/generate's context: the token ids of an earlier answer, each one of the model's. The
 * runner would refuse a bad one too, but only once the answer has begun (a stream's status is
 * sent); a client's mistake is a 400. false when it has answered.
 */
static bool check_context(generation *g, http_reply *reply)
{
    json_t *context = g->info.chat ? NULL : g->req->context;
    json_int_t n_vocab = runner_handle_n_vocab(g->runner);
    size_t i;
    json_t *id;
    json_array_foreach(context, i, id) {
        json_int_t v = json_integer_value(id);
        if (!json_is_integer(id) || v < 0 || (n_vocab > 0 && v >= n_vocab)) {
            reply_error(g, reply, 400, "context[%zu] is not a token id of this model (0 to %"
                        JSON_INTEGER_FORMAT ")", i, n_vocab > 0 ? n_vocab - 1 : INT32_MAX);
            return false;
        }
    }
    return true;
}

/* Start the runner's completion of prompt and answer, streamed or whole; false on error. */
static bool start(generation *g, const json_t *options, const char *prompt, http_reply *reply)
{
    corral_error err = {{0}};
    if (log_debug_enabled()) /* prompts are the user's: only when asked for */
        log_write(LOG_DEBUG, "prompt",
                  (log_field[]){LOG_STR("model", g->ref->display), LOG_STR("prompt", prompt)}, 2);
    json_t *runner_req = json_pack("{s:s,s:s,s:O}", "op", "completion", "prompt", prompt,
                                   "options", options);
    if (!g->info.chat && g->req->context)
        json_object_set(runner_req, "context", g->req->context);
    if (json_array_size(g->runner_images) > 0)
        json_object_set(runner_req, "images", g->runner_images);
    for (size_t i = 0; i < 2; i++) { /* both default to true */
        if (!(i ? g->req->shift : g->req->truncate))
            json_object_set_new(runner_req, i ? "shift" : "truncate", json_false());
    }
    if (g->grammar)
        json_object_set_new(runner_req, "grammar", json_string(g->grammar));
    if (g->grammar_after[0])
        json_object_set_new(runner_req, "grammar_after", json_string(g->grammar_after));
    if (g->grammar_open[0])
        json_object_set_new(runner_req, "grammar_open", json_string(g->grammar_open));
    if (g->info.logprobs) {
        json_object_set_new(runner_req, "logprobs", json_true());
        if (g->req->top_logprobs > 0)
            json_object_set_new(runner_req, "top_logprobs", json_integer(g->req->top_logprobs));
    }
    g->req = NULL; /* the caller's: a streamed answer outlives it */
    g->conn = runner_req ? runner_conn_open(runner_handle_socket(g->runner), runner_req,
                                            g->srv->config.runner_timeout_ns, &err)
                         : NULL;
    json_decref(runner_req);
    if (!g->conn) {
        scheduler_report_failure(g->srv->sched, g->runner);
        reply_error(g, reply, 500, "%s", runner_req ? err.message : "out of memory");
        return false;
    }
    runner_conn_watch(g->conn, g->client_fd);
    if (!g->stream) {
        answer_whole(g, reply);
        return false;
    }
    http_reply_stream(reply, g->shape->stream_content_type, stream_next, stream_close, g);
    return true;
}

/* The answer to a request with nothing to generate (reason "load" or "unload"): the shape's
 * loaded body, or, streamed where the shape says so, the events of an empty answer. */
static void answer_loaded(generation *g, http_reply *reply, const char *reason)
{
    if (!g->stream || !g->shape->stream_loaded) {
        http_reply_json(reply, 200, g->shape->loaded(&g->info, reason));
        return;
    }
    static const generation_done nothing_generated = {0};
    if (!g->shape->end(&g->info, &nothing_generated, &g->out) || !out_append(&g->out, "", 1)) {
        reply_error(g, reply, 500, "out of memory");
        return;
    }
    http_reply_text(reply, 200, g->shape->stream_content_type, g->out.data);
}

void generation_serve(server *srv, const chat_request *req, const generation_shape *shape,
                      void *shape_state, http_reply *reply)
{
    generation *g = calloc(1, sizeof *g);
    if (!g) {
        free_shape_state(shape, shape_state);
        shape->error(reply, 500, "out of memory");
        return;
    }
    bool chat = req->chat;
    g->srv = srv;
    g->shape = shape;
    g->req = req;
    g->facts = http_reply_facts(reply);
    g->client_fd = http_reply_client_fd(reply);
    g->info = (generation_info){.model = "", .chat = chat, .start_ns = monotonic_ns(),
                                .state = shape_state};
    g->info.raw = !chat && req->raw;
    g->stream = req->stream;
    json_t *options = NULL;
    char *prompt = NULL;
    corral_error err = {{0}};
    g->calls = json_array();
    g->all_calls = json_array();
    g->lps = json_array();
    if (!g->calls || !g->all_calls || !g->lps) {
        reply_error(g, reply, 500, "out of memory");
        goto done;
    }
    if (!prepare(g, &options, &prompt, reply))
        goto done;
    load_request load = model_request_load(g->ref, options);
    load.keep_alive_ns = g->keep_alive_ns;
    load.abandoned = client_left;
    load.abandoned_ctx = g;
    unsigned status = 500;
    if (!(g->runner = scheduler_acquire(srv->sched, &load, &status, &err))) {
        if (status == SCHEDULER_ABANDONED)
            note_client_gone(g, "queued");
        reply_error(g, reply, status, "%s", err.message);
        goto done;
    }
    /* ollama's load_duration: arrival until the runner is ready (queue, load), never 0 */
    g->info.load_ns = monotonic_ns() - g->info.start_ns;
    if (!prompt) { /* load or unload only */
        bool unload = g->keep_alive_ns == 0;
        answer_loaded(g, reply, unload ? "unload" : "load");
        if (unload)
            scheduler_unload(srv->sched, g->ref->model_path);
        goto done;
    }
    if (req->count_only && shape->counted) {
        /* the whole prompt as the client sent it, before any history would be dropped: what
         * a client deciding when to compact its conversation needs to know */
        if (count_prompt(g, prompt, &err))
            http_reply_json(reply, 200, shape->counted(&g->info, (int64_t)g->counted.n_tokens));
        else
            reply_error(g, reply, g->count_status, "%s", err.message);
        goto done;
    }
    if (!check_context(g, reply))
        goto done;
    /* one message has nothing to drop (and a raw prompt renders none) */
    if (chat && g->window.n_messages > 1 && req->truncate && !fit_history(g, &prompt, reply))
        goto done;
    if (!append_prompt_tail(g, &prompt)) {
        reply_error(g, reply, 500, "out of memory");
        goto done;
    }
    if (g->images.n_images && !check_image_prompt(g, prompt, reply))
        goto done;
    json_decref(g->input); /* the prompt is final: the templates are done with it */
    g->input = NULL;
    if (g->images.n_images && !(g->runner_images = image_input_extract(&g->images, prompt))) {
        reply_error(g, reply, 500, "out of memory");
        goto done;
    }
    if (start(g, options, prompt, reply))
        g = NULL; /* the stream owns it */
done:
    if (g)
        generation_free(g);
    free(prompt);
    json_decref(options);
}
