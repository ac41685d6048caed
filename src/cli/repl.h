/*
 * The interactive chat of `corral run` (libedit): the session state a conversation carries
 * (model, /set parameters, system, format, think, messages) and the read-chat loop with the
 * slash commands, `"""` multi-line input, history file and Ctrl-C / Ctrl-D handling.
 */
#ifndef CORRAL_CLI_REPL_H
#define CORRAL_CLI_REPL_H

#include <jansson.h>

#include "cli/client.h"
#include "cli/generate.h"

typedef struct run_session {
    corral_client *client;
    char model[512];
    json_t *options;      /* /set parameter values; an object */
    char *system;         /* /set system; NULL: the model's own */
    json_t *format;       /* NULL, "json", or a JSON schema (an object) */
    json_t *think;        /* NULL (the server decides), true/false, or a level string */
    char keep_alive[32];  /* "" or a duration */
    generate_display display;
    json_t *messages;     /* the conversation, without the system message */
    bool media;           /* the model sees images or hears audio: their paths in prompts are
                           * attached */
} run_session;

/*
 * Load the model, print its stored messages (from show_reply, its /api/show reply) as a
 * transcript, then run the REPL until /bye or Ctrl-D; returns the exit status.
 */
int repl_run(run_session *session, const json_t *show_reply);

#endif
