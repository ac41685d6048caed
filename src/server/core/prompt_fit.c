/*
 * A chat's history fitted to the context (prompt_fit.h).
 */
#include "server/core/prompt_fit.h"

#include <stdlib.h>

bool prompt_fit(const model_ref *ref, const json_t *input, prompt_window *window, size_t limit,
                prompt_counter count, void *state, char **prompt, corral_error *err)
{
    size_t n_tokens;
    if (!count(state, *prompt, &n_tokens, err))
        return false;
    if (n_tokens <= limit || window->n_messages < 2)
        return true;
    corral_output_tags tags;
    size_t lo = 1, hi = window->n_messages - 1; /* the smallest first that fits is in [lo, hi] */
    while (lo < hi) {
        window->first = lo + (hi - lo) / 2;
        char *text = prompt_build(ref, input, true, window, &tags, err);
        bool counted = text && count(state, text, &n_tokens, err);
        free(text);
        if (!counted) {
            window->first = 0;
            return false;
        }
        if (n_tokens <= limit)
            hi = window->first;
        else
            lo = window->first + 1;
    }
    window->first = hi;
    char *text = prompt_build(ref, input, true, window, &tags, err);
    if (!text) {
        window->first = 0;
        return false;
    }
    free(*prompt);
    *prompt = text;
    return true;
}
