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

/* The fit (letterbox or smart resize), sizes, merge, pixel bounds, mean and std params
 * give. */
image_preprocess image_preprocess_from_params(const corral_image_params *params);

#endif
