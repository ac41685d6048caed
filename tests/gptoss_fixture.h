/*
 * A gpt-oss model as ollama's converter writes it (architecture `gptoss`: fused attn_qkv,
 * gate and up experts interleaved in ffn_gate_up_exps, MXFP4 experts as type 4 in ollama's
 * nibble order), written for tests of what such a model costs in memory: the vocabulary of
 * tests/fixtures/arch/gpt-oss-mxfp4.gguf, 2 layers of 64 experts of width 2048 (about 27 MB
 * of experts, so their copies dominate a context's other buffers), random weights.
 */
#ifndef CORRAL_TESTS_GPTOSS_FIXTURE_H
#define CORRAL_TESTS_GPTOSS_FIXTURE_H

#include <stddef.h>

/* The model at path (fails the test on error); *experts_bytes: its expert matrices' bytes. */
void gptoss_fixture_write(const char *path, size_t *experts_bytes);

#endif
