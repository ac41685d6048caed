/*
 * The ops table of every tensor type: picks the legacy (quant_legacy.c), K-quant
 * (quant_k.c), MXFP4 (quant_mxfp4.c), IQ4 (quant_iq4.c) or lattice IQ (quant_iq_lattice.c)
 * kernels for a type and a clamped dispatch level, and the matrix entry points built on a
 * type's dot product. Owns no arithmetic of its own.
 */
#include "quant.h"

#include <assert.h>

#include "quant_iq4.h"
#include "quant_iq_lattice.h"
#include "quant_k.h"
#include "quant_legacy.h"
#include "quant_mxfp4.h"

const quant_ops *quant_ops_get(uint32_t type, enum cpu_level level)
{
    if (level > cpu_detected_level())
        level = cpu_detected_level();
    if (type >= TENSOR_TYPE_Q2_K && type <= TENSOR_TYPE_Q8_K)
        return quant_k_ops(type, level);
    if (type == TENSOR_TYPE_MXFP4)
        return quant_mxfp4_ops(type, level);
    if (type == TENSOR_TYPE_IQ4_NL || type == TENSOR_TYPE_IQ4_XS)
        return quant_iq4_ops(type, level);
    const quant_ops *lattice = quant_iq_lattice_ops(type, level);
    if (lattice)
        return lattice;
    return quant_legacy_ops(type, level);
}

const quant_ops *quant_ops_active(uint32_t type)
{
    return quant_ops_get(type, cpu_active_level());
}

size_t quant_act_row_bytes(uint32_t type, size_t n_in)
{
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    size_t bytes;
    if (!ops || !tensor_type_row_bytes(ops->act_type, n_in, &bytes))
        return 0;
    return bytes;
}

void quant_quantize_activations(const quant_ops *ops, const float *x, size_t n_in,
                                size_t n_tokens, void *act)
{
    size_t act_bytes = quant_act_row_bytes(ops->type, n_in);
    assert(act_bytes > 0 && ops->quantize_act);
    for (size_t t = 0; t < n_tokens; t++)
        ops->quantize_act(x + t * n_in, (char *)act + t * act_bytes, n_in);
}

/*
 * A type with a tile kernel (quant_ops.matmul) takes it. Otherwise rows are visited in tiles
 * of dots so that a tile of weight rows stays in cache while every token's activation row
 * passes over it: each weight row is read from memory once per call, not once per token.
 */
enum { MATMUL_ROW_TILE = 8 };

void quant_matmul_rows(const quant_ops *ops, const void *w, size_t n_in, size_t row_begin,
                       size_t row_end, const void *act, size_t n_tokens, float *y, size_t ldy)
{
    size_t w_bytes;
    size_t act_bytes = quant_act_row_bytes(ops->type, n_in);
    bool shapes_ok = tensor_type_row_bytes(ops->type, n_in, &w_bytes) && act_bytes > 0;
    assert(shapes_ok && ops->dot && row_begin <= row_end);
    (void)shapes_ok;

    const char *w_rows = w;
    const char *act_rows = act;
    if (ops->matmul) {
        ops->matmul(n_in, w_rows + row_begin * w_bytes, w_bytes, row_end - row_begin, act,
                    act_bytes, n_tokens, y + row_begin, ldy);
        return;
    }
    for (size_t tile = row_begin; tile < row_end; tile += MATMUL_ROW_TILE) {
        size_t tile_end = row_end - tile < MATMUL_ROW_TILE ? row_end : tile + MATMUL_ROW_TILE;
        for (size_t t = 0; t < n_tokens; t++) {
            const void *a = act_rows + t * act_bytes;
            float *y_row = y + t * ldy;
            for (size_t r = tile; r < tile_end; r++)
                y_row[r] = ops->dot(n_in, w_rows + r * w_bytes, a);
        }
    }
}

bool quant_packable(const quant_ops *ops, size_t n_in, size_t n_rows)
{
    return ops->matmul_packed && n_rows % QUANT_PACK_ROWS == 0 &&
           quant_act_row_bytes(ops->type, n_in) > 0;
}

void quant_pack_rows(const quant_ops *ops, const void *w, size_t n_in, size_t row_begin,
                     size_t row_end, void *packed)
{
    size_t w_bytes;
    bool shapes_ok = tensor_type_row_bytes(ops->type, n_in, &w_bytes) &&
                     row_begin % QUANT_PACK_ROWS == 0 && row_end % QUANT_PACK_ROWS == 0;
    assert(shapes_ok && ops->pack && row_begin <= row_end);
    (void)shapes_ok;
    size_t offset = row_begin * w_bytes;
    ops->pack((const char *)w + offset, n_in, row_end - row_begin, (char *)packed + offset);
}

/* Per 32 elements: the block's scale (f32) and its quant sum times -8, -128 and -16 (i32),
 * the start values of the packed Q4_0, Q8_0 and Q5_0 kernels (quant_prepare_packed_act_avx2). */
size_t quant_packed_sums_bytes(size_t n_in)
{
    return n_in / 32 * (sizeof(float) + 3 * sizeof(int32_t));
}

void quant_prepare_packed_act(const quant_ops *ops, const void *act, size_t n_in,
                              size_t n_tokens, void *sums)
{
    size_t act_bytes = quant_act_row_bytes(ops->type, n_in);
    size_t sums_bytes = quant_packed_sums_bytes(n_in);
    assert(act_bytes > 0);
    if (!ops->act_sums)
        return;
    for (size_t t = 0; t < n_tokens; t++)
        ops->act_sums((const char *)act + t * act_bytes, n_in, (char *)sums + t * sums_bytes);
}

void quant_matmul_packed_rows(const quant_ops *ops, const void *packed, size_t n_in,
                              size_t row_begin, size_t row_end, const void *act,
                              const void *sums, size_t n_tokens, float *y, size_t ldy)
{
    size_t w_bytes;
    bool shapes_ok = tensor_type_row_bytes(ops->type, n_in, &w_bytes) &&
                     row_begin % QUANT_PACK_ROWS == 0 && row_end % QUANT_PACK_ROWS == 0;
    assert(shapes_ok && ops->matmul_packed && row_begin <= row_end);
    (void)shapes_ok;
    ops->matmul_packed(n_in, (const char *)packed + row_begin * w_bytes,
                       (row_end - row_begin) / QUANT_PACK_ROWS, act,
                       quant_act_row_bytes(ops->type, n_in), sums, n_tokens, y + row_begin, ldy);
}
