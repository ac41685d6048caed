/*
 * EXIF orientation: finding the tag in a JPEG's APP1 segment and turning the bitmap upright.
 * The parser reads only IFD0's entry count and entries, each read bounds-checked against the
 * segment, so a hostile segment can at worst give "no orientation".
 */
#include <stdlib.h>
#include <string.h>

#include "image/decoders.h"

#define EXIF_TAG_ORIENTATION 0x0112
#define EXIF_TYPE_SHORT 3

static uint32_t read_u16(const uint8_t *p, bool big_endian)
{
    return big_endian ? (uint32_t)(p[0] << 8 | p[1]) : (uint32_t)(p[1] << 8 | p[0]);
}

static uint32_t read_u32(const uint8_t *p, bool big_endian)
{
    return big_endian ? (read_u16(p, true) << 16 | read_u16(p + 2, true))
                      : (read_u16(p + 2, false) << 16 | read_u16(p, false));
}

int image_exif_orientation(const uint8_t *app1, size_t len)
{
    if (len < 6 || memcmp(app1, "Exif\0\0", 6) != 0)
        return 1;
    const uint8_t *tiff = app1 + 6;
    size_t size = len - 6;
    if (size < 8)
        return 1;
    bool big_endian;
    if (memcmp(tiff, "MM", 2) == 0)
        big_endian = true;
    else if (memcmp(tiff, "II", 2) == 0)
        big_endian = false;
    else
        return 1;
    if (read_u16(tiff + 2, big_endian) != 42)
        return 1;
    uint32_t ifd = read_u32(tiff + 4, big_endian);
    if (ifd > size || size - ifd < 2)
        return 1;
    uint32_t count = read_u16(tiff + ifd, big_endian);
    if ((size - ifd - 2) / 12 < count)
        return 1;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *entry = tiff + ifd + 2 + (size_t)i * 12;
        if (read_u16(entry, big_endian) != EXIF_TAG_ORIENTATION)
            continue;
        if (read_u16(entry + 2, big_endian) != EXIF_TYPE_SHORT ||
            read_u32(entry + 4, big_endian) != 1)
            return 1;
        uint32_t value = read_u16(entry + 8, big_endian); /* a SHORT sits in the value field */
        return value >= 1 && value <= 8 ? (int)value : 1;
    }
    return 1;
}

image_rgb *image_apply_orientation(image_rgb *image, int orientation, corral_error *err)
{
    if (orientation < 2 || orientation > 8)
        return image;
    /* 5..8 swap the axes. For output pixel (x, y), the stored pixel it shows is found by
     * undoing the flips and turns the tag describes. */
    bool transpose = orientation >= 5;
    uint32_t w = image->width, h = image->height;
    uint32_t out_w = transpose ? h : w, out_h = transpose ? w : h;
    image_rgb *out = image_rgb_create(out_w, out_h, err);
    if (!out) {
        image_rgb_free(image);
        return NULL;
    }
    for (uint32_t y = 0; y < out_h; y++) {
        for (uint32_t x = 0; x < out_w; x++) {
            uint32_t sx, sy;
            switch (orientation) {
            case 2: /* mirrored left-right */
                sx = w - 1 - x, sy = y;
                break;
            case 3: /* turned 180 degrees */
                sx = w - 1 - x, sy = h - 1 - y;
                break;
            case 4: /* mirrored top-bottom */
                sx = x, sy = h - 1 - y;
                break;
            case 5: /* mirrored along the main diagonal */
                sx = y, sy = x;
                break;
            case 6: /* stored turned 90 degrees anticlockwise: turn clockwise */
                sx = y, sy = h - 1 - x;
                break;
            case 7: /* mirrored along the other diagonal */
                sx = w - 1 - y, sy = h - 1 - x;
                break;
            default: /* 8: stored turned 90 degrees clockwise: turn anticlockwise */
                sx = w - 1 - y, sy = x;
                break;
            }
            memcpy(out->pixels + ((size_t)y * out_w + x) * 3,
                   image->pixels + ((size_t)sy * w + sx) * 3, 3);
        }
    }
    image_rgb_free(image);
    return out;
}
