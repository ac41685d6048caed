/*
 * Shared by the vision tests: a text model and its llama.cpp projector merged into one GGUF
 * laid out as ollama stores its own vision models (the tower's keys under the text
 * architecture, its tensors under ollama's names), optionally spoiled for the refusal cases.
 */
#ifndef CORRAL_TESTS_ONEFILE_FIXTURE_H
#define CORRAL_TESTS_ONEFILE_FIXTURE_H

#include <stdint.h>

/* text's keys and tensors, then mmproj's clip.vision.* keys as "<arch>.vision.*" (but the
 * image mean and std, which ollama does not store) and "<arch>.mm.tokens_per_image" =
 * tokens_per_image, then mmproj's tensors renamed, into dst. A Qwen2.5-VL pair (projector
 * qwen2.5vl_merger) becomes ollama's "qwen25vl": its text keys renamed, its M-RoPE sections
 * as rope.mrope_section, only the tower keys ollama writes, full-attention blocks listed
 * (tokens_per_image unused). drop_key (NULL: none): a key
 * left out, named as written. bad_tensor (NULL: none): a tensor, named as written, stored as
 * a vector of its element count instead of its shape. Fails the test on any error. */
void onefile_fixture_write(const char *text, const char *mmproj, const char *dst,
                           uint32_t tokens_per_image, const char *drop_key,
                           const char *bad_tensor);

#endif
