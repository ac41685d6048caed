/*
 * Images for the vision models: compressed bytes (PNG, JPEG, WebP, GIF) decoded to 8-bit RGB.
 *
 * Every image comes from a client, so decoding is bounded: the dimensions are read from the
 * header and checked against image_limits before any pixel memory is allocated, truncated or
 * corrupt data is an error (never a partly grey picture), and the decoders' own error paths
 * are contained here. The pixels match what llama.cpp's multimodal library decodes (stb_image
 * forced to three channels), so preprocessing and encoding can be compared with it exactly:
 * alpha is dropped rather than blended (a transparent pixel keeps its stored colour), 16-bit
 * samples keep their high byte, and JPEG uses the reference's integer IDCT and colour
 * conversion. One deliberate difference: a JPEG's EXIF orientation is applied (the reference
 * ignores it), because a phone photo shown sideways to the model is a wrong answer, and files
 * without the tag decode identically.
 */
#ifndef CORRAL_IMAGE_IMAGE_H
#define CORRAL_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

typedef enum image_format {
    IMAGE_FORMAT_UNKNOWN,
    IMAGE_FORMAT_PNG,
    IMAGE_FORMAT_JPEG,
    IMAGE_FORMAT_WEBP,
    IMAGE_FORMAT_GIF,
} image_format;

/* Decoded pixels: height rows of width RGB triples, no padding. */
typedef struct image_rgb {
    uint32_t width;
    uint32_t height;
    uint8_t *pixels;
} image_rgb;

/* What a decode may cost. Both bounds are checked against the header before allocating, so
 * the decoded bytes (3 per pixel) never exceed 3 * max_pixels. */
typedef struct image_limits {
    uint32_t max_side;   /* width and height each at most this */
    uint64_t max_pixels; /* width * height at most this */
} image_limits;

/* 16384 a side and 8192 x 8192 in all: every camera photo fits, and the decoded bitmap stays
 * under 200 MiB. */
#define IMAGE_DEFAULT_MAX_SIDE 16384u
#define IMAGE_DEFAULT_MAX_PIXELS (8192ull * 8192ull)

extern const image_limits image_default_limits;

/* The format named by the data's first bytes (its magic number), or IMAGE_FORMAT_UNKNOWN. */
image_format image_sniff_format(const uint8_t *data, size_t len);

/* "png", "jpeg", "webp", "gif" or "unknown". */
const char *image_format_name(image_format format);

/* Decode data whatever its format (sniffed). limits may be NULL for image_default_limits.
 * NULL with err set ("unsupported image format", "image is 50000 x 50000 pixels, more than
 * ...", "corrupt JPEG: ...") when the data is not a complete image within the limits. */
image_rgb *image_decode(const uint8_t *data, size_t len, const image_limits *limits,
                        corral_error *err);

/* An uninitialised width x height image (for decoders and resizers); NULL with err set when
 * the size overflows or memory runs out. */
image_rgb *image_rgb_create(uint32_t width, uint32_t height, corral_error *err);
void image_rgb_free(image_rgb *image);

#endif
