/*
 * Shared by the vision tests that take their fixtures' PNGs through the runner's image steps:
 * a file decoded, a projector's preprocessing, and (test_vision_qwen3vl, test_vision_qwen35,
 * test_vision_gemma4v and others whose PNGs are at a size the projector's resize keeps) the
 * file decoded, preprocessed and encoded. Fails the current cmocka test on an error.
 */
#ifndef CORRAL_TESTS_VISION_PNG_FIXTURE_H
#define CORRAL_TESTS_VISION_PNG_FIXTURE_H

#include <stdint.h>

#include "corral/engine.h"
#include "image/image.h"
#include "image/preprocess.h"

/*
 * The image file at path decoded, preprocessed as mm says and encoded (2 threads) into embd.
 * The preprocessed size must be want_nx x want_ny: the file's own, which neither llama.cpp's
 * resize (corners aligned) nor the one Corral follows (ollama's) changes, so that the two
 * engines see the same pixels.
 */
void vision_encode_png(const corral_mmproj *mm, const char *path, uint32_t want_nx,
                       uint32_t want_ny, corral_image_embd *embd);

/* The image file at path decoded (no size cap: the fixtures are the tests' own). */
image_rgb *vision_decode_png(const char *path);

/* The preprocessing mm's image parameters make. */
image_preprocess vision_preprocessing(const corral_mmproj *mm);

#endif
