/*
 * Turning a JPEG's dequantised DCT coefficients into RGB the way the reference decoder
 * (stb_image, inside llama.cpp's multimodal library) does, so a JPEG gives the model exactly
 * the pixels it gets there: its 12-bit fixed-point inverse DCT, its triangle-filter chroma
 * upsampling and its fixed-point YCbCr conversion. libjpeg-turbo's own output differs from
 * these by a level or two in about one sample in a hundred. Entropy decoding (baseline,
 * progressive, restarts) is libjpeg-turbo's, in decode_jpeg.c.
 */
#ifndef CORRAL_IMAGE_JPEG_PIXELS_H
#define CORRAL_IMAGE_JPEG_PIXELS_H

#include <stddef.h>
#include <stdint.h>

/* One 8x8 block: coef holds dequantised coefficients in natural (row-major) order, and the
 * 64 samples go to out, rows stride bytes apart. */
void jpeg_idct_block(const int16_t coef[64], uint8_t *out, size_t stride);

/* One component's samples after the IDCT. */
typedef struct jpeg_plane {
    const uint8_t *samples;
    size_t stride;
    uint32_t width;  /* samples that belong to the image in a row (before upsampling) */
    uint32_t height; /* rows that belong to the image */
    uint32_t hs;     /* upsampling factors to the full image: 1, 2, or more (then repeated) */
    uint32_t vs;
} jpeg_plane;

typedef enum jpeg_color {
    JPEG_COLOR_GRAY,  /* one plane */
    JPEG_COLOR_YCBCR, /* three planes; with a fourth, the fourth is ignored */
    JPEG_COLOR_RGB,   /* three planes stored as R, G, B */
    JPEG_COLOR_CMYK,  /* four planes, inverted CMYK as Adobe writes it */
    JPEG_COLOR_YCCK,  /* four planes, YCbCr + K */
} jpeg_color;

/* Fill rgb (height rows of width RGB triples) from the planes: n_planes is 1 for GRAY, 3 for
 * YCBCR or RGB, 4 for CMYK, YCCK or YCbCr with an ignored fourth. line is scratch of at least
 * 4 * (width + 4) bytes. */
void jpeg_planes_to_rgb(const jpeg_plane *planes, int n_planes, jpeg_color color,
                        uint32_t width, uint32_t height, uint8_t *line, uint8_t *rgb);

#endif
