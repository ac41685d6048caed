/*
 * image_decode: format sniffing, the size limits every decoder checks, and the image_rgb
 * bitmap's lifetime. The formats themselves live in decode_<format>.c.
 */
#include <stdlib.h>
#include <string.h>

#include "image/decoders.h"
#include "util/checked.h"

const image_limits image_default_limits = {
    .max_side = IMAGE_DEFAULT_MAX_SIDE,
    .max_pixels = IMAGE_DEFAULT_MAX_PIXELS,
};

image_format image_sniff_format(const uint8_t *data, size_t len)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (len >= 8 && memcmp(data, png, 8) == 0)
        return IMAGE_FORMAT_PNG;
    if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        return IMAGE_FORMAT_JPEG;
    if (len >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0)
        return IMAGE_FORMAT_WEBP;
    if (len >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0))
        return IMAGE_FORMAT_GIF;
    return IMAGE_FORMAT_UNKNOWN;
}

const char *image_format_name(image_format format)
{
    switch (format) {
    case IMAGE_FORMAT_PNG:
        return "png";
    case IMAGE_FORMAT_JPEG:
        return "jpeg";
    case IMAGE_FORMAT_WEBP:
        return "webp";
    case IMAGE_FORMAT_GIF:
        return "gif";
    case IMAGE_FORMAT_UNKNOWN:
        break;
    }
    return "unknown";
}

bool image_check_size(uint64_t width, uint64_t height, const image_limits *limits,
                      corral_error *err)
{
    if (width == 0 || height == 0) {
        corral_error_set(err, "image has no pixels (%llu x %llu)", (unsigned long long)width,
                         (unsigned long long)height);
        return false;
    }
    if (width > limits->max_side || height > limits->max_side) {
        corral_error_set(err, "image is %llu x %llu pixels, more than %u a side",
                         (unsigned long long)width, (unsigned long long)height,
                         limits->max_side);
        return false;
    }
    /* both sides are at most 2^32 here, so the product fits */
    if (width * height > limits->max_pixels) {
        corral_error_set(err, "image is %llu x %llu pixels, more than %llu in all",
                         (unsigned long long)width, (unsigned long long)height,
                         (unsigned long long)limits->max_pixels);
        return false;
    }
    return true;
}

image_rgb *image_rgb_create(uint32_t width, uint32_t height, corral_error *err)
{
    size_t bytes;
    if (!checked_mul_size(width, height, &bytes) || !checked_mul_size(bytes, 3, &bytes)) {
        corral_error_set(err, "image of %u x %u pixels is too large", width, height);
        return NULL;
    }
    image_rgb *image = calloc(1, sizeof *image);
    uint8_t *pixels = malloc(bytes ? bytes : 1);
    if (!image || !pixels) {
        free(image);
        free(pixels);
        corral_error_set(err, "out of memory for a %u x %u image", width, height);
        return NULL;
    }
    image->width = width;
    image->height = height;
    image->pixels = pixels;
    return image;
}

void image_rgb_free(image_rgb *image)
{
    if (!image)
        return;
    free(image->pixels);
    free(image);
}

image_rgb *image_decode(const uint8_t *data, size_t len, const image_limits *limits,
                        corral_error *err)
{
    if (!limits)
        limits = &image_default_limits;
    switch (image_sniff_format(data, len)) {
    case IMAGE_FORMAT_PNG:
        return image_decode_png(data, len, limits, err);
    case IMAGE_FORMAT_JPEG:
        return image_decode_jpeg(data, len, limits, err);
    case IMAGE_FORMAT_WEBP:
        return image_decode_webp(data, len, limits, err);
    case IMAGE_FORMAT_GIF:
        return image_decode_gif(data, len, limits, err);
    case IMAGE_FORMAT_UNKNOWN:
        break;
    }
    corral_error_set(err, "unsupported image format (expected PNG, JPEG, WebP or GIF)");
    return NULL;
}
