/*
 * One streamed generation (/api/generate or /api/chat) printed to stdout as it arrives:
 * thinking between "Thinking..." and "...done thinking.", word wrap at the terminal width,
 * Ctrl-C cancellation, and the timing statistics of the final chunk for --verbose.
 * Shared by one-shot `corral run` and the REPL.
 */
#ifndef CORRAL_CLI_GENERATE_H
#define CORRAL_CLI_GENERATE_H

#include <jansson.h>
#include <stdbool.h>

#include "cli/client.h"

typedef struct generate_display {
    bool word_wrap;     /* only honoured when stdout is a terminal */
    bool hide_thinking;
    bool verbose;       /* print timing statistics on stderr */
} generate_display;

typedef enum generate_result {
    GENERATE_DONE,
    GENERATE_CANCELLED, /* Ctrl-C: the transfer was closed */
    GENERATE_FAILED,    /* err says why */
} generate_result;

/*
 * POST request to path ("/api/generate" or "/api/chat") and print the reply. *reply_text (if
 * not NULL) receives the reply's content, malloc'ed, for a chat history.
 */
generate_result generate_print(corral_client *client, const char *path, const json_t *request,
                               const generate_display *display, char **reply_text,
                               corral_error *err);

/* The SIGINT handler that cancels the generation in progress. */
void generate_install_interrupt(void);

#endif
