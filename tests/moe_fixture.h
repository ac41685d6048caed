/*
 * Shared by the forward tests: a mixture-of-experts model rewritten with each expert in a
 * tensor of its own (blk.N.ffn_gate.E.weight), as Mixtral files converted before the 3-D
 * expert tensors have them, or with a shared expert or a router selection bias added; or
 * deepseek2 with the older combined attn_kv_b.
 */
#ifndef CORRAL_TESTS_MOE_FIXTURE_H
#define CORRAL_TESTS_MOE_FIXTURE_H

#include <stdint.h>

/* src's tensors and keys into dst, every *_exps.weight split into one 2-D tensor per expert
 * (written last expert first, so no expert's rows follow the one before). Fails the test on
 * any error. */
void moe_fixture_write_split_experts(const char *src, const char *dst);

/* src's tensors and keys into dst with a shared expert added to each of its n_layer layers:
 * blk.N.ffn_{gate,up,down}_shexp.weight, F32, of width n_ff (the key `width_key` says it) on
 * rows of n_embd, their values small and pseudo-random (the same every run and matrix). */
void moe_fixture_write_shared_expert(const char *src, const char *dst, const char *width_key,
                                     uint32_t n_layer, uint32_t n_embd, uint32_t n_ff);

/* src's tensors and keys into dst with a router selection bias added to each of its n_layer
 * layers: blk.N.exp_probs_b.bias, F32, n_expert values in -0.3..0.3, large enough beside a
 * softmax over a few experts to change which win (the same every run and layer). */
void moe_fixture_write_selection_bias(const char *src, const char *dst, uint32_t n_layer,
                                      uint32_t n_expert);

/* arch/deepseek2.gguf (src) as conversions before the split wrote it, into dst: per layer
 * one attn_kv_b, each head's key rows (the columns of its attn_k_b slab) then its value rows
 * (its attn_v_b slab), and the heads' key_length / value_length over 4 KV heads. */
void moe_fixture_write_deepseek2_combined_kv_b(const char *src, const char *dst);

#endif
