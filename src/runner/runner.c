/*
 * The runner process: parses its arguments, loads the model, creates the slot pool, and
 * serves protocol.h requests on a Unix socket, one thread per connection. A connection
 * that closes mid-generation cancels its request. SIGTERM/SIGINT stop the process; it also
 * stops when its parent (the server) dies, so no runner outlives the server.
 */
#include "runner.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <utf8proc.h>

#include "audio/audio.h"
#include "protocol.h"
#include "slots.h"
#include "util/log.h"

#define MAX_STOP_STRINGS 16
#define MAX_LORAS 16

typedef struct runner_options {
    const char *model_path;
    const char *socket_path;
    const char *loras[MAX_LORAS]; /* LoRA adapters, applied at scale 1 as ollama does */
    size_t n_loras;
    uint32_t n_ctx, n_batch, n_parallel;
    int n_threads;
    corral_kv_type kv_type;
    uint32_t max_draft; /* longest prompt-lookup draft (0: no prompt lookup) */
    bool draft_by_acceptance; /* --draft-by acceptance: lengths not from measured costs */
    const char *draft_path; /* a draft model for speculative decoding, or NULL */
    int gpu_layers; /* --gpu-layers: layers on a GPU (num_gpu); -1 all that fit, 0 none */
    const char *mmproj_path; /* a vision projector for images in prompts, or NULL */
} runner_options;

static volatile sig_atomic_t stop_requested;

/* Connection threads alive, so shutdown can wait for them before freeing the pool. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_changed = PTHREAD_COND_INITIALIZER;
static int live_connections;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- socket I/O ---- */

static bool send_all(int fd, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        data += w;
        n -= (size_t)w;
    }
    return true;
}

/* Write one JSON object as a line; consumes obj. */
static bool send_json(int fd, json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!text)
        return false;
    bool ok = send_all(fd, text, strlen(text)) && send_all(fd, "\n", 1);
    free(text);
    return ok;
}

static void send_error(int fd, const char *message)
{
    send_json(fd, json_pack("{s:s}", "error", message));
}

/* An error; one that is the request's (refused) carries its status (protocol.h). */
static void send_failure(int fd, bool refused, const char *message)
{
    if (refused)
        send_json(fd, json_pack("{s:s,s:i}", "error", message, "status", RUNNER_STATUS_REFUSED));
    else
        send_error(fd, message);
}

/* Read one line (without '\n') of at most max bytes; NULL on EOF, error or overflow. */
static char *read_line(int fd, size_t max)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap >= max) {
                free(buf);
                return NULL;
            }
            cap = cap * 2 < max ? cap * 2 : max;
            char *grown = realloc(buf, cap);
            if (!grown)
                break;
            buf = grown;
        }
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        char *nl = memchr(buf + n, '\n', (size_t)r);
        n += (size_t)r;
        if (nl) {
            *nl = '\0';
            return buf;
        }
    }
    free(buf);
    return NULL;
}

/* True when the peer has closed its end (checked between tokens to cancel promptly). */
static bool peer_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* ---- requests ---- */

typedef struct connection {
    int fd;
    slot_pool *pool;
} connection;

/* A request's media encoding is no longer wanted once its client has closed the connection or
 * the runner is stopping: minutes of a long clip's encoding would otherwise hold up every
 * other request's media and the runner's exit (corral_cancel's requested). */
static bool encoding_unwanted(void *user)
{
    const connection *c = user;
    return stop_requested || peer_gone(c->fd);
}

static bool option_number(json_t *options, const char *key, double *out)
{
    json_t *v = json_object_get(options, key);
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

/* A float option: the server sends float32-range reals; anything else is left as it was. */
static void option_float(json_t *options, const char *key, float *out)
{
    double v;
    if (option_number(options, key, &v) && fabs(v) <= FLT_MAX)
        *out = (float)v;
}

/* An integer option clamped to [min, max]: the server bounds them, and a runner trusts no
 * conversion of an out-of-range value to be defined. */
static bool option_int(json_t *options, const char *key, json_int_t min, json_int_t max,
                       json_int_t *out)
{
    json_t *v = json_object_get(options, key);
    if (!json_is_integer(v))
        return false;
    json_int_t n = json_integer_value(v);
    *out = n < min ? min : n > max ? max : n;
    return true;
}

static void read_options(json_t *options, uint32_t n_ctx, completion_request *req,
                         const char **stops)
{
    corral_sampler_params *s = &req->sampling;
    json_int_t n;
    option_float(options, "temperature", &s->temperature);
    option_float(options, "top_p", &s->top_p);
    option_float(options, "min_p", &s->min_p);
    option_float(options, "typical_p", &s->typical_p);
    option_float(options, "repeat_penalty", &s->repeat_penalty);
    option_float(options, "presence_penalty", &s->presence_penalty);
    option_float(options, "frequency_penalty", &s->frequency_penalty);
    if (option_int(options, "top_k", 0, INT32_MAX, &n))
        s->top_k = (int32_t)n;
    /* the penalty window holds tokens of the context: -1 (all of it) and more are n_ctx */
    if (option_int(options, "repeat_last_n", -1, n_ctx, &n))
        s->repeat_last_n = n < 0 ? (int32_t)n_ctx : (int32_t)n;
    if (option_int(options, "seed", INT64_MIN, INT64_MAX, &n))
        s->seed = n;
    if (option_int(options, "num_predict", LONG_MIN, LONG_MAX, &n))
        req->num_predict = (long)n;
    if (option_int(options, "num_keep", -1, UINT32_MAX, &n) && n >= 0) /* -1: the default */
        req->num_keep = (uint32_t)n;
    if (option_int(options, "draft_num_predict", -1, SLOT_MAX_DRAFT, &n))
        req->draft_num_predict = (long)n;
    json_t *stop = json_object_get(options, "stop");
    size_t i;
    json_t *item;
    json_array_foreach(stop, i, item) {
        if (json_is_string(item) && req->n_stops < MAX_STOP_STRINGS)
            stops[req->n_stops++] = json_string_value(item);
    }
}

/*
 * The tokens of text, the start of a prompt (corral_tokenize_prompt: special tokens parsed,
 * BOS/EOS with add_special, one BOS however the text was made) in a new buffer, after
 * `reserve` free ids at its front; *n of them. The tokenizer says how many it needs: usually
 * no more than the bytes and a few, but a leading-space piece with BOS and EOS can pass
 * that, and then the buffer grows to fit.
 */
static corral_token *tokenize_text(const corral_vocab *vocab, const char *text, size_t len,
                                   bool add_special, size_t reserve, size_t *n,
                                   corral_error *err)
{
    size_t cap = len + 4;
    for (;;) {
        corral_token *ids = malloc((reserve + cap) * sizeof *ids);
        if (!ids) {
            corral_error_set(err, "out of memory");
            return NULL;
        }
        if (!corral_tokenize_prompt(vocab, text, len, add_special, ids + reserve, cap, n, err)) {
            free(ids);
            return NULL;
        }
        if (*n <= cap)
            return ids;
        free(ids);
        cap = *n;
    }
}

/* Tokens of the request: "context" ids first, then the prompt (BOS only without context),
 * with its images' pseudo-ids (their embeddings in req, their encoding stopped when c's client
 * leaves); *refused when a failure is the request's. */
static corral_token *request_tokens(connection *c, json_t *body, completion_request *req,
                                    size_t *n, bool *refused, corral_error *err)
{
    slot_pool *pool = c->pool;
    const corral_cancel cancel = {.requested = encoding_unwanted, .user = c};
    json_t *context = json_object_get(body, "context");
    json_t *images = json_object_get(body, "images");
    const char *prompt = json_string_value(json_object_get(body, "prompt"));
    size_t n_context = json_array_size(context), len = prompt ? strlen(prompt) : 0, n_prompt;
    *refused = true;
    if (json_array_size(images) > 0 && !pool->vision) {
        prompt_media_refusal(images, err);
        return NULL;
    }
    *refused = false;
    corral_token *ids =
        json_array_size(images) > 0
            ? prompt_vision_tokens(pool->vision, pool->vocab, prompt ? prompt : "", images,
                                   n_context == 0, n_context, &cancel, &n_prompt, &req->images,
                                   &req->n_images, refused, err)
            : tokenize_text(pool->vocab, prompt ? prompt : "", len, n_context == 0, n_context,
                            &n_prompt, err);
    if (!ids)
        return NULL;
    for (size_t i = 0; i < n_context; i++) {
        json_t *v = json_array_get(context, i);
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= corral_model_n_vocab(pool->model)) {
            corral_error_set(err, "context holds an invalid token id");
            *refused = true;
            prompt_images_free(req->images, req->n_images);
            req->images = NULL;
            req->n_images = 0;
            free(ids);
            return NULL;
        }
        ids[i] = (corral_token)id;
    }
    *n = n_context + n_prompt;
    return ids;
}

/* Too long for the context: keep num_keep tokens and the most recent ones, as ollama does. */
static size_t truncate_prompt(corral_token *ids, size_t n, uint32_t n_ctx, uint32_t num_keep)
{
    size_t limit = n_ctx - 1;
    if (n <= limit)
        return 0;
    size_t keep = num_keep < limit / 2 ? num_keep : 0;
    size_t discard = n - limit;
    memmove(ids + keep, ids + keep + discard, (n - keep - discard) * sizeof *ids);
    return discard;
}

/* A token's text for JSON: its bytes, each byte of a broken UTF-8 sequence as U+FFFD (the
 * exact bytes go in "bytes"). */
static json_t *token_text(const char *bytes, size_t n)
{
    char *text = malloc(3 * n + 1);
    size_t len = 0;
    for (size_t i = 0; text && i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t used =
            utf8proc_iterate((const utf8proc_uint8_t *)bytes + i, (utf8proc_ssize_t)(n - i), &cp);
        if (used <= 0) {
            memcpy(text + len, "\xef\xbf\xbd", 3);
            len += 3;
            i++;
        } else {
            memcpy(text + len, bytes + i, (size_t)used);
            len += (size_t)used;
            i += (size_t)used;
        }
    }
    json_t *out = text ? json_stringn(text, len) : NULL;
    free(text);
    return out;
}

/* {token, logprob, bytes} of one token, as ollama and OpenAI write logprobs. */
static json_t *logprob_entry(const corral_vocab *vocab, corral_token id, float logprob)
{
    char piece[256];
    size_t n = corral_token_to_piece(vocab, id, piece, sizeof piece, true);
    n = n < sizeof piece ? n : sizeof piece;
    json_t *bytes = json_array();
    for (size_t i = 0; bytes && i < n; i++)
        json_array_append_new(bytes, json_integer((unsigned char)piece[i]));
    return json_pack("{s:o,s:f,s:o}", "token", token_text(piece, n), "logprob", (double)logprob,
                     "bytes", bytes);
}

/* The slot's unsent token log-probabilities as a message's "logprobs"; then none are left. */
static bool attach_logprobs(const slot_pool *pool, slot *s, json_t *msg)
{
    if (s->n_lps == 0)
        return true;
    json_t *list = json_array();
    for (size_t i = 0; list && i < s->n_lps; i++) {
        const token_logprob *e = &s->lps[i];
        json_t *entry = logprob_entry(pool->vocab, e->id, e->logprob);
        json_t *top = json_array();
        for (unsigned t = 0; top && t < e->n_top; t++)
            json_array_append_new(top, logprob_entry(pool->vocab, e->top_ids[t],
                                                     e->top_logprobs[t]));
        if (!entry || !top || json_object_set_new(entry, "top_logprobs", top) != 0 ||
            json_array_append_new(list, entry) != 0) {
            json_decref(list);
            return false;
        }
    }
    s->n_lps = 0;
    return list && json_object_set_new(msg, "logprobs", list) == 0;
}

static json_t *final_message(const slot *s)
{
    json_t *tokens = json_array();
    size_t image_tokens = 0;
    for (size_t i = 0; i < s->n_prompt; i++) /* images are not a context's to carry */
        if (prompt_is_image_id(s->prompt[i]))
            image_tokens++;
        else
            json_array_append_new(tokens, json_integer(s->prompt[i]));
    for (size_t i = 0; i < s->n_generated_ids; i++)
        json_array_append_new(tokens, json_integer(s->generated[i]));
    int64_t first = s->t_first_ns ? s->t_first_ns : s->t_end_ns;
    json_t *final = json_pack(
        "{s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "done", 1, "done_reason", s->done_reason,
        "prompt_eval_count", (json_int_t)s->n_prompt_eval, "prompt_eval_duration",
        (json_int_t)(first - s->t_start_ns), "eval_count", (json_int_t)s->n_generated_ids,
        "eval_duration", (json_int_t)(s->t_end_ns - first), "context_shifts",
        (json_int_t)s->n_shifts, "prompt_truncated", (json_int_t)s->n_truncated, "tokens", tokens);
    if (final && s->n_drafted) { /* speculative decoding's yield, for the logs and tests */
        json_object_set_new(final, "draft_tokens", json_integer((json_int_t)s->n_drafted));
        json_object_set_new(final, "draft_accepted",
                            json_integer((json_int_t)s->n_draft_accepted));
    }
    size_t encoded = 0;
    for (size_t i = 0; i < s->n_images; i++)
        encoded += s->images[i].encoded;
    if (final && image_tokens) {
        json_object_set_new(final, "image_tokens", json_integer((json_int_t)image_tokens));
        json_object_set_new(final, "images_encoded", json_integer((json_int_t)encoded));
    }
    if (final && s->stops.matched >= 0) /* which stop string ended it (Anthropic reports it) */
        json_object_set_new(final, "stop_sequence",
                            json_string(s->stops.stops[s->stops.matched]));
    return final;
}

/* Stream a submitted slot's text to the client until it is done. */
static void stream_slot(connection *c, slot *s)
{
    slot_pool *pool = c->pool;
    bool client_ok = true;
    bool counted = false; /* the first piece carries the prompt's length */
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        /* After the client left, keep waiting (lock released) until the engine retires the slot. */
        while (!s->done && (s->n_out == 0 || !client_ok)) {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_nsec += 50 * 1000000;
            if (deadline.tv_nsec >= 1000000000) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&s->changed, &pool->lock, &deadline);
            if (client_ok && !s->done && peer_gone(c->fd)) {
                client_ok = false;
                s->cancelled = true;
                pthread_cond_signal(&pool->work);
            }
        }
        if (s->n_out > 0 && client_ok) {
            /* One message per piece; the logprobs gathered so far ride on the last. */
            json_t *msgs = json_array();
            for (size_t i = 0, start = 0; msgs && i < s->n_pieces; start = s->piece_ends[i++]) {
                json_t *msg = json_object();
                json_object_set_new(msg, "content",
                                    json_stringn(s->out + start, s->piece_ends[i] - start));
                if (!counted)
                    json_object_set_new(msg, "prompt_tokens",
                                        json_integer((json_int_t)s->n_prompt));
                counted = true;
                if (i + 1 == s->n_pieces)
                    attach_logprobs(pool, s, msg);
                json_array_append_new(msgs, msg);
            }
            s->n_out = 0;
            s->n_pieces = 0;
            pthread_mutex_unlock(&pool->lock);
            size_t i;
            json_t *msg;
            client_ok = msgs != NULL;
            json_array_foreach(msgs, i, msg)
                client_ok = client_ok && send_json(c->fd, json_incref(msg));
            json_decref(msgs);
            pthread_mutex_lock(&pool->lock);
            if (!client_ok && !s->done) {
                s->cancelled = true;
                pthread_cond_signal(&pool->work);
            }
            continue;
        }
        s->n_out = 0;
        s->n_pieces = 0;
        if (s->done)
            break;
    }
    json_t *final = strcmp(s->done_reason, "error") == 0 ? json_pack("{s:s}", "error", s->error)
                                                         : final_message(s);
    if (final && !json_object_get(final, "error"))
        attach_logprobs(pool, s, final);
    pthread_mutex_unlock(&pool->lock);
    /* Idle before the client hears it is done: its next request must find this slot's cache. */
    slot_pool_release(pool, s);
    if (client_ok)
        send_json(c->fd, final);
    else
        json_decref(final);
}

static void handle_completion(connection *c, json_t *body)
{
    corral_error err;
    completion_request req = {.num_predict = -1, .num_keep = 4, .draft_num_predict = -1};
    const char *stops[MAX_STOP_STRINGS];
    corral_sampler_params_init(&req.sampling);
    req.stops = stops;
    read_options(json_object_get(body, "options"), c->pool->n_ctx, &req, stops);
    const char *grammar = json_string_value(json_object_get(body, "grammar"));
    req.grammar_after = json_string_value(json_object_get(body, "grammar_after"));
    req.grammar_open = json_string_value(json_object_get(body, "grammar_open"));
    req.logprobs = json_is_true(json_object_get(body, "logprobs"));
    req.no_shift = json_is_false(json_object_get(body, "shift"));
    json_int_t top = json_integer_value(json_object_get(body, "top_logprobs"));
    req.top_logprobs = top > 0 ? (unsigned)(top < SLOT_MAX_TOP_LOGPROBS ? top
                                                                        : SLOT_MAX_TOP_LOGPROBS)
                               : 0;
    if ((req.grammar_after && strlen(req.grammar_after) > SLOT_MAX_TRIGGER) ||
        (req.grammar_open && strlen(req.grammar_open) > SLOT_MAX_TRIGGER)) {
        char message[64];
        snprintf(message, sizeof message, "grammar_after or grammar_open is longer than %d bytes",
                 SLOT_MAX_TRIGGER);
        send_error(c->fd, message);
        return;
    }
    grammar_cache *grammars = c->pool->grammars;
    if (grammar && !(req.grammar = grammar_cache_take(grammars, grammar, NULL, c->pool->vocab,
                                                      &err))) {
        send_error(c->fd, err.message);
        return;
    }
    if (req.grammar && req.grammar_after && *req.grammar_after && req.grammar_open &&
        *req.grammar_open &&
        !(req.opening = grammar_cache_take(grammars, grammar, req.grammar_open, c->pool->vocab,
                                           &err))) {
        grammar_cache_give(grammars, req.grammar);
        send_error(c->fd, err.message);
        return;
    }
    bool refused = false;
    req.tokens = request_tokens(c, body, &req, &req.n_tokens, &refused, &err);
    if (!req.tokens) {
        grammar_cache_give(grammars, req.grammar);
        grammar_cache_give(grammars, req.opening);
        send_failure(c->fd, refused, err.message);
        return;
    }
    /* cutting a prompt could cut an image in two: one with images must fit */
    if ((json_is_false(json_object_get(body, "truncate")) || req.n_images > 0) &&
        req.n_tokens >= c->pool->n_ctx) {
        prompt_images_free(req.images, req.n_images);
        free(req.tokens);
        grammar_cache_give(grammars, req.grammar);
        grammar_cache_give(grammars, req.opening);
        send_failure(c->fd, true, RUNNER_ERROR_INPUT_TOO_LONG);
        return;
    }
    size_t truncated = truncate_prompt(req.tokens, req.n_tokens, c->pool->n_ctx, req.num_keep);
    req.n_tokens -= truncated;
    slot *s = slot_pool_submit(c->pool, &req, &err);
    free(req.tokens);
    if (!s) {
        prompt_images_free(req.images, req.n_images);
        grammar_cache_give(grammars, req.grammar);
        grammar_cache_give(grammars, req.opening);
        send_error(c->fd, err.message);
        return;
    }
    s->n_truncated = truncated;
    stream_slot(c, s);
}

/* The numbers of a completion of the same prompt, images and context, its images counted
 * without encoding them: what the server fits a chat's history with. */
static void handle_count(connection *c, json_t *body)
{
    json_t *context = json_object_get(body, "context");
    json_t *images = json_object_get(body, "images");
    const char *prompt = json_string_value(json_object_get(body, "prompt"));
    size_t n_context = json_array_size(context);
    prompt_count count = {0};
    corral_error err;
    bool ok = true, refused = false;
    if (json_array_size(images) > 0 && !c->pool->vision) {
        prompt_media_refusal(images, &err);
        ok = false;
        refused = true;
    } else if (json_array_size(images) > 0) {
        ok = prompt_vision_count(c->pool->vision, c->pool->vocab, prompt ? prompt : "", images,
                                 n_context == 0, &count, &refused, &err);
    } else {
        corral_token *ids = tokenize_text(c->pool->vocab, prompt ? prompt : "",
                                          prompt ? strlen(prompt) : 0, n_context == 0, 0,
                                          &count.n_tokens, &err);
        ok = ids != NULL;
        free(ids);
    }
    if (!ok) {
        send_failure(c->fd, refused, err.message);
        return;
    }
    send_json(c->fd, json_pack("{s:I,s:I,s:I}", "n_tokens",
                               (json_int_t)(n_context + count.n_tokens), "image_tokens",
                               (json_int_t)count.n_image_tokens, "largest_image",
                               (json_int_t)count.largest_image));
}

static void handle_tokenize(connection *c, json_t *body)
{
    const char *text = json_string_value(json_object_get(body, "content"));
    size_t len = text ? strlen(text) : 0, n = 0;
    corral_error err;
    corral_token *ids = tokenize_text(c->pool->vocab, text ? text : "", len, true, 0, &n, &err);
    if (!ids) {
        send_error(c->fd, err.message);
        return;
    }
    json_t *tokens = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(tokens, json_integer(ids[i]));
    free(ids);
    send_json(c->fd, json_pack("{s:o}", "tokens", tokens));
}

/* One embedding at a time: the context holds one input's activations. */
static pthread_mutex_t embed_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The pooled vector of one input (not normalised), appended to vectors; its token count added
 * to *n_tokens. An input longer than the context is cut to it, keeping its last token (the
 * [SEP] an encoder expects), unless truncate is false: then it is an error, as in ollama.
 */
static bool embed_one(slot_pool *pool, const char *text, bool truncate, json_t *vectors,
                      size_t *n_tokens, bool *refused, corral_error *err)
{
    size_t n = 0;
    uint32_t n_ctx = corral_context_n_ctx(pool->ctx), n_embd = corral_model_n_embd(pool->model);
    corral_token *ids = tokenize_text(pool->vocab, text, strlen(text), true, 0, &n, err);
    float *out = ids ? malloc(n_embd * sizeof *out) : NULL;
    bool ok = out != NULL;
    if (ids && !out)
        corral_error_set(err, "out of memory");
    if (ok && n > n_ctx && !truncate) {
        corral_error_set(err, RUNNER_ERROR_INPUT_TOO_LONG);
        *refused = true;
        ok = false;
    } else if (ok && n > n_ctx) {
        ids[n_ctx - 1] = ids[n - 1];
        n = n_ctx;
    }
    if (ok) {
        pthread_mutex_lock(&embed_lock);
        ok = corral_embed(pool->ctx, ids, n, out, err);
        pthread_mutex_unlock(&embed_lock);
    }
    json_t *vector = ok ? json_array() : NULL;
    for (uint32_t i = 0; vector && i < n_embd; i++)
        if (json_array_append_new(vector, json_real(out[i])) != 0) {
            json_decref(vector);
            vector = NULL;
        }
    if (ok && (!vector || json_array_append_new(vectors, vector) != 0)) {
        corral_error_set(err, "out of memory");
        ok = false;
    }
    *n_tokens += n;
    free(ids);
    free(out);
    return ok;
}

/* Each input's vector on a line of its own as it is made (a batch's vectors can outgrow
 * any one line), then the count; a client that left stops the batch. */
static void handle_embed(connection *c, json_t *body)
{
    json_t *inputs = json_object_get(body, "inputs");
    bool truncate = !json_is_false(json_object_get(body, "truncate"));
    size_t n_tokens = 0;
    corral_error err = {{0}};
    bool refused = false;
    bool ok = json_is_array(inputs) && corral_model_is_embedding(c->pool->model);
    if (!ok)
        corral_error_set(&err, "%s", !json_is_array(inputs) ? "inputs must be an array of strings"
                                                            : "the model does not make embeddings");
    size_t i;
    json_t *input;
    json_array_foreach(inputs, i, input) {
        if (!ok)
            break;
        json_t *vector = json_array();
        if (!json_is_string(input)) {
            corral_error_set(&err, "inputs must be an array of strings");
            ok = false;
        } else if (!vector) {
            corral_error_set(&err, "out of memory");
            ok = false;
        } else {
            ok = embed_one(c->pool, json_string_value(input), truncate, vector, &n_tokens,
                           &refused, &err);
        }
        if (ok && !send_json(c->fd, json_pack("{s:O}", "embedding", json_array_get(vector, 0)))) {
            json_decref(vector);
            return; /* the server went away */
        }
        json_decref(vector);
    }
    if (ok)
        send_json(c->fd, json_pack("{s:b,s:I}", "done", 1, "prompt_eval_count",
                                   (json_int_t)n_tokens));
    else
        send_failure(c->fd, refused, err.message);
}

static void handle_health(connection *c)
{
    slot_pool *pool = c->pool;
    pthread_mutex_lock(&pool->lock);
    size_t idle = 0, cells_used = 0;
    for (size_t i = 0; i < pool->n_slots; i++) {
        idle += !pool->slots[i].busy;
        /* tokens a recurrent model's slot feeds again are not in the cache yet */
        cells_used += pool->slots[i].n_cache - pool->slots[i].n_refeed;
    }
    pthread_mutex_unlock(&pool->lock);
    send_json(c->fd, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "status", "ok",
                               "slots", (json_int_t)pool->n_slots, "slots_idle", (json_int_t)idle,
                               "n_ctx", (json_int_t)pool->n_ctx, "kv_cells_used",
                               (json_int_t)cells_used, "kv_cells",
                               (json_int_t)pool->n_ctx * (json_int_t)pool->n_slots, "n_vocab",
                               (json_int_t)corral_model_n_vocab(pool->model), "gpu_layers",
                               (json_int_t)corral_context_gpu_layers(pool->ctx), "vram_bytes",
                               (json_int_t)corral_context_gpu_bytes(pool->ctx)));
}

static void *connection_main(void *arg)
{
    connection *c = arg;
    char *line = read_line(c->fd, RUNNER_MAX_REQUEST_BYTES);
    json_error_t jerr;
    json_t *body = line ? json_loads(line, 0, &jerr) : NULL;
    free(line);
    const char *op = json_string_value(json_object_get(body, "op"));
    if (!body)
        send_error(c->fd, "invalid request");
    else if (op && strcmp(op, "completion") == 0)
        handle_completion(c, body);
    else if (op && strcmp(op, "tokenize") == 0)
        handle_tokenize(c, body);
    else if (op && strcmp(op, "count") == 0)
        handle_count(c, body);
    else if (op && strcmp(op, "embed") == 0)
        handle_embed(c, body);
    else if (op && strcmp(op, "health") == 0)
        handle_health(c);
    else
        send_error(c->fd, "unknown op");
    json_decref(body);
    close(c->fd);
    free(c);
    /* libcrypto's state for this thread (an image's digest made here) is freed by a key
     * destructor once the thread has ended, which may be after the process exits when this
     * was the last request: freed now instead */
    OPENSSL_thread_stop();
    pthread_mutex_lock(&live_lock);
    live_connections--;
    pthread_cond_signal(&live_changed);
    pthread_mutex_unlock(&live_lock);
    return NULL;
}

/* ---- process ---- */

static int listen_unix(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        log_printf(LOG_ERROR, "socket path too long: %s", path);
        return -1;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || chmod(path, 0600) != 0 ||
        listen(fd, 64) != 0) {
        log_printf(LOG_ERROR, "cannot listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/*
 * Serve until SIGTERM/SIGINT or until the server is gone: when it dies this process is
 * re-parented, which the accept loop notices within its 200 ms poll. (PR_SET_PDEATHSIG
 * cannot do this: it fires when the server *thread* that forked the runner exits, and the
 * server forks from short-lived request threads.)
 */
static void serve(int listen_fd, slot_pool *pool, pid_t server_pid)
{
    while (!stop_requested && getppid() == server_pid) {
        struct pollfd p = {.fd = listen_fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        connection *c = malloc(sizeof *c);
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (c) {
            *c = (connection){fd, pool};
            pthread_mutex_lock(&live_lock);
            live_connections++;
            pthread_mutex_unlock(&live_lock);
            if (pthread_create(&thread, &attr, connection_main, c) != 0) {
                pthread_mutex_lock(&live_lock);
                live_connections--;
                pthread_mutex_unlock(&live_lock);
                free(c);
                c = NULL;
            }
        }
        pthread_attr_destroy(&attr);
        if (!c) {
            send_error(fd, "runner overloaded");
            close(fd);
        }
    }
}

/* Cancel every request and wait (briefly) for the connection threads; true if all left. */
static bool drain_connections(slot_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    for (size_t i = 0; i < pool->n_slots; i++)
        pool->slots[i].cancelled = pool->slots[i].busy;
    pthread_cond_signal(&pool->work);
    pthread_mutex_unlock(&pool->lock);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 3;
    pthread_mutex_lock(&live_lock);
    while (live_connections > 0 &&
           pthread_cond_timedwait(&live_changed, &live_lock, &deadline) == 0)
        ;
    bool drained = live_connections == 0;
    pthread_mutex_unlock(&live_lock);
    return drained;
}

static bool parse_u32(const char *text, uint32_t *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || end == text || v < 1 || v > (1l << 24))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool parse_args(int argc, char **argv, runner_options *o)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        uint32_t n = 0;
        bool ok = true;
        if (strcmp(flag, "--model") == 0)
            o->model_path = value;
        else if (strcmp(flag, "--socket") == 0)
            o->socket_path = value;
        else if (strcmp(flag, "--draft-model") == 0)
            o->draft_path = value;
        else if (strcmp(flag, "--mmproj") == 0)
            o->mmproj_path = value;
        else if (strcmp(flag, "--lora") == 0 && o->n_loras < MAX_LORAS)
            o->loras[o->n_loras++] = value;
        else if (strcmp(flag, "--kv") == 0 && corral_kv_type_parse(value, &o->kv_type))
            continue;
        else if (strcmp(flag, "--draft-by") == 0 && strcmp(value, "costs") == 0)
            o->draft_by_acceptance = false;
        else if (strcmp(flag, "--draft-by") == 0 && strcmp(value, "acceptance") == 0)
            o->draft_by_acceptance = true;
        else if (strcmp(flag, "--draft") == 0 && strcmp(value, "0") == 0)
            o->max_draft = 0;
        else if (strcmp(flag, "--draft") == 0 && parse_u32(value, &n) && n <= SLOT_MAX_DRAFT)
            o->max_draft = n;
        else if ((ok = parse_u32(value, &n)) && strcmp(flag, "--ctx") == 0)
            o->n_ctx = n;
        else if (ok && strcmp(flag, "--batch") == 0)
            o->n_batch = n;
        else if (ok && strcmp(flag, "--parallel") == 0)
            o->n_parallel = n;
        else if (ok && strcmp(flag, "--threads") == 0)
            o->n_threads = (int)n;
        else if (strcmp(flag, "--gpu-layers") == 0 && strcmp(value, "-1") == 0)
            o->gpu_layers = -1;
        else if (ok && strcmp(flag, "--gpu-layers") == 0 && n <= 100000)
            o->gpu_layers = (int)n;
        else {
            log_printf(LOG_ERROR, "bad argument %s %s", flag, value);
            return false;
        }
    }
    if (argc % 2 == 0 || !o->model_path || !o->socket_path) {
        fprintf(stderr, "Usage: corral runner --model PATH --socket PATH [--lora PATH]... "
                        "[--ctx N] [--batch N] [--parallel N] [--threads N] "
                        "[--kv f16|f32|q8_0|q4_0] [--draft 0-%d] [--draft-model PATH] "
                        "[--draft-by costs|acceptance] [--gpu-layers N] [--mmproj PATH]\n",
                SLOT_MAX_DRAFT);
        return false;
    }
    return true;
}

/* As ollama does, a model that cannot take a quantized cache gets an F16 one instead. */
static corral_context *create_context(const corral_model *model, corral_context_params *cp,
                                      corral_error *err)
{
    corral_context *ctx = corral_context_create(model, cp, err);
    if (ctx || (cp->kv_type != CORRAL_KV_Q8_0 && cp->kv_type != CORRAL_KV_Q4_0))
        return ctx;
    log_printf(LOG_WARN, "%s; using an F16 KV cache", err->message);
    cp->kv_type = CORRAL_KV_F16;
    return corral_context_create(model, cp, err);
}

int runner_main(int argc, char **argv)
{
    /* JSON lines, which the server reads back into its own log with their levels and
     * fields (src/server/sched/runner_log.c) */
    log_configure(LOG_FORMAT_JSON, false);
    runner_options o = {.n_ctx = 4096, .n_batch = 512, .n_parallel = 1, .max_draft = 8};
    if (!parse_args(argc, argv, &o))
        return 2;
    pid_t server_pid = getppid(); /* never outlive it: see serve() */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    corral_error err;
    corral_model *model = corral_model_load(o.model_path, &err);
    if (!model) {
        log_printf(LOG_ERROR, "%s", err.message);
        return 1;
    }
    for (size_t i = 0; i < o.n_loras; i++)
        if (!corral_model_add_lora(model, o.loras[i], 1.0f, &err)) {
            log_printf(LOG_ERROR, "%s", err.message);
            corral_model_free(model);
            return 1;
        }
    prompt_vision *vision = prompt_vision_create(o.mmproj_path, o.model_path, model,
                                                 o.n_threads, &err);
    if (!vision && err.message[0]) {
        log_printf(LOG_ERROR, "%s: %s", o.mmproj_path ? o.mmproj_path : o.model_path,
                   err.message);
        corral_model_free(model);
        return 1;
    }
    if (prompt_vision_takes_audio(vision))
        log_printf(LOG_INFO, "audio tower loaded: clips up to %g seconds",
                   AUDIO_MAX_CLIP_SECONDS);
    else if (prompt_vision_audio_error(vision))
        log_printf(LOG_WARN, "the model file's audio tower is not used, audio is refused: %s",
                   prompt_vision_audio_error(vision));
    corral_context_params cp;
    corral_context_params_init(&cp);
    cp.n_ctx = o.n_ctx < corral_model_n_ctx_train(model) ? o.n_ctx : corral_model_n_ctx_train(model);
    cp.n_batch = o.n_batch;
    /* An image whose tokens see each other both ways goes through one batch: the context's
     * batch grows to the largest image (text batches keep num_batch), up to the context,
     * which an image larger than that cannot enter anyway. */
    uint32_t image_batch = vision ? prompt_vision_batch_tokens(vision, model) : 0;
    if (image_batch > cp.n_batch)
        cp.n_batch = image_batch < cp.n_ctx ? image_batch : cp.n_ctx;
    cp.n_seq = o.n_parallel;
    cp.n_threads = o.n_threads;
    cp.kv_type = o.kv_type;
    cp.n_gpu_layers = o.gpu_layers;
    cp.images = vision != NULL;
    /* a recurrent model that speculates keeps its states before each draft's batch */
    cp.step_checkpoints = o.max_draft > 0 || o.draft_path != NULL;
    /* a tower that runs on a GPU goes there when the context's layers do: their fitting
     * leaves it room */
    uint64_t tower_bytes = 0, audio_bytes = 0;
    corral_error tower_err = {0}, audio_err = {0};
    bool tower_gpu = vision && o.gpu_layers != 0 &&
                     prompt_vision_gpu_bytes(vision, cp.gpu_device, &tower_bytes, &tower_err);
    bool audio_gpu = vision && o.gpu_layers != 0 &&
                     prompt_vision_audio_gpu_bytes(vision, cp.gpu_device, &audio_bytes,
                                                   &audio_err);
    cp.gpu_reserve_bytes = (tower_gpu ? tower_bytes : 0) + (audio_gpu ? audio_bytes : 0);
    corral_context *ctx = create_context(model, &cp, &err);
    if (!ctx) {
        log_printf(LOG_ERROR, "%s", err.message);
        prompt_vision_free(vision);
        corral_model_free(model);
        return 1;
    }
    if (tower_gpu && corral_context_gpu_layers(ctx) > 0) {
        if (prompt_vision_use_gpu(vision, cp.gpu_device, &tower_err))
            log_printf(LOG_INFO, "vision tower's blocks on %s (%llu MiB)",
                       corral_context_gpu_device(ctx),
                       (unsigned long long)(tower_bytes >> 20));
        else
            log_printf(LOG_WARN, "the vision tower runs on the CPU: %s", tower_err.message);
    }
    if (audio_gpu && corral_context_gpu_layers(ctx) > 0) {
        if (prompt_vision_audio_use_gpu(vision, cp.gpu_device, &audio_err))
            log_printf(LOG_INFO, "audio tower's blocks on %s (%llu MiB)",
                       corral_context_gpu_device(ctx),
                       (unsigned long long)(audio_bytes >> 20));
        else
            log_printf(LOG_WARN, "the audio tower runs on the CPU: %s", audio_err.message);
    }
    if (corral_context_recurrent(ctx))
        /* a recurrent state cannot be shifted, and is cut back only to a checkpoint */
        log_printf(LOG_INFO, "%s keeps a recurrent state per sequence: no context shift (a full "
                   "context ends the answer); a cached prompt is reused when the new one "
                   "continues all of it or from the state kept %d tokens before the last "
                   "prompt's end%s",
                   corral_model_arch(model), SLOT_CHECKPOINT_TAIL,
                   cp.step_checkpoints ? "; a partly rejected draft goes back to the state "
                                         "kept before its step and re-feeds what was accepted"
                                       : "");
    draft_model *draft = NULL;
    if (o.draft_path) {
        draft = draft_model_create(o.draft_path, corral_context_n_ctx(ctx), o.n_parallel,
                                   o.n_batch, o.n_threads, &err);
        if (!draft || !draft_model_vocab_matches(model, draft_model_model(draft), &err)) {
            log_printf(LOG_ERROR, "%s", err.message);
            draft_model_free(draft);
            corral_context_free(ctx);
            prompt_vision_free(vision);
            corral_model_free(model);
            return 1;
        }
    }
    slot_pool pool;
    int status = 1;
    bool pool_ok = slot_pool_create(&pool, model, ctx, o.n_parallel, o.n_batch, o.max_draft,
                                    draft, &err);
    if (!pool_ok)
        log_printf(LOG_ERROR, "%s", err.message);
    else {
        pool.vision = vision;
        pool.draft_by_acceptance = o.draft_by_acceptance;
    }
    int fd = pool_ok ? listen_unix(o.socket_path) : -1;
    if (fd >= 0) {
        serve(fd, &pool, server_pid);
        close(fd);
        unlink(o.socket_path);
        status = 0;
    }
    /* A connection stuck past the deadline still uses the pool: then leave it to exit. */
    if (!pool_ok || drain_connections(&pool)) {
        slot_pool_free(&pool);
        prompt_vision_free(vision);
        draft_model_free(draft);
        corral_context_free(ctx);
        corral_model_free(model);
        corral_gpu_release();
    }
    return status;
}
