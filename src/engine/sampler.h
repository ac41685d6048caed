/*
 * What tests read of a corral_sampler beyond the public API (corral/engine.h): the
 * candidates of its last draw with a temperature, to compare two ways of drawing, and a
 * switch to the masked row's way.
 */
#ifndef CORRAL_ENGINE_SAMPLER_H
#define CORRAL_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/engine.h"

/* The last draw's candidates, best first, as the draw saw them (logits divided by the
 * temperature, p their softmax): at most max of them written, their count returned. */
size_t sampler_last_candidates(const corral_sampler *sampler, corral_token *ids, float *logits,
                               float *p, size_t max);

/* For tests: under a grammar, draw each step the grammar does not list from the masked row
 * written out (write true), the definition the draw through the mask's bits keeps to. */
void sampler_write_masked_rows(corral_sampler *sampler, bool write);

#endif
