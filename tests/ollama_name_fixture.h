/*
 * Shared by test_convert and the Llama 4 and pixtral vision tests: the names ollama's
 * converter gives a llama.cpp projector's tensors in its one-file vision models.
 */
#ifndef CORRAL_TESTS_OLLAMA_NAME_FIXTURE_H
#define CORRAL_TESTS_OLLAMA_NAME_FIXTURE_H

#include <stddef.h>

/* ollama's name for a llama.cpp llama4 projector's tensor: Hugging Face's under "v." and
 * "mm.", the blocks' as the text model's but the MLP's; a constant, or written into buf. */
const char *ollama_name_fixture_llama4(const char *name, char *buf, size_t size);

/* ollama's name for a llama.cpp pixtral projector's tensor; NULL for the [IMG_BREAK] vector,
 * which ollama's file keeps as that token's embedding row. */
const char *ollama_name_fixture_pixtral(const char *name, char *buf, size_t size);

#endif
