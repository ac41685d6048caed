/*
 * llama.cpp's quantization recipes (llama-quantize's file types) and its per-tensor type
 * choice (llama_tensor_get_type in the copy ollama vendors), in one place: the file
 * quantizer of corral/engine.h and bench/make_bench_model both decide tensor types here.
 * Not modelled: importance matrices, --pure, per-tensor overrides, the IQ and Q2/Q3 recipes.
 */
#ifndef CORRAL_ENGINE_QUANTIZE_MODEL_H
#define CORRAL_ENGINE_QUANTIZE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

typedef struct quant_recipe {
    const char *name;   /* "Q4_K_M" */
    uint32_t file_type; /* llama_ftype, written as general.file_type */
    uint32_t base_type; /* enum tensor_type most weights get */
} quant_recipe;

/* The recipe a level names, case-insensitively ("Q4_K" and "Q5_K" mean the _M recipes, as
 * in llama-quantize), or NULL. */
const quant_recipe *quant_recipe_find(const char *name);

/* What the rules need to know of the model (from its GGUF metadata). */
typedef struct quant_model_desc {
    const char *arch;   /* general.architecture */
    uint32_t n_layer;   /* <arch>.block_count */
    uint32_t n_head, n_head_kv; /* only consulted for llama.cpp's 70B rule */
    uint32_t n_expert;  /* <arch>.expert_count, 0 when absent */
} quant_model_desc;

typedef struct quant_tensor_desc {
    const char *name;
    uint32_t type;      /* its type now: a tensor the recipe leaves alone keeps it */
    int64_t ne[4];      /* dimensions not stored are 1 */
} quant_tensor_desc;

/*
 * The type llama.cpp gives each of n tensors under recipe (types[i] for tensors[i]). Order
 * matters to llama.cpp (it counts attn_v and ffn_down tensors as it goes), so they are visited
 * in llama.cpp's order whatever the order given: tensors outside the blocks first, then by
 * block number, then by name. A row length the chosen type's blocks do not divide falls back
 * as in llama.cpp, to F16 at last. False with err when llama.cpp would refuse too: an expert
 * tensor outside the layers.
 */
bool quant_choose_types(const quant_recipe *recipe, const quant_model_desc *model,
                        const quant_tensor_desc *tensors, size_t n, uint32_t *types,
                        corral_error *err);

#endif
