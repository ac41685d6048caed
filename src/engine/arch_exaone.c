/*
 * exaone (EXAONE 3.0 and 3.5, EXAONE Deep): the llama block with NeoX RoPE and optional
 * Llama-3 rope_freqs; the output is tied to token_embd when output.weight is absent (the 2.4B
 * models). EXAONE 4.0 is another architecture (arch_exaone4.c).
 */
#include "forward.h"

const model_arch arch_exaone = {
    .name = "exaone",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .layer = layer_pre_norm,
};
