/*
 * LoRA adapters applied at run time: a GGUF adapter's low-rank pairs (A, B) are checked
 * against the model they are attached to and hung, as lora_terms, on the weights they adapt.
 * Every product with such a weight then adds scale * (alpha / r) * B (A x) per term; the
 * model's own weights are never copied or changed.
 */
#ifndef CORRAL_ENGINE_LORA_H
#define CORRAL_ENGINE_LORA_H

#include <stdbool.h>
#include <stddef.h>

#include "forward.h"

/* Ranks above this are refused: a term's A x lives on the task's stack. */
#define LORA_MAX_RANK 1024

/* One adapter's pair for one weight (or a row slice of a fused weight), as F32 copies (an
 * F16 adapter is widened once at load and computed in F32): a is rank rows of n_in, b n_out
 * rows of rank. */
typedef struct lora_term {
    const float *a, *b;
    size_t rank;
    float factor;      /* scale * alpha / rank, or scale when the adapter has no alpha */
    weight *target;    /* the weight it adapts (set while loading) */
    const struct lora_term *next; /* the next adapter's term on the same weight */
} lora_term;

/* y += the terms of every product's weight, for n_tokens rows of x (stride n_in). */
void lora_apply(corral_context *ctx, const matrix_product *products, size_t n_products,
                const float *x, size_t n_tokens);

/* Everything corral_model_add_lora attached to a model (for corral_model_free). */
void lora_free_all(corral_model *model);

#endif
