/*
 * The harmony answer -> thinking, content and tool calls (harmony.h), on a stream whose
 * chunks may split anywhere, tags included. The parser is always inside one of three places:
 * between messages (text there is not the model's to say and is dropped), in a header (held
 * until "<|message|>" ends it: the channel and recipient decide where the message's text
 * goes), or in a message's text, which flows out as it comes except for a tail that could
 * still become an end tag. The analysis channel is thinking; a message to a recipient
 * (to=functions.NAME) is a call, whose JSON arguments are held until the message ends
 * (<|call|>, or the answer ends, since <|call|> stops generation); anything else is content.
 */
#include <stdlib.h>
#include <string.h>

#include "template/harmony.h"
#include "template/tbuf.h"

typedef enum harmony_place {
    HARMONY_BETWEEN,
    HARMONY_HEADER,
    HARMONY_TEXT,
} harmony_place;

typedef enum harmony_sink {
    HARMONY_TO_CONTENT,
    HARMONY_TO_THINKING,
    HARMONY_TO_CALL,
} harmony_sink;

struct harmony_parser {
    harmony_place place;
    harmony_sink sink;
    tbuf pending;   /* bytes not yet decided: a header, or a tail that may be a tag */
    size_t scanned; /* of a header in pending, the bytes known to hold no "<|message|>" */
    bool header_lost; /* the header outgrew HARMONY_MAX_HEADER_BYTES and was dropped */
    tbuf recipient; /* the open call's function as the prompt named it */
    tbuf arguments; /* the open call's text */
    tbuf content, thinking;
    json_t *calls;  /* completed in the current feed */
    size_t n_calls; /* all so far, for "index" */
    json_t *tools;  /* the request's tools and their prompt names, to map calls back */
    json_t *names;
    size_t max_bytes;
};

/* Longest header kept: real ones are a few words. A longer one is not harmony; its bytes are
 * dropped as they come, so a model that never ends its header holds no more than this. */
#define HARMONY_MAX_HEADER_BYTES 4096u

static const char START[] = "<|start|>", MESSAGE[] = "<|message|>", CHANNEL[] = "<|channel|>";
/* A message's text ends at any of these: <|call|> and <|return|> end the turn as well. */
static const char *const ENDS[] = {"<|end|>", "<|call|>", "<|return|>"};

static void consume(tbuf *b, size_t n)
{
    if (n == 0)
        return;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

static const char *find(const tbuf *b, const char *tag)
{
    return b->len ? memmem(b->data, b->len, tag, strlen(tag)) : NULL;
}

/* Length of the longest tail of b that is a proper prefix of tag. */
static size_t partial(const tbuf *b, const char *tag)
{
    size_t t = strlen(tag);
    for (size_t k = t - 1 < b->len ? t - 1 : b->len; k > 0; k--)
        if (memcmp(b->data + b->len - k, tag, k) == 0)
            return k;
    return 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The header's words: where its text goes, and to whom a call is addressed. The channel
 * follows "<|channel|>"; the recipient is a "to=" word before or after it; "<|constrain|>"
 * (the arguments' format) may stick to the word before it. */
static bool read_header(harmony_parser *p, const char *h, size_t n)
{
    const char *channel = NULL, *to = NULL;
    size_t channel_len = 0, to_len = 0;
    for (size_t i = 0; i < n;) {
        if (is_space(h[i])) {
            i++;
            continue;
        }
        size_t start = i;
        bool is_channel = n - i >= strlen(CHANNEL) && memcmp(h + i, CHANNEL, strlen(CHANNEL)) == 0;
        if (is_channel)
            start = i += strlen(CHANNEL);
        while (i < n && !is_space(h[i]) && (i == start || h[i] != '<'))
            i++;
        if (is_channel && !channel) {
            channel = h + start;
            channel_len = i - start;
        } else if (!to && i - start > 3 && memcmp(h + start, "to=", 3) == 0) {
            to = h + start + 3;
            to_len = i - start - 3;
        }
    }
    p->sink = HARMONY_TO_CONTENT;
    if (to && (!channel || (channel_len == 10 && memcmp(channel, "commentary", 10) == 0) ||
               (channel_len == 8 && memcmp(channel, "analysis", 8) == 0))) {
        p->sink = HARMONY_TO_CALL;
        p->recipient.len = p->arguments.len = 0;
        return tbuf_append(&p->recipient, to, to_len);
    }
    if (channel && channel_len == 8 && memcmp(channel, "analysis", 8) == 0)
        p->sink = HARMONY_TO_THINKING;
    return true;
}

/* The user's name for a recipient: "functions." off, a rewritten tool name mapped back. */
static const char *call_name(const harmony_parser *p, const char *recipient)
{
    if (strncmp(recipient, "functions.", 10) == 0)
        recipient += 10;
    size_t i;
    json_t *name;
    json_array_foreach(p->names, i, name)
        if (strcmp(json_string_value(name), recipient) == 0)
            return json_string_value(
                json_object_get(json_object_get(json_array_get(p->tools, i), "function"), "name"));
    return recipient;
}

/* The open call is complete: a call when its arguments are a JSON object (or nothing, for a
 * function without parameters), else its text is given back as content. */
static bool finish_call(harmony_parser *p)
{
    const char *text = p->arguments.data ? p->arguments.data : "";
    size_t len = p->arguments.len, skip = 0;
    while (skip < len && is_space(text[skip]))
        skip++;
    json_t *arguments = skip == len ? json_object()
                                    : json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!json_is_object(arguments)) {
        json_decref(arguments);
        return tbuf_append(&p->content, text, len);
    }
    json_t *call = json_pack("{s:{s:I,s:s,s:o}}", "function", "index", (json_int_t)p->n_calls,
                             "name", call_name(p, p->recipient.data ? p->recipient.data : ""),
                             "arguments", arguments);
    if (!call || json_array_append_new(p->calls, call) != 0)
        return false;
    p->n_calls++;
    return true;
}

/* n bytes of the message's text, to where its header sends them. */
static bool deliver(harmony_parser *p, const char *text, size_t n)
{
    tbuf *to = p->sink == HARMONY_TO_THINKING ? &p->thinking
               : p->sink == HARMONY_TO_CALL   ? &p->arguments
                                              : &p->content;
    return tbuf_append(to, text, n);
}

/* The message ends: a call is complete. */
static bool end_message(harmony_parser *p)
{
    bool ok = p->sink != HARMONY_TO_CALL || finish_call(p);
    p->place = HARMONY_BETWEEN;
    p->sink = HARMONY_TO_CONTENT;
    return ok;
}

/* One step on pending; *more when another could follow at once. */
static bool step(harmony_parser *p, bool final, bool *more)
{
    *more = false;
    tbuf *b = &p->pending;
    if (p->place == HARMONY_BETWEEN) {
        const char *at = find(b, START);
        if (!at) { /* keep only what could begin a start tag */
            consume(b, b->len - partial(b, START));
            return true;
        }
        consume(b, (size_t)(at - b->data) + strlen(START));
        p->place = HARMONY_HEADER;
        *more = true;
        return true;
    }
    if (p->place == HARMONY_HEADER) {
        /* only the new bytes are searched, with room for a tag that began before them */
        size_t from = p->scanned > strlen(MESSAGE) ? p->scanned - strlen(MESSAGE) : 0;
        const char *at = b->len > from ? memmem(b->data + from, b->len - from, MESSAGE,
                                                strlen(MESSAGE))
                                       : NULL;
        if (!at) { /* a header never ended says nothing */
            if (b->len > HARMONY_MAX_HEADER_BYTES) {
                consume(b, b->len - partial(b, MESSAGE));
                p->header_lost = true;
            }
            p->scanned = b->len;
            return true;
        }
        size_t n = (size_t)(at - b->data);
        if (p->header_lost)
            p->sink = HARMONY_TO_CONTENT;
        else if (!read_header(p, b->data, n))
            return false;
        consume(b, n + strlen(MESSAGE));
        p->place = HARMONY_TEXT;
        p->scanned = 0;
        p->header_lost = false;
        *more = true;
        return true;
    }
    size_t end = b->len, end_len = 0;
    for (size_t i = 0; i < sizeof ENDS / sizeof ENDS[0]; i++) {
        const char *at = find(b, ENDS[i]);
        if (at && (size_t)(at - b->data) < end) {
            end = (size_t)(at - b->data);
            end_len = strlen(ENDS[i]);
        }
    }
    if (end_len) {
        if (!deliver(p, b->data, end) || !end_message(p))
            return false;
        consume(b, end + end_len);
        *more = true;
        return true;
    }
    size_t hold = 0;
    for (size_t i = 0; !final && i < sizeof ENDS / sizeof ENDS[0]; i++) {
        size_t k = partial(b, ENDS[i]);
        hold = k > hold ? k : hold;
    }
    if (!deliver(p, b->data, b->len - hold))
        return false;
    consume(b, b->len - hold);
    return !final || end_message(p);
}

harmony_parser *harmony_parser_create(const char *prompt, const json_t *tools, size_t max_bytes)
{
    harmony_parser *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->max_bytes = max_bytes;
    tbuf *bufs[] = {&p->pending, &p->recipient, &p->arguments, &p->content, &p->thinking};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tbuf_init(bufs[i], max_bytes);
    p->calls = json_array();
    p->tools = json_is_array(tools) ? json_incref((json_t *)tools) : json_array();
    p->names = harmony_tool_names(p->tools);
    /* Start where the prompt leaves off: its last message is the answer's beginning. */
    const char *open = NULL;
    for (const char *at = prompt; (at = strstr(at, START)); at++)
        open = at;
    corral_output_delta ignored;
    corral_error err;
    if (!p->calls || !p->tools || !p->names ||
        !harmony_parser_feed(p, open ? open : "<|start|>assistant",
                             strlen(open ? open : "<|start|>assistant"), false, &ignored, &err)) {
        harmony_parser_free(p);
        return NULL;
    }
    p->content.len = p->thinking.len = 0;
    return p;
}

void harmony_parser_free(harmony_parser *p)
{
    if (!p)
        return;
    tbuf *bufs[] = {&p->pending, &p->recipient, &p->arguments, &p->content, &p->thinking};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tbuf_free(bufs[i]);
    json_decref(p->calls);
    json_decref(p->tools);
    json_decref(p->names);
    free(p);
}

bool harmony_parser_feed(harmony_parser *p, const char *chunk, size_t n, bool final,
                         corral_output_delta *delta, corral_error *err)
{
    p->content.len = p->thinking.len = 0;
    json_array_clear(p->calls);
    bool ok = tbuf_append(&p->pending, chunk, n), more = true;
    while (ok && more)
        ok = step(p, final, &more);
    if (!ok) {
        corral_error_set(err, "model output: out of memory or more than %zu bytes held",
                         p->max_bytes);
        return false;
    }
    *delta = (corral_output_delta){.content = p->content.data ? p->content.data : "",
                                   .content_len = p->content.len,
                                   .thinking = p->thinking.data ? p->thinking.data : "",
                                   .thinking_len = p->thinking.len,
                                   .tool_calls = p->calls};
    return true;
}
