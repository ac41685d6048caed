/*
 * Shared by the vision tests whose fixtures are PNGs at a size the projector's resize keeps
 * (test_vision_qwen3vl, test_vision_qwen35, test_vision_gemma4v): the file through the runner's
 * image steps. Fails the current cmocka test on an error.
 */
#ifndef CORRAL_TESTS_VISION_PNG_FIXTURE_H
#define CORRAL_TESTS_VISION_PNG_FIXTURE_H

#include <stdint.h>

#include "corral/engine.h"

/*
 * The image file at path decoded, preprocessed as mm says and encoded (2 threads) into embd.
 * The preprocessed size must be want_nx x want_ny: the file's own, which neither llama.cpp's
 * resize (corners aligned) nor the one Corral follows (ollama's) changes, so that the two
 * engines see the same pixels.
 */
void vision_encode_png(const corral_mmproj *mm, const char *path, uint32_t want_nx,
                       uint32_t want_ny, corral_image_embd *embd);

#endif
