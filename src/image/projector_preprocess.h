/*
 * The preprocessing a loaded projector asks for: its image parameters (corral_image_params,
 * as the engine reads them from the projector file and type) as the image_preprocess that
 * turns a decoded image into its encoder's pixels. The CLI's `infer --image` and the
 * runner's prompt images both preprocess this way.
 */
#ifndef CORRAL_IMAGE_PROJECTOR_PREPROCESS_H
#define CORRAL_IMAGE_PROJECTOR_PREPROCESS_H

#include "corral/engine.h"
#include "image/preprocess.h"
#include "image/slices.h"

/* The fit (letterbox or smart resize), sizes, merge, pixel bounds, mean and std params
 * give. */
image_preprocess image_preprocess_from_params(const corral_image_params *params);

/* The parts an image of width x height becomes for a projector that slices
 * (params->max_slices > 0): minicpm-v's slices, or lfm2's tiles (params->tile_size). false
 * with err for sizes the plan cannot take. */
bool image_plan_for_params(const corral_image_params *params, uint32_t width, uint32_t height,
                           image_slice_plan *out, corral_error *err);

#endif
