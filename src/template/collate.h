/*
 * The messages as ollama hands them to a chat template: consecutive messages of one role
 * (tool results excepted) merged into one, their contents joined by a blank line, and every
 * system message's content joined the same way into one system text. The Go-template
 * renderer (chat.c) and the harmony prompt (harmony_render.c) both start from it.
 */
#ifndef CORRAL_TEMPLATE_COLLATE_H
#define CORRAL_TEMPLATE_COLLATE_H

#include <jansson.h>

#include "template/tbuf.h"

/* The collated copy of messages (a new array; entries that are not objects left out), the
 * system contents appended to *system (whose max_bytes bounds each merged content too).
 * NULL when memory or that bound runs out. */
json_t *collate_messages(const json_t *messages, tbuf *system);

#endif
