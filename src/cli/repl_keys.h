/*
 * The REPL's keys beyond libedit's own: a bracketed paste of several lines becomes one message,
 * and Ctrl-G edits the prompt in an editor. Both hold the whole lines they produce (shown under
 * "... ") while the last line stays in libedit's buffer; the REPL puts the held lines in front
 * of the line it reads next.
 */
#ifndef CORRAL_CLI_REPL_KEYS_H
#define CORRAL_CLI_REPL_KEYS_H

#include <histedit.h>
#include <stdbool.h>
#include <stddef.h>

#define REPL_MAX_INPUT_BYTES (16u << 20) /* one turn's text, typed, pasted or edited */

/* What the REPL and its key functions share; libedit's EL_CLIENTDATA points at it. */
typedef struct repl_line {
    bool continuing; /* inside a """ block */
    char *held;      /* whole lines waiting in front of the edited one ("\n"-ended), or NULL */
} repl_line;

/* ">>> ", or "... " inside a block or while lines are held. */
const char *repl_line_prompt(const repl_line *line);

/* Bind the keys on el (its EL_CLIENTDATA a repl_line) and, on a terminal, have pastes marked. */
void repl_keys_bind(EditLine *el);

/* Pastes unmarked again, as the terminal was. */
void repl_keys_unbind(void);

/* Append n bytes to *text (*len long, NUL-ended), up to REPL_MAX_INPUT_BYTES; false when they
 * would not fit or memory ran out. */
bool repl_append_bytes(char **text, size_t *len, const char *bytes, size_t n);

#endif
