/*
 * llama (also Mistral, SmolLM and other llama-shaped models): grouped-query attention,
 * RoPE on adjacent pairs, optional Llama-3 rope_freqs, output tied to token_embd when
 * output.weight is absent. The reference pre-norm block every other family differs from.
 */
#include "forward.h"

const model_arch arch_llama = {
    .name = "llama",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .layer = layer_pre_norm,
};
