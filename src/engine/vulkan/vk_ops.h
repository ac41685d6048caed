/*
 * The operations the Vulkan backend records into a command buffer: each binds its
 * pipeline, pushes its buffers and constants and dispatches, after a barrier where it reads
 * or writes what an operation since the last barrier wrote, or writes what one read
 * (vk_recording), so that independent operations may run together. Nothing runs until
 * vk_commands_submit or vk_commands_end. Buffers are spans
 * (a buffer and a byte range) so one allocation can hold several tensors.
 */
#ifndef CORRAL_ENGINE_VK_OPS_H
#define CORRAL_ENGINE_VK_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "vk_device.h"

typedef struct vk_span {
    VkBuffer buffer;
    VkDeviceSize offset, size;
} vk_span;

static inline vk_span vk_whole(const vk_buffer *b)
{
    return (vk_span){b->buffer, 0, VK_WHOLE_SIZE};
}

/* Weight types the matrix products and get-rows take (the rest stay on the CPU). */
bool vk_type_supported(uint32_t type);

/* out[r] = rmsnorm(x[r]) * w for rows of n floats. */
void vk_op_rmsnorm(vk_commands *c, vk_span w, vk_span x, vk_span out, uint32_t n, uint32_t rows,
                   float eps);

/* x[r] += d[r], then out[r] = rmsnorm(x[r]) * w: vk_op_binary's VK_ADD and vk_op_rmsnorm in
 * one dispatch, with their bits. */
void vk_op_add_rmsnorm(vk_commands *c, vk_span w, vk_span x, vk_span d, vk_span out, uint32_t n,
                       uint32_t rows, float eps);

/* vk_op_rmsnorm of rows of n floats (after vk_op_add_rmsnorm's x += d where d has a
 * buffer), then out quantized for products of `type` weights into quants and scales as
 * vk_op_matmul would quantize it, in one dispatch: the products of out that follow read
 * that quantization as it is. Where `type`'s products take floats, or n is not a whole
 * number of its blocks, the norm alone. */
void vk_op_rmsnorm_quantize(vk_commands *c, vk_span w, vk_span x, vk_span d, vk_span out,
                            uint32_t n, uint32_t rows, float eps, uint32_t type,
                            vk_span quants, vk_span scales);

/* out[r] = layernorm(x[r]) * w + b for rows of n floats (no bias: b's buffer is NULL). */
void vk_op_layernorm(vk_commands *c, vk_span w, vk_span b, vk_span x, vk_span out, uint32_t n,
                     uint32_t rows, float eps);

/* Scratch a matrix product needs for its input: Q8_0, Q8_1 or Q8_K quants and scales of up
 * to n_values floats (the widest input of a batch). */
VkDeviceSize vk_matmul_quants_bytes(uint64_t n_values);
VkDeviceSize vk_matmul_scales_bytes(uint64_t n_values);

/* x's n_values floats (a multiple of 32) to Q8_0 as the CPU quantizes activations: per
 * block four quants to a 32-bit word in quants, its scale (an f16's value) in scales. */
void vk_op_quantize_q8_0(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                         uint32_t n_values);

/* The same to Q8_1 (the partner of Q4_1 and Q5_1): scales take two floats a block, the
 * scale and the f16 value of the unrounded scale times the sum of the block's quants. */
void vk_op_quantize_q8_1(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                         uint32_t n_values);

/* The same to Q8_K blocks of 256 (the partner of the K-quants): four quants a word, the
 * block's float scale in scales. */
void vk_op_quantize_q8_k(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                         uint32_t n_values);

/* y[t][0..n_out) = W . x[t] for n_tokens rows of n_in floats, W of `type` (row_bytes a
 * row); quants and scales: the scratch above. */
void vk_op_matmul(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span x,
                  vk_span quants, vk_span scales, vk_span y, uint32_t n_in, uint32_t n_out,
                  uint32_t n_tokens);

/* The same for the n_out rows of one part of a matrix whose rows are split across buffers
 * (a matrix larger than one binding): y[t][row0 + r] for rows of ldy floats. */
void vk_op_matmul_rows(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span x,
                       vk_span quants, vk_span scales, vk_span y, uint32_t n_in, uint32_t n_out,
                       uint32_t n_tokens, uint32_t row0, uint32_t ldy);

/* In place on n_tokens * n_heads heads of head_dim: RoPE with each token's row of cos_sin
 * (n_rot floats); neox rotates the span's halves, else adjacent pairs. */
void vk_op_rope(vk_commands *c, vk_span cos_sin, vk_span x, uint32_t n_tokens, uint32_t n_heads,
                uint32_t head_dim, uint32_t n_rot, bool neox);

/* vk_op_rope over whole heads (n_rot = head_dim) with each half of a head turning on its own
 * as NEOX turns a whole one: pair i < head_dim / 4 is (i, i + head_dim / 4), pair
 * head_dim / 4 + i is (head_dim / 2 + i, head_dim / 2 + i + head_dim / 4) (gemma4v's tower). */
void vk_op_rope_halves(vk_commands *c, vk_span cos_sin, vk_span x, uint32_t n_tokens,
                       uint32_t n_heads, uint32_t head_dim);

/* In place over n floats: x = max(min(x, hi), lo), as the CPU's clamp_rows. */
void vk_op_clamp(vk_commands *c, vk_span x, uint32_t n, float lo, float hi);

/* A layer's cache: [sequence][KV head][cell][dim], F16 or F32. */
typedef struct vk_cache_shape {
    uint32_t n_head_kv, head_dim, n_cells;
    bool f16;
} vk_cache_shape;

static inline VkDeviceSize vk_cache_bytes(const vk_cache_shape *s, uint32_t n_seq)
{
    return (VkDeviceSize)n_seq * s->n_head_kv * s->n_cells * s->head_dim * (s->f16 ? 2 : 4);
}

/* x's n_tokens rows (n_head_kv * head_dim floats) into the cache at each token's
 * (sequence, cell) of tokens (two uint32 per token). */
void vk_op_kv_store(vk_commands *c, vk_span tokens, vk_span x, vk_span cache,
                    const vk_cache_shape *shape, uint32_t n_tokens);

/* A RoPE's angles and form, as vk_op_rope takes them. */
typedef struct vk_rope {
    vk_span cos_sin;
    uint32_t n_rot;
    bool neox;
} vk_rope;

/* vk_op_kv_store of x as vk_op_rope would turn it (each head's values computed alike), in one
 * dispatch; x itself stays as it is. */
void vk_op_kv_store_rope(vk_commands *c, vk_span tokens, vk_span x, vk_span cache,
                         const vk_cache_shape *shape, uint32_t n_tokens, const vk_rope *rope);

/* Cells [src, src + n) of a sequence's cache rows to [dst, dst + n), the two ranges apart
 * or the same (turned in place); keys turned on their first n_rot components by the angles
 * of one cos_sin row (rotate), neox as for vk_op_rope. */
typedef struct vk_shift {
    uint32_t seq, src, dst, n;
    bool rotate, neox;
    uint32_t n_rot;
} vk_shift;
void vk_op_kv_shift(vk_commands *c, vk_span cos_sin, vk_span cache, const vk_cache_shape *shape,
                    const vk_shift *shift);

typedef struct vk_attention_shape {
    uint32_t n_tokens, n_head, n_head_kv, head_dim_k, head_dim_v, n_cells;
    bool f16;
    float scale, softcap;
    /* window: a token sees the last `window` cells up to its own only (0: all of them);
     * last_at: not 0, token t sees up to cell tokens[last_at + t] (32-bit words from the
     * start of tokens) instead of its own, as an image's tokens that see each other do;
     * around: not 0, a token sees only the cells less than `around` from its own on either
     * side as well (an encoder's sliding layers: n_swa / 2 + 1) */
    uint32_t window, last_at, around;
} vk_attention_shape;

/* out[t][h] = softmax(scale * cap(K . q[t][h])) . V over cells 0..cell of each token's
 * sequence (tokens as for vk_op_kv_store), or those the window and last_at leave. */
void vk_op_attention(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                     vk_span out, const vk_attention_shape *shape);

/* The same with a sink logit per query head (sinks: n_head floats) in each softmax's
 * denominator. */
void vk_op_attention_sinks(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                           vk_span sinks, vk_span out, const vk_attention_shape *shape);

/* The same with ALiBi (slopes: a float per query head): each score gains
 * -slope * |its cell - the token's own| after the scale. */
void vk_op_attention_alibi(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                           vk_span slopes, vk_span out, const vk_attention_shape *shape);

/* vk_op_attention with token t seeing from cell tokens[first_at + t] on (first_at not 0; in
 * words from the start of tokens): a vision tower's windows of rows, up to last_at's cells. */
void vk_op_attention_from(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                          vk_span out, const vk_attention_shape *shape, uint32_t first_at);

/* rows rows of width floats from src to dst, row r's from src[src_offset + r * src_stride]
 * to dst[dst_offset + r * dst_stride] (offsets and strides in floats). */
typedef struct vk_rows {
    uint32_t rows, width, src_offset, src_stride, dst_offset, dst_stride;
} vk_rows;
void vk_op_copy_rows(vk_commands *c, vk_span src, vk_span dst, const vk_rows *r);

/* In place: gate = silu(gate) * up over n floats. */
void vk_op_swiglu(vk_commands *c, vk_span gate, vk_span up, uint32_t n);

/* vk_op_swiglu, then gate quantized for products of `type` weights into quants and scales
 * as vk_op_matmul would quantize it, in one dispatch: the products of gate that follow read
 * that quantization as it is. Where `type`'s products take floats, or n is not a whole
 * number of its blocks, the swiglu alone. */
void vk_op_swiglu_quantize(vk_commands *c, vk_span gate, vk_span up, uint32_t n, uint32_t type,
                           vk_span quants, vk_span scales);

/* In place, gpt-oss's clamped form: g = min(gate, limit), u = clamp(up, -limit, limit),
 * gate = g * sigmoid(alpha * g) * (u + 1). */
void vk_op_swiglu_oai(vk_commands *c, vk_span gate, vk_span up, uint32_t n, float alpha,
                      float limit);

/* ---- mixtures of experts (vk_moe.c): a token's n_used (token, expert) pairs are rows
 * t * n_used + j, most probable expert first ---- */

enum vk_route { VK_ROUTE_SOFTMAX, VK_ROUTE_SOFTMAX_CHOSEN };
/* Per token of n_tokens rows of n_expert router logits (in place: softmax probabilities
 * under VK_ROUTE_SOFTMAX): its experts into ids and their weights into weights, n_used
 * each. VK_ROUTE_SOFTMAX: the most probable, renormalised to sum 1; VK_ROUTE_SOFTMAX_CHOSEN:
 * the largest logits, weighted by the softmax over those alone. */
void vk_op_moe_route(vk_commands *c, enum vk_route mode, vk_span logits, vk_span ids,
                     vk_span weights, uint32_t n_expert, uint32_t n_used, uint32_t n_tokens);

/* The scored router (deepseek2's; moe.h's moe_route_scored): per token, its logits
 * replaced in place by sigmoid (sigmoid) or softmax scores; the selection adds bias (an empty
 * span: none) and, with n_groups > 1, keeps only the experts of the n_group_used groups whose
 * two best selection scores sum highest; the n_used best selections (the lower index first
 * among equals) into ids, weighted by their scores, divided by their sum (kept at least
 * 2^-14) when norm, times scale. n_expert at most MODEL_MAX_EXPERTS, a multiple of n_groups. */
typedef struct {
    uint32_t n_expert, n_used, n_groups, n_group_used;
    bool sigmoid, norm;
    float scale;
} vk_route_scored;
void vk_op_moe_route_scored(vk_commands *c, const vk_route_scored *r, vk_span logits,
                            vk_span bias, vk_span ids, vk_span weights, uint32_t n_tokens);

/* y[pair] = W[ids[pair]] . x[pair / pairs_per_x] for n_pairs pairs: W holds experts
 * [expert0, expert0 + n_experts) of expert_rows rows each (a pair whose expert is another
 * buffer's is left alone); x has n_pairs / pairs_per_x rows of n_in floats (quants and
 * scales: vk_op_matmul's scratch); y rows of expert_rows floats. */
void vk_op_matmul_experts(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span x,
                          vk_span quants, vk_span scales, vk_span ids, vk_span y, uint32_t n_in,
                          uint32_t expert_rows, uint32_t n_pairs, uint32_t pairs_per_x,
                          uint32_t expert0, uint32_t n_experts);

/* The slots a tile of a prompt's grouped pairs takes: the per-row kernel's (matmul.glsl),
 * or the tiled kernel's (matmul_tiled.glsl), whose tile unpacks each weight once for 64
 * slots. VK_MOE_ROW_TILE gives the most tiles. */
enum { VK_MOE_ROW_TILE = 8, VK_MOE_TILED_TILE = 64 };

/* The tile for n_pairs pairs over n_expert experts on d: the tiled kernel's where d's
 * limits take it and the experts have enough pairs on average to fill most of its tile. */
uint32_t vk_moe_tile(const vk_device *d, uint32_t n_pairs, uint32_t n_expert);

/* A prompt's pairs grouped by expert (moe_group.comp): for the n_pairs experts in ids, each
 * pair's slot into slot_of, each slot's input row (pair / pairs_per_row) and expert into
 * slot_rows and slot_ids (n_pairs each), the slots in runs of one expert each, and the runs
 * cut into tiles of `tile` slots (VK_MOE_ROW_TILE or VK_MOE_TILED_TILE; 3 words each:
 * expert, first slot, count; vk_moe_max_tiles of them, those beyond the runs' with a count
 * of 0). */
uint32_t vk_moe_max_tiles(uint32_t n_pairs, uint32_t n_expert, uint32_t tile);
void vk_op_moe_group(vk_commands *c, vk_span ids, vk_span slot_of, vk_span slot_rows,
                     vk_span slot_ids, vk_span tiles, uint32_t n_pairs, uint32_t n_expert,
                     uint32_t pairs_per_row, uint32_t tile);

/* y[slot] = W[expert] . x[slot] for the slots of each tile of vk_op_moe_group (up to
 * max_tiles, of the same `tile`), W's rows read once a tile: W holds experts
 * [expert0, expert0 + n_experts) of expert_rows rows each (a tile of another buffer's
 * expert is left alone); x has n_slots rows of n_in floats (quants and scales:
 * vk_op_matmul's scratch), y rows of expert_rows floats. With VK_MOE_ROW_TILE each slot's
 * value is vk_op_matmul_experts' for its pair, to the bit; VK_MOE_TILED_TILE (only where
 * vk_device_fits_tiled) takes the tiled kernel, whose sums go in another order. */
void vk_op_matmul_expert_tiles(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes,
                               vk_span x, vk_span quants, vk_span scales, vk_span tiles,
                               vk_span y, uint32_t n_in, uint32_t expert_rows,
                               uint32_t n_slots, uint32_t max_tiles, uint32_t tile,
                               uint32_t expert0, uint32_t n_experts);

/* In place on n_pairs rows of n floats: each plus its expert's row of bias (a row per
 * expert). */
void vk_op_moe_bias(vk_commands *c, vk_span bias, vk_span ids, vk_span y, uint32_t n,
                    uint32_t n_pairs);

/* out[t] = sum over j of weights[t * n_used + j] * experts[t * n_used + j], rows of n
 * floats, from j = 0 on; without weights (no buffer), the rows' plain sum (llama4's experts,
 * whose inputs carried the weights: vk_op_moe_weigh_inputs). */
void vk_op_moe_combine(vk_commands *c, vk_span experts, vk_span weights, vk_span out,
                       uint32_t n, uint32_t n_used, uint32_t n_tokens);

/* The same with pair p's row of experts at slot_of[p] (vk_op_moe_group's slots). */
void vk_op_moe_combine_slots(vk_commands *c, vk_span experts, vk_span weights, vk_span slot_of,
                             vk_span out, uint32_t n, uint32_t n_used, uint32_t n_tokens);

/* Each pair's own input for experts that weight their input (llama4): row p of out, or row
 * slot_of[p] with slots (vk_op_moe_group's), = x[p / n_used] * weights[p], rows of n floats,
 * for the n_tokens * n_used pairs. */
void vk_op_moe_weigh_inputs(vk_commands *c, vk_span x, vk_span weights, vk_span slot_of,
                            vk_span out, uint32_t n, uint32_t n_used, uint32_t n_tokens);

/* Bytes of the GELU table vk_op_gelu reads: block_gelu_f16_table's 65536 fp16 values. */
enum { VK_GELU_TABLE_BYTES = 65536 * 2 };

/* In place over n floats: x = gelu(x) * up (GeGLU), or x = gelu(x) when up's buffer is
 * NULL; GELU's tanh form as the CPU has it, x rounded to fp16 and looked up in `table` (a
 * copy of block_gelu_f16_table). */
void vk_op_gelu(vk_commands *c, vk_span table, vk_span x, vk_span up, uint32_t n);

/* In place over n floats: x = quick_gelu(x) * up, or x = quick_gelu(x) when up's buffer is
 * NULL; quick_gelu(x) = x * sigmoid(1.702 x) as the CPU has it, x rounded to fp16 and looked
 * up in `table` (a copy of vision_gelu_quick_f16_table) for every x. */
void vk_op_gelu_quick(vk_commands *c, vk_span table, vk_span x, vk_span up, uint32_t n);

/* The shader's op numbers (binary.comp; 7 is vk_op_clamp's). */
enum vk_binary { VK_ADD, VK_MUL, VK_SCALE, VK_MUL_ROWS, VK_RELU_SQR, VK_MUL_SIGMOID,
                 VK_GELU_ERF, VK_TANH = 8, VK_MUL_SOFTPLUS_GROUPS };
/* In place over n floats: x += y, x *= y (y repeating every y_n floats), x *= scale,
 * x *= y[i / y_n] (a value per row of y_n floats), x = relu(x)² (y unread),
 * x *= sigmoid(y) (y repeating every y_n floats), x = gelu(x) by erf (y unread; erf
 * within 1.5e-7), x = tanh(x) (y unread), or x *= softplus(y[i / y_n]) (a gate per group of
 * y_n floats). */
void vk_op_binary(vk_commands *c, enum vk_binary op, vk_span x, vk_span y, uint32_t n,
                  uint32_t y_n, float scale);

/* In place per row of n floats: x = softmax(scale * x). */
void vk_op_softmax(vk_commands *c, vk_span x, uint32_t n, uint32_t rows, float scale);

/* out[k] = row ids[k] of W (`type`, row_bytes a row, n elements), dequantized. */
void vk_op_get_rows(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span ids,
                    vk_span out, uint32_t n, uint32_t n_ids);

/* ---- recurrent layers (delta_net.h; vk_layers.c's): Gated DeltaNet, LFM2, Mamba2 ---- */

/* In place on n_tokens rows of `channels` floats: each channel through its `taps` taps
 * (kernels: a channel's taps, oldest first, F32) over the window of its token's sequence
 * (tokens as for vk_op_kv_store; window: per sequence taps - 1 rows of channels, oldest
 * first), then silu; the token's input joins the window. Tokens in batch order. */
void vk_op_delta_conv(vk_commands *c, vk_span kernels, vk_span tokens, vk_span window,
                      vk_span x, uint32_t channels, uint32_t taps, uint32_t n_tokens);

/* LFM2's gated short conv (arch_lfm2.c), in place on n_tokens rows [b | c | x] of 3 x
 * `channels` floats: b * x through the conv as vk_op_delta_conv's (no silu), b * x joining
 * the window, and c times the conv's output written over b. */
void vk_op_gated_short_conv(vk_commands *c, vk_span kernels, vk_span tokens, vk_span window,
                            vk_span x, uint32_t channels, uint32_t taps, uint32_t n_tokens);

/* A Mamba2 layer's sizes (mamba2.c): n_heads heads of head_dim channels reading n_groups
 * groups of B and C, state_size wide; the conv's channels (x, B and C); n_tokens tokens of
 * n_seq sequences. A token's row of its input projection is [z | x B C | dt], z and x
 * n_heads x head_dim wide, dt one value a head. */
typedef struct vk_mamba2_shape {
    uint32_t head_dim, n_heads, n_groups, state_size, channels, taps, n_tokens, n_seq;
} vk_mamba2_shape;

/* In place on each row's x B C: the conv as vk_op_delta_conv's, plus bias (an empty span:
 * none) before the silu. */
void vk_op_mamba2_conv(vk_commands *c, vk_span kernels, vk_span bias, vk_span tokens,
                       vk_span window, vk_span x, const vk_mamba2_shape *s);

/* Each head's state (per sequence n_heads x head_dim rows of state_size floats) through the
 * tokens of its sequence in batch order (tokens as for vk_op_kv_store), reading each row's
 * conv output and dt (proj, after vk_op_mamba2_conv) and per head its dt bias, A and D
 * (heads: the three, n_heads floats each): out[t][h] = y before the gate. */
void vk_op_mamba2_scan(vk_commands *c, vk_span tokens, vk_span proj, vk_span heads,
                       vk_span state, vk_span out, const vk_mamba2_shape *s);

/* In place, per (token, head) of n_tokens rows of n_heads: alpha = exp(softplus(alpha +
 * dt[h]) * a[h]) (the decay), beta = sigmoid(beta) (the strength). */
void vk_op_delta_gates(vk_commands *c, vk_span alpha, vk_span beta, vk_span dt, vk_span a,
                       uint32_t n_heads, uint32_t n_tokens);

/* In place: x / |x| over the first `spans` spans of n floats of each of rows rows,
 * row_stride floats apart (the key heads of q and k at the start of a conv's rows). */
void vk_op_l2norm(vk_commands *c, vk_span x, uint32_t n, uint32_t spans, uint32_t rows,
                  uint32_t row_stride, float eps);

typedef struct vk_delta_shape {
    uint32_t head_dim, n_heads, n_key_heads; /* value heads of head_dim, read key heads */
    uint32_t channels, n_tokens, n_seq; /* qkv's row width; sequences the state holds */
    bool grouped; /* value heads grouped by key head (delta_net_key_head) */
} vk_delta_shape;

/* Each value head's state (state: per sequence n_heads x head_dim x head_dim floats, a row
 * per value component) through the tokens of its sequence in batch order (tokens as for
 * vk_op_kv_store; qkv rows: the key heads' q, their k, the value heads' v; decay and strength
 * per token and head), each token's out[t][h] = S q / sqrt(head_dim), value head h reading
 * key head delta_net_key_head(h, ...). */
void vk_op_delta_rule(vk_commands *c, vk_span tokens, vk_span qkv, vk_span decay,
                      vk_span strength, vk_span state, vk_span out, const vk_delta_shape *s);

/* ---- gemma3n's AltUp streams and sparse gates (arch_gemma3n.c's arithmetic, forward.h) ----
 * Streams: n_altup blocks of n_tokens rows of n floats, `stride` floats apart. */

/* pred's streams = gemma3n_altup_predict_rows of streams with coef (a row of n_altup²
 * floats per token), to the CPU's bits. */
void vk_op_altup_predict(vk_commands *c, vk_span streams, vk_span coef, vk_span pred,
                         uint32_t n, uint32_t n_altup, uint32_t n_tokens, uint32_t stride);

/* streams = gemma3n_altup_correct_rows of the block's output x and the predictions pred
 * with coef (a row of n_altup floats per token), to the CPU's bits. */
void vk_op_altup_correct(vk_commands *c, vk_span x, vk_span pred, vk_span coef,
                         vk_span streams, uint32_t n, uint32_t n_altup, uint32_t n_tokens,
                         uint32_t stride);

/* streams j > 0 += x (n_tokens rows of n floats): the per-layer branch's output added to
 * every stream but the active one. */
void vk_op_altup_add(vk_commands *c, vk_span x, vk_span streams, uint32_t n, uint32_t n_altup,
                     uint32_t n_tokens, uint32_t stride);

/* In place per row of n floats (n > 1): gemma3n_sparse_gate's relu(x - (mean + std_mul *
 * std)), its sums in float. */
void vk_op_sparse_gate(vk_commands *c, vk_span x, uint32_t n, uint32_t rows, float std_mul);

/* In place per row of n floats: y[r] rescaled to the Euclidean length of target[r]
 * (gemma3n_match_magnitude, its sums in float). */
void vk_op_match_magnitude(vk_commands *c, vk_span target, vk_span y, uint32_t n,
                           uint32_t rows);

/* ---- Gemma 4's audio tower (vk_audio.c) ---- */

/* The local attention's reach: a query sees itself and `past` rows before it, past below
 * VK_AUDIO_MAX_PAST; logits capped by cap * tanh(logit / cap). */
enum { VK_AUDIO_MAX_PAST = 32 };
typedef struct vk_audio_attention {
    uint32_t n_rows, n_head, head_dim, past;
    float cap;
} vk_audio_attention;

/* out[i][h] = softmax over d = 0..min(i, past) of cap(q[i][h] . (k[i - d][h] + rel[d][h]))
 * times v[i - d][h]; q and k already scaled, rel a row per distance (n_rows * n_head threads
 * of 64, in one row of workgroups). */
void vk_op_audio_attention(vk_commands *c, vk_span q, vk_span k, vk_span v, vk_span rel,
                           vk_span out, const vk_audio_attention *a);

/* out[r][ch] = sum over taps t of kernels[ch][t] * glu(x[r - (taps - 1 - t)])[ch], rows
 * before the first zero; x's rows [a | b] of 2 x channels floats, glu = a * sigmoid(b)
 * (n_rows * channels threads of 256, in one row of workgroups). */
void vk_op_audio_conv(vk_commands *c, vk_span x, vk_span kernels, vk_span out,
                      uint32_t n_rows, uint32_t channels, uint32_t taps);

#endif
