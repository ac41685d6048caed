/*
 * The one request the generation core takes, whatever API it came through: a chat (messages)
 * or a completion (prompt, suffix), with the fields every dialect maps onto it. Each dialect
 * parses its own JSON into this (api/); the core validates it once against the model and
 * renders it. JSON stays JSON where it is data by nature: tool schemas, a format's schema,
 * the options map, a tool call's arguments and a generate request's context token ids.
 */
#ifndef CORRAL_SERVER_CORE_CHAT_REQUEST_H
#define CORRAL_SERVER_CORE_CHAT_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* think: unset (the model's default), off, on, or a level. */
typedef enum chat_think {
    CHAT_THINK_UNSET,
    CHAT_THINK_OFF,
    CHAT_THINK_ON,
    CHAT_THINK_LOW,
    CHAT_THINK_MEDIUM,
    CHAT_THINK_HIGH,
    CHAT_THINK_MAX,
} chat_think;

/* tool_choice as the core sees it: left to the model ("auto"; "none" withholds the tools
 * instead), or forced: one call of any tool ("required", Anthropic's "any"), or of the one
 * named. */
typedef enum chat_tool_choice {
    CHAT_TOOL_CHOICE_AUTO,
    CHAT_TOOL_CHOICE_REQUIRED,
    CHAT_TOOL_CHOICE_NAMED,
} chat_tool_choice;

/* An image as the client gave it: base64 text, not yet decoded. */
typedef struct chat_image {
    char *base64;
    size_t len;
} chat_image;

typedef struct chat_tool_call {
    char *id;           /* NULL: none given */
    char *name;
    json_t *arguments;  /* an object; NULL: none given */
    int64_t index;      /* < 0: none given */
} chat_tool_call;

typedef struct chat_message {
    char *role;         /* "system", "user", "assistant", "tool", ... (never NULL) */
    char *content;      /* never NULL */
    char *thinking;     /* NULL: none */
    char *tool_name;    /* a tool result's function; NULL: none */
    char *tool_call_id; /* the call a tool result answers; NULL: none */
    chat_tool_call *tool_calls;
    size_t n_tool_calls;
    chat_image *images;
    size_t n_images;
} chat_message;

typedef struct chat_request {
    bool chat; /* messages (/api/chat's form) or prompt (/api/generate's) */
    char *model; /* NULL or "": missing (the core answers 400) */
    chat_message *messages;
    size_t n_messages, messages_cap;
    /* completion only */
    char *prompt, *suffix;
    char *system;        /* overrides the model's SYSTEM */
    char *template_text; /* overrides the model's template */
    bool raw;            /* the prompt goes to the model as it is */
    json_t *context;     /* token ids of an earlier answer (an array); NULL: none */
    chat_image *images;
    size_t n_images;
    /* both */
    json_t *tools;   /* an array of {"type": "function", "function": {...}}; NULL: none */
    chat_tool_choice tool_choice;
    char *tool_choice_name; /* CHAT_TOOL_CHOICE_NAMED's function; NULL otherwise */
    chat_think think;
    json_t *format;  /* "json" or a JSON schema; NULL: free text */
    json_t *options; /* an object; NULL: none */
    bool stream;
    bool has_keep_alive;
    int64_t keep_alive_ns; /* < 0: forever */
    bool logprobs;
    int top_logprobs;
    bool truncate, shift;
    bool debug_render_only; /* answer the rendered prompt instead of generating */
    bool count_only;        /* answer the rendered prompt's size in tokens (shape->counted) */
} chat_request;

/* An empty request (stream, truncate and shift on, as the APIs default); NULL: out of memory. */
chat_request *chat_request_create(bool chat);
void chat_request_free(chat_request *req);

/* ---- building one: for a dialect that reads its JSON straight into the request ---- */

/* A role as the templates compare it: lowercased in place ("User" is "user"), as ollama
 * reads every message's role. */
void chat_role_normalize(char *role);
/* Move *m (its role and content set; NULL ones become "") to the end of req's messages, its
 * role normalized; *m is left empty. False when out of memory (then *m is still the
 * caller's). */
bool chat_request_push_message(chat_request *req, chat_message *m);
/* A message of role with content, appended; false when out of memory. */
bool chat_request_add_text(chat_request *req, const char *role, const char *content,
                           size_t content_len);
/* A call appended to m's tool calls, its index its position; arguments (an object) is
 * referenced, id may be NULL. False when out of memory. */
bool chat_message_add_tool_call(chat_message *m, const char *id, const char *name,
                                json_t *arguments);
/* tools as the templates read them: an array of {"function": {"name", "parameters": {...}}}
 * (parameters may be absent or null). False with the 400's message. */
bool chat_request_check_tools(const json_t *tools, char *message, size_t size);
/* An image's base64 (len bytes, checked later) appended to m's images; false when out of
 * memory. */
bool chat_message_add_image(chat_message *m, const char *base64, size_t len);
/* text[0..n) appended to m's content, after sep where the content is not empty; *len is the
 * content's length, kept by the caller (a message of many parts is not measured again for
 * each). False when out of memory (the content is then as it was). */
bool chat_message_append_text(chat_message *m, size_t *len, const char *sep, const char *text,
                              size_t n);
/* Free what m holds and leave it empty. */
void chat_message_clear(chat_message *m);

/* A level's name ("low", "medium", "high", "max"); NULL for unset, off and on. */
const char *chat_think_name(chat_think think);
/* The think value as the APIs write it: NULL (unset), false, true or the level's name. */
json_t *chat_think_json(chat_think think);

/*
 * What the prompt templates read of the request, as the JSON they take: messages (a chat's),
 * prompt, suffix, system, template, context (a completion's), tools and think. A new
 * reference; NULL when out of memory.
 */
json_t *chat_request_template_input(const chat_request *req);

#endif
