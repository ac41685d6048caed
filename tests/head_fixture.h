/*
 * Shared by the forward tests: a dense model rewritten with attention heads of another
 * shape (wider ones than any fixture has, a rotated span of more than 256 components).
 */
#ifndef CORRAL_TESTS_HEAD_FIXTURE_H
#define CORRAL_TESTS_HEAD_FIXTURE_H

#include <stdint.h>

/* src's keys and tensors into dst with n_head query heads and n_head_kv KV heads of
 * head_dim (keys and values), RoPE on their first n_rot components: the attention's q, k, v
 * and output matrices, and its q/k/v biases where src has them, replaced by F32 ones of the
 * new shapes, their values small and pseudo-random (the same every run). src has separate
 * q, k and v matrices and no per-head norms. Fails the test on any error. */
void head_fixture_write(const char *src, const char *dst, uint32_t n_head, uint32_t n_head_kv,
                        uint32_t head_dim, uint32_t n_rot);

#endif
