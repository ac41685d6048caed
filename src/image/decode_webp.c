/*
 * WebP through libwebp: still images, lossy or lossless, to RGB with any alpha dropped (as
 * PNG alpha is). The reference decoder has no WebP support at all; clients send WebP, so it
 * is decoded here with libwebp's own (exact for lossless) arithmetic. Animations are refused
 * rather than silently cut to a frame.
 */
#include <webp/decode.h>

#include "image/decoders.h"

image_rgb *image_decode_webp(const uint8_t *data, size_t len, const image_limits *limits,
                             corral_error *err)
{
    WebPBitstreamFeatures features;
    VP8StatusCode status = WebPGetFeatures(data, len, &features);
    if (status != VP8_STATUS_OK) {
        corral_error_set(err, "corrupt WebP: %s",
                         status == VP8_STATUS_NOT_ENOUGH_DATA ? "file is truncated"
                                                              : "bad header");
        return NULL;
    }
    if (features.has_animation) {
        corral_error_set(err, "animated WebP is not supported");
        return NULL;
    }
    if (features.width <= 0 || features.height <= 0) {
        corral_error_set(err, "corrupt WebP: no pixels");
        return NULL;
    }
    if (!image_check_size((uint64_t)features.width, (uint64_t)features.height, limits, err))
        return NULL;
    image_rgb *image = image_rgb_create((uint32_t)features.width, (uint32_t)features.height,
                                        err);
    if (!image)
        return NULL;
    size_t stride = (size_t)image->width * 3;
    if (!WebPDecodeRGBInto(data, len, image->pixels, stride * image->height, (int)stride)) {
        corral_error_set(err, "corrupt WebP: the image data does not decode");
        image_rgb_free(image);
        return NULL;
    }
    return image;
}
