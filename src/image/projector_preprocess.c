/* A projector's image parameters as the preprocessing they ask for (projector_preprocess.h). */
#include "image/projector_preprocess.h"

#include <string.h>

image_preprocess image_preprocess_from_params(const corral_image_params *params)
{
    image_preprocess pre = {
        .fit = params->resize == CORRAL_IMAGE_LETTERBOX       ? IMAGE_FIT_LETTERBOX
               : params->resize == CORRAL_IMAGE_ANYRES       ? IMAGE_FIT_ANYRES
               : params->resize == CORRAL_IMAGE_LONGEST_EDGE ? IMAGE_FIT_LONGEST_EDGE
               : params->resize == CORRAL_IMAGE_STRETCH      ? IMAGE_FIT_STRETCH
               : params->resize == CORRAL_IMAGE_TILES        ? IMAGE_FIT_TILES
               : params->resize == CORRAL_IMAGE_VIEWS        ? IMAGE_FIT_VIEWS
               : params->resize == CORRAL_IMAGE_CANVAS       ? IMAGE_FIT_CANVAS
                                                             : IMAGE_FIT_SMART_RESIZE,
        .image_size = params->image_size,
        .patch_size = params->patch_size,
        .merge = params->align / params->patch_size,
        .min_pixels = params->min_pixels,
        .max_pixels = params->max_pixels,
    };
    memcpy(pre.mean, params->mean, sizeof pre.mean);
    memcpy(pre.std, params->std, sizeof pre.std);
    memcpy(pre.pad, params->pad, sizeof pre.pad);
    _Static_assert(IMAGE_MAX_PINPOINTS == CORRAL_IMAGE_MAX_PINPOINTS, "pinpoint tables differ");
    pre.n_pinpoints = params->n_pinpoints <= IMAGE_MAX_PINPOINTS ? params->n_pinpoints : 0;
    memcpy(pre.pinpoints, params->pinpoints, sizeof pre.pinpoints);
    pre.tile_size = params->tile_size;
    pre.min_tiles = params->min_tiles;
    pre.max_tiles = params->max_tiles;
    return pre;
}

bool image_plan_for_params(const corral_image_params *params, uint32_t width, uint32_t height,
                           image_slice_plan *out, corral_error *err)
{
    if (params->tile_size && params->max_slices) { /* lfm2's tiles, not deepseekocr's views */
        image_preprocess pre = image_preprocess_from_params(params);
        return image_tile_plan_for(&pre, width, height, params->tile_size, params->max_slices,
                                   out, err);
    }
    return image_slice_plan_for(width, height, params->image_size, params->patch_size,
                                params->max_slices, out, err);
}
