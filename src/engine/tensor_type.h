/*
 * Tensor element types: ggml's type ids and their block geometry (elements and bytes per
 * block). This table is what the GGUF reader validates shapes against; the arithmetic on
 * each type (dequantize, quantize, dot products) lives in quant.h.
 */
#ifndef CORRAL_ENGINE_TENSOR_TYPE_H
#define CORRAL_ENGINE_TENSOR_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ids are ggml's and appear in GGUF files; never renumber. */
enum tensor_type {
    TENSOR_TYPE_F32 = 0,
    TENSOR_TYPE_F16 = 1,
    TENSOR_TYPE_Q4_0 = 2,
    TENSOR_TYPE_Q4_1 = 3,
    /* ggml's removed Q4_2 slot, which ollama's first gpt-oss converter used for MXFP4: the
     * 17-byte blocks of type 39 (E8M0 scale, 16 bytes of E2M1 pairs), but byte k holds
     * elements 2k (low nibble) and 2k + 1 instead of k and k + 16. No kernels: the loader
     * reorders it into type 39 (arch_gptoss.c). */
    TENSOR_TYPE_MXFP4_OLLAMA = 4,
    TENSOR_TYPE_Q5_0 = 6,
    TENSOR_TYPE_Q5_1 = 7,
    TENSOR_TYPE_Q8_0 = 8,
    TENSOR_TYPE_Q8_1 = 9,
    TENSOR_TYPE_Q2_K = 10,
    TENSOR_TYPE_Q3_K = 11,
    TENSOR_TYPE_Q4_K = 12,
    TENSOR_TYPE_Q5_K = 13,
    TENSOR_TYPE_Q6_K = 14,
    TENSOR_TYPE_Q8_K = 15,
    TENSOR_TYPE_IQ2_XXS = 16,
    TENSOR_TYPE_IQ2_XS = 17,
    TENSOR_TYPE_IQ3_XXS = 18,
    TENSOR_TYPE_IQ1_S = 19,
    TENSOR_TYPE_IQ4_NL = 20,
    TENSOR_TYPE_IQ3_S = 21,
    TENSOR_TYPE_IQ2_S = 22,
    TENSOR_TYPE_IQ4_XS = 23,
    TENSOR_TYPE_I8 = 24,
    TENSOR_TYPE_I16 = 25,
    TENSOR_TYPE_I32 = 26,
    TENSOR_TYPE_I64 = 27,
    TENSOR_TYPE_F64 = 28,
    TENSOR_TYPE_IQ1_M = 29,
    TENSOR_TYPE_BF16 = 30,
    TENSOR_TYPE_TQ1_0 = 34,
    TENSOR_TYPE_TQ2_0 = 35,
    TENSOR_TYPE_MXFP4 = 39,
    TENSOR_TYPE_ID_LIMIT = 40, /* ids >= this are unknown */
};

typedef struct tensor_type_info {
    const char *name;     /* ggml's lowercase name, e.g. "q4_K" */
    uint32_t block_elems; /* elements per block; 1 for plain types */
    uint32_t block_bytes; /* bytes per block */
} tensor_type_info;

/* Geometry of type id, or NULL when the id is unknown or was removed from ggml. */
const tensor_type_info *tensor_type_get(uint32_t id);

/* Name of a type id for messages ("type 4" style text for unknown ids is the caller's job). */
const char *tensor_type_name(uint32_t id);

/* Id for a ggml name (case-insensitive), or -1. */
int tensor_type_from_name(const char *name);

/*
 * Bytes of a row of n_elems elements of type id. False when the type is unknown, n_elems is
 * not a whole number of blocks, or the size overflows.
 */
bool tensor_type_row_bytes(uint32_t id, uint64_t n_elems, size_t *out);

#endif
