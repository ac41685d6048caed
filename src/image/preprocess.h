/*
 * Preprocessing a decoded image into the float pixels a vision encoder takes, as llama.cpp's
 * multimodal library does it for each projector, so the encoder sees bit-identical input:
 * its bilinear resize on 8-bit samples (float weights, results truncated), then per-channel
 * normalisation (v / 255 - mean) / std in float32.
 *
 * The ways to fit an image:
 * - LETTERBOX (gemma3, SigLIP): scale to fit a fixed square, keep the aspect ratio, centre on
 *   black; the encoder always gets image_size x image_size.
 * - SMART_RESIZE (qwen2-vl, qwen2.5-vl): keep the aspect ratio, round each side to a multiple
 *   of patch_size * merge, and scale into [min_pixels, max_pixels]; no padding.
 * - ANYRES (LLaVA 1.6): the image stretched to the image_size square (the overview); when a
 *   side is longer than image_size, also letterboxed onto black at the pinpoint that keeps
 *   the most of it (the least waste on a tie) and cut into image_size squares, row by row.
 *   The result is the column of squares, overview first: image_size x image_size * (1 +
 *   slices).
 * - TILES (llama4, as llama.cpp d32676d77 does it): ANYRES's squares and pinpoints, but the
 *   overview resized with corners aligned, the slices letterboxed with the bicubic resize of
 *   slices.h, and the overview last: image_size x image_size * (slices + 1).
 * - STRETCH (minicpm-v): an image no larger than image_size on either side goes to the
 *   image_size square whatever its aspect; a larger one the reference cuts into slices,
 *   which this preprocessing refuses.
 * - VIEWS (DeepSeek-OCR, views.h): an image_size square of the image fitted onto the colour
 *   pad (the global view) and, for an image larger than tile_size on a side, that image
 *   stretched to the grid of tile_size squares (min_tiles to max_tiles of them) whose aspect
 *   is nearest its own; both resized with Pillow's bicubic rule. The pixels hold the grid
 *   (tile_size x cols wide, tile_size x rows tall), then the global view's pixels one after
 *   another in as many more rows of that width as they fill (zeros after them); without a
 *   grid, the image_size square of the global view alone.
 * - CANVAS (mllama, as transformers' MllamaImageProcessor sizes it): the arrangement of at
 *   most max_tiles image_size tiles that takes the image at the smallest scale of at least 1
 *   (else the largest below), the smallest such canvas; the image resized to fit it (this
 *   file's bilinear resize, where transformers uses Pillow's and ollama Go's, both of which
 *   filter over more pixels when shrinking), black to its right and below. The encoder cuts
 *   the canvas into its tiles.
 * LETTERBOX pads with the colour pad (black for gemma3, LLaVA's mean colour for LLaVA 1.5,
 * grey for VIEWS).
 *
 * The vision code fills image_preprocess from the projector file (image size, patch size,
 * mean and std) and the projector type (fit, merge, pixel bounds).
 */
#ifndef CORRAL_IMAGE_PREPROCESS_H
#define CORRAL_IMAGE_PREPROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"
#include "image/image.h"

typedef enum image_fit {
    IMAGE_FIT_LETTERBOX,
    IMAGE_FIT_SMART_RESIZE,
    IMAGE_FIT_ANYRES,
    IMAGE_FIT_LONGEST_EDGE, /* ollama's mistral3: at most image_size a side, patch multiples */
    IMAGE_FIT_STRETCH,
    IMAGE_FIT_TILES, /* llama4: ANYRES's squares, the overview last */
    IMAGE_FIT_VIEWS, /* DeepSeek-OCR: a grid of tiles and a global view */
    IMAGE_FIT_CANVAS, /* mllama: a canvas of up to max_tiles tiles, the image top left */
} image_fit;

/* The most tiles a CANVAS may have. */
#define IMAGE_MAX_CANVAS_TILES 16

#define IMAGE_MAX_PINPOINTS 32

typedef struct image_preprocess {
    image_fit fit;
    uint32_t image_size; /* LETTERBOX, STRETCH: the square's side; LONGEST_EDGE: the longest side */
    uint32_t patch_size;
    uint32_t merge;      /* SMART_RESIZE: sides are multiples of patch_size * merge */
    uint64_t min_pixels; /* SMART_RESIZE: bounds on width * height of the result */
    uint64_t max_pixels;
    float mean[3];
    float std[3];
    uint8_t pad[3];       /* LETTERBOX: the background */
    /* ANYRES, TILES: width x height pairs, each a grid of image_size squares */
    uint32_t n_pinpoints;
    uint32_t pinpoints[IMAGE_MAX_PINPOINTS][2];
    /* VIEWS: a tile's side and the fewest and most tiles of a grid; CANVAS: the most tiles
     * (of image_size) */
    uint32_t tile_size, min_tiles, max_tiles;
} image_preprocess;

/* Float pixels: ny rows of nx RGB triples (height x width x 3, channels interleaved). */
typedef struct image_pixels {
    uint32_t nx;
    uint32_t ny;
    float *data;
} image_pixels;

/* The preprocessing llama.cpp applies for a projector type (the projector file's
 * clip.projector_type): "gemma3" letterboxes to image_size; "qwen2.5vl_merger" and "qwen3vl_merger" smart-resize
 * to multiples of 2 * patch_size within 8 to 4096 merged tokens; "resampler" stretches to
 * image_size. image_size, patch_size,
 * mean and std are the projector file's clip.vision.* values. false with err set for any
 * other type ("image preprocessing for projector type X is not supported"). */
bool image_preprocess_for_projector(const char *projector_type, uint32_t image_size,
                                    uint32_t patch_size, const float mean[3],
                                    const float std[3], image_preprocess *out,
                                    corral_error *err);

/* Qwen's token-count bounds as pixel bounds: n tokens of (patch_size * merge)^2 pixels. */
void image_preprocess_set_token_bounds(image_preprocess *p, uint32_t min_tokens,
                                       uint32_t max_tokens);

/* The size (nx, ny) an image of width x height becomes. false with err set when the
 * parameters are unusable (a zero patch size or std, bounds the wrong way round). */
bool image_preprocess_size(const image_preprocess *p, uint32_t width, uint32_t height,
                           uint32_t *nx, uint32_t *ny, corral_error *err);

/* Resize and normalise image as p says. NULL with err set on bad parameters or no memory. */
image_pixels *image_preprocess_run(const image_preprocess *p, const image_rgb *image,
                                   corral_error *err);
void image_pixels_free(image_pixels *pixels);

/* The reference's bilinear resize of src to width x height. Like the reference's, it
 * resamples even to the same size (its sample grid is not aligned to the source's), so
 * callers copy instead where the reference does. NULL with err set when memory runs out. */
image_rgb *image_resize_bilinear(const image_rgb *src, uint32_t width, uint32_t height,
                                 corral_error *err);
/* llama.cpp d32676d77's bilinear resize (llama4's overview): the sample grid's ends on the
 * source's first and last pixels, results truncated to 8 bits. */
image_rgb *image_resize_bilinear_corners(const image_rgb *src, uint32_t width, uint32_t height,
                                         corral_error *err);

#endif
