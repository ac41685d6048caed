/*
 * tests/fixtures/arch/mllama.gguf as a llama file of its self-attention layers alone: the
 * mllama.* keys as llama.* (block_count the layers kept, no cross_attention_layers), the
 * vocabulary and token_embd cut to output.weight's rows, the kept layers renumbered. Without
 * an image the two models are one (arch_mllama.c), which the tests of the engine and of the
 * memory estimate hold the mllama file to.
 */
#ifndef CORRAL_TESTS_MLLAMA_FIXTURE_H
#define CORRAL_TESTS_MLLAMA_FIXTURE_H

/* Write it to dst (fails the current test on error). */
void mllama_fixture_write_llama(const char *dst);

#endif
