/*
 * The per-format decoders behind image_decode (image.h), and the pieces they share. Each
 * reads its header, calls image_check_size, and only then allocates the bitmap.
 */
#ifndef CORRAL_IMAGE_DECODERS_H
#define CORRAL_IMAGE_DECODERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image/image.h"

image_rgb *image_decode_png(const uint8_t *data, size_t len, const image_limits *limits,
                            corral_error *err);
image_rgb *image_decode_jpeg(const uint8_t *data, size_t len, const image_limits *limits,
                             corral_error *err);
image_rgb *image_decode_webp(const uint8_t *data, size_t len, const image_limits *limits,
                             corral_error *err);
image_rgb *image_decode_gif(const uint8_t *data, size_t len, const image_limits *limits,
                            corral_error *err);

/* false with err set when a width x height image breaks the limits (or is empty). */
bool image_check_size(uint64_t width, uint64_t height, const image_limits *limits,
                      corral_error *err);

/* The EXIF orientation (1..8) in a JPEG APP1 segment's payload ("Exif\0\0" + TIFF), or 1
 * when the segment is not EXIF or has no valid orientation tag. */
int image_exif_orientation(const uint8_t *app1, size_t len);

/* image turned upright for EXIF orientation 2..8 (1 returns image itself). The input is
 * freed when a new bitmap replaces it; NULL with err set (input freed) when memory runs out. */
image_rgb *image_apply_orientation(image_rgb *image, int orientation, corral_error *err);

#endif
