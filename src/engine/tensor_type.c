/* The block geometry of every ggml type id. */
#include "tensor_type.h"

#include <strings.h>

#include "util/checked.h"

static const tensor_type_info type_table[TENSOR_TYPE_ID_LIMIT] = {
    [TENSOR_TYPE_F32] = {"f32", 1, 4},
    [TENSOR_TYPE_F16] = {"f16", 1, 2},
    [TENSOR_TYPE_Q4_0] = {"q4_0", 32, 18},
    [TENSOR_TYPE_Q4_1] = {"q4_1", 32, 20},
    [TENSOR_TYPE_MXFP4_OLLAMA] = {"mxfp4_ollama", 32, 17},
    [TENSOR_TYPE_Q5_0] = {"q5_0", 32, 22},
    [TENSOR_TYPE_Q5_1] = {"q5_1", 32, 24},
    [TENSOR_TYPE_Q8_0] = {"q8_0", 32, 34},
    [TENSOR_TYPE_Q8_1] = {"q8_1", 32, 36},
    [TENSOR_TYPE_Q2_K] = {"q2_K", 256, 84},
    [TENSOR_TYPE_Q3_K] = {"q3_K", 256, 110},
    [TENSOR_TYPE_Q4_K] = {"q4_K", 256, 144},
    [TENSOR_TYPE_Q5_K] = {"q5_K", 256, 176},
    [TENSOR_TYPE_Q6_K] = {"q6_K", 256, 210},
    [TENSOR_TYPE_Q8_K] = {"q8_K", 256, 292},
    [TENSOR_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [TENSOR_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [TENSOR_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [TENSOR_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [TENSOR_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [TENSOR_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [TENSOR_TYPE_IQ2_S] = {"iq2_s", 256, 82},
    [TENSOR_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [TENSOR_TYPE_I8] = {"i8", 1, 1},
    [TENSOR_TYPE_I16] = {"i16", 1, 2},
    [TENSOR_TYPE_I32] = {"i32", 1, 4},
    [TENSOR_TYPE_I64] = {"i64", 1, 8},
    [TENSOR_TYPE_F64] = {"f64", 1, 8},
    [TENSOR_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [TENSOR_TYPE_BF16] = {"bf16", 1, 2},
    [TENSOR_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [TENSOR_TYPE_TQ2_0] = {"tq2_0", 256, 66},
    [TENSOR_TYPE_MXFP4] = {"mxfp4", 32, 17},
};

const tensor_type_info *tensor_type_get(uint32_t id)
{
    if (id >= TENSOR_TYPE_ID_LIMIT || type_table[id].block_elems == 0)
        return NULL;
    return &type_table[id];
}

const char *tensor_type_name(uint32_t id)
{
    const tensor_type_info *info = tensor_type_get(id);
    return info ? info->name : "unknown";
}

int tensor_type_from_name(const char *name)
{
    for (uint32_t id = 0; id < TENSOR_TYPE_ID_LIMIT; id++)
        if (type_table[id].block_elems && strcasecmp(type_table[id].name, name) == 0)
            return (int)id;
    return -1;
}

bool tensor_type_row_bytes(uint32_t id, uint64_t n_elems, size_t *out)
{
    const tensor_type_info *info = tensor_type_get(id);
    if (!info || n_elems % info->block_elems != 0 || n_elems / info->block_elems > SIZE_MAX)
        return false;
    return checked_mul_size((size_t)(n_elems / info->block_elems), info->block_bytes, out);
}
