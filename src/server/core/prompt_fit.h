/*
 * Fitting a chat's history to the context, as ollama's `truncate` does: a prompt longer than
 * the context loses whole messages, oldest first; every system message and the last message
 * stay, and the longest suffix of the history that fits is kept. A message's images go with
 * it: the caller's count includes each image's tokens, and a dropped message's image markers
 * are not in the prompt, so image_input_extract leaves its images out of what the runner gets.
 */
#ifndef CORRAL_SERVER_CORE_PROMPT_FIT_H
#define CORRAL_SERVER_CORE_PROMPT_FIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/core/prompt.h"

/* The tokens the runner makes of a rendered prompt (its images' included); false with err. */
typedef bool (*prompt_counter)(void *state, const char *prompt, size_t *n_tokens,
                               corral_error *err);

/*
 * *prompt is input (a chat's template input) rendered with window->first 0. When it counts
 * more than limit tokens it is replaced by the render of the longest suffix that fits, or of
 * the last message (with the system messages) when none does: whether that one may go is the
 * caller's call. window says which messages were dropped. A longer suffix never renders a
 * shorter prompt (it only adds messages and their images), so "the suffix from message i
 * fits" is monotone in i and a binary search finds the first such i in O(log n) counts.
 * false with err when a render or a count fails (*prompt is then as it was).
 */
bool prompt_fit(const model_ref *ref, const json_t *input, prompt_window *window, size_t limit,
                prompt_counter count, void *state, char **prompt, corral_error *err);

#endif
