/*
 * One generation request from its checks to the last byte of the answer, shared by ollama's
 * native endpoints (/api/generate, /api/chat) and the OpenAI-compatible ones (/v1/...): the
 * model resolved, its options merged under the request's, the prompt rendered, a runner
 * acquired from the scheduler and its messages relayed; the HTTP client going away closes
 * the runner connection, which cancels the generation. What the answer looks like on the wire
 * (NDJSON chunks, SSE events, the shape of an error) is a generation_shape's.
 */
#ifndef CORRAL_SERVER_GENERATION_H
#define CORRAL_SERVER_GENERATION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/core/chat_request.h"
#include "server/http/http.h"
#include "server/server.h"

/* What a shape knows of the request it answers. */
typedef struct generation_info {
    const char *model; /* the model's display name, e.g. "llama3.2:latest" */
    bool chat, raw;
    size_t n_tool_calls; /* the model's tool calls so far */
    bool logprobs;       /* the request asked for token log-probabilities */
    size_t messages_dropped; /* a chat's oldest messages left out to fit the context */
    int64_t start_ns;  /* CLOCK_MONOTONIC when the request arrived */
    int64_t load_ns;   /* from the arrival until the runner was ready: queue and load */
    /* the whole prompt in tokens (generation_done's prompt_tokens), once the runner has said:
     * with its first piece of a stream, else at the end; 0 before */
    int64_t prompt_tokens;
    void *state;       /* the shape's own (generation_serve's shape_state) */
} generation_info;

/*
 * A piece of the answer, or the whole of it, once the model's text is split by its template's
 * tags: the answer proper, the model's thinking, and its tool calls as ollama
 * gives them ([{"id": "call_…", "function": {"index", "name", "arguments": {…}}}]; NULL or
 * empty: none). Without tags (no tools asked for, thinking off) all text is content.
 */
typedef struct generation_delta {
    const char *content;
    size_t content_len;
    const char *thinking;
    size_t thinking_len;
    const json_t *tool_calls;
    /* the log-probabilities of the tokens, when asked for: [{"token", "logprob", "bytes",
     * "top_logprobs": [...]}] as ollama gives them; NULL or empty: none with this piece */
    const json_t *logprobs;
} generation_delta;

/* How an answer ended: the runner's done message, typed. */
typedef struct generation_done {
    const char *reason;        /* "stop" or "length"; NULL: none given (nothing generated) */
    const char *stop_sequence; /* the stop string that ended the answer; NULL: none */
    int64_t prompt_eval_count; /* prompt tokens the runner evaluated (not those it had cached) */
    int64_t prompt_eval_duration_ns;
    int64_t eval_count;        /* tokens generated */
    int64_t eval_duration_ns;
    /* The whole prompt in tokens, cached or not, as the OpenAI and Anthropic APIs count it
     * (ollama's prompt_eval_count counts only the evaluated ones). */
    int64_t prompt_tokens;
    const json_t *context;     /* the context's token ids, for /api/generate's; NULL: none */
    int64_t context_shifts;    /* times the context overflowed and was shifted */
    int64_t prompt_truncated;  /* prompt tokens cut to fit */
    int64_t draft_tokens;      /* speculative decoding: tokens guessed and verified */
    int64_t draft_accepted;    /* ... of which the answer kept */
    /* a streamed generate's tool calls, held for its final chunk, where ollama's
     * /api/generate gives them (a chat's come with its pieces); NULL or empty: none */
    const json_t *tool_calls;
} generation_done;

/* The runner's done message as a generation_done that borrows msg's strings and tokens. An
 * empty object reads as nothing generated. */
generation_done generation_done_read(const json_t *msg);

/* The bytes a streamed answer sends next; shapes append to it. */
typedef struct generation_out generation_out;

/* An empty buffer of a streamed answer's bytes, for driving a shape outside a request (tests);
 * NULL when out of memory. */
generation_out *generation_out_create(void);
void generation_out_free(generation_out *out);
/* The bytes appended so far (not NUL-terminated; NULL when none) and their count. */
const char *generation_out_bytes(const generation_out *out, size_t *len);

/* Append prefix, obj as compact JSON (consumed) and suffix; false when out of memory. */
bool generation_out_json(generation_out *out, const char *prefix, json_t *obj,
                         const char *suffix);
bool generation_out_text(generation_out *out, const char *text);

/*
 * A wire format. Streamed answers call piece for each piece of the answer that is not empty,
 * then end with how the answer ended, or fail after the reply has begun; whole builds the one
 * body of stream:false from the whole answer; loaded answers a request with nothing to
 * generate (reason "load" or "unload"); error answers before any byte.
 */
typedef struct generation_shape {
    const char *stream_content_type;
    /* a stream:true request with nothing to generate is answered with end's events for an
     * answer that ends at once, as a client's stream reader needs them, not with loaded's
     * one body (ollama's OpenAI and Anthropic middleware stream that answer too; its native
     * API answers one object) */
    bool stream_loaded;
    bool think_optional; /* think on a model that cannot think is dropped, not a 400 */
    bool (*piece)(const generation_info *info, const generation_delta *delta,
                  generation_out *out);
    bool (*end)(const generation_info *info, const generation_done *done, generation_out *out);
    bool (*fail)(const generation_info *info, const char *message, generation_out *out);
    json_t *(*whole)(const generation_info *info, const generation_done *done,
                     const generation_delta *answer);
    /* answers stream:false in a body of its own making (plain text, say) in place of whole's
     * JSON; NULL: whole's */
    void (*reply_whole)(http_reply *reply, const generation_info *info,
                        const generation_done *done, const generation_delta *answer);
    json_t *(*loaded)(const generation_info *info, const char *reason);
    void (*error)(http_reply *reply, unsigned status, const char *message);
    void (*free_state)(void *state); /* frees a shape_state that owns more; NULL: free() */
    /* the answer to a count_only request: the prompt as rendered is n_tokens long, images'
     * tokens included (NULL: the shape serves no counting) */
    json_t *(*counted)(const generation_info *info, int64_t n_tokens);
    /* the answer to a debug_render_only request: the shape's empty answer carrying
     * debug_info (generation_debug_info's, consumed); NULL only in a shape whose requests
     * never ask for it */
    json_t *(*rendered)(const generation_info *info, json_t *debug_info);
} generation_shape;

/*
 * Answer request (borrowed; a dialect's parse made it) in shape: validated against the
 * model, rendered, run. shape_state is the shape's (NULL: none); the generation frees it when
 * the answer ends, with the shape's free_state.
 */
void generation_serve(server *srv, const chat_request *request, const generation_shape *shape,
                      void *shape_state, http_reply *reply);

/* Nanoseconds since the request arrived. */
int64_t generation_elapsed_ns(const generation_info *info);

/* ollama's _debug_info: the prompt as rendered and, when there are some, how many images it
 * holds. */
json_t *generation_debug_info(const char *prompt, size_t n_images);

/* RFC 3339 with nanoseconds, UTC, as Go's time.RFC3339Nano prints it. */
json_t *generation_created_at(void);

#endif
