/*
 * LLaVA-UHD slicing, as llama.cpp's multimodal library in the copy ollama vendors (ec98e2002)
 * does it for minicpm-v: an image larger than the tower's square on either side becomes an
 * overview (the whole image scaled to about the square's area, aspect kept, sides in whole
 * patches) followed by a grid of slices cut from the image resized so that each cell is
 * again about the square's area. The grid is chosen from the image's area in squares (at
 * most max_slices cells) and its aspect ratio. An image no larger than the square is the
 * square alone (stretched, see preprocess.h's STRETCH), with no slices.
 *
 * The overview is resized with the bilinear rule of preprocess.h, the refined image with
 * that library's bicubic one (below); every size and float step follows its code.
 *
 * LFM2-VL's tiles (image_tile_plan_for, llama.cpp d32676d77) are another plan of the same
 * shape: fixed-size tiles of a grid chosen by aspect, the thumbnail last, both resized with
 * that version's corner-aligned bilinear rule.
 */
#ifndef CORRAL_IMAGE_SLICES_H
#define CORRAL_IMAGE_SLICES_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"
#include "image/image.h"
#include "image/preprocess.h"

/* The most slices a plan may ask for: llama.cpp's max_slice_nums for minicpm-v (its grid
 * search never goes above it); LFM2-VL's tiles go to 10, the most any plan has. */
#define IMAGE_MAX_UHD_SLICES 9
#define IMAGE_MAX_SLICES 10

typedef struct image_slice_plan {
    uint32_t overview_w, overview_h;
    uint32_t cols, rows;           /* the grid of slices; 0 x 0: the overview alone */
    uint32_t refined_w, refined_h; /* the image resized before cutting: cols x rows cells */
    uint32_t cell_w, cell_h;       /* one slice */
    /* LFM2-VL's tiles (image_tile_plan_for): the overview and the refined image resized by
     * d32676d77's bilinear rule (corners aligned, preprocess.h), and the overview (its
     * thumbnail) after the slices rather than before them */
    bool tiles;
} image_slice_plan;

/* The plan for an image of width x height, for a tower of square side image_size taking
 * sides in multiples of align (its patch), with at most max_slices cells (1 to
 * IMAGE_MAX_UHD_SLICES). false with
 * err for parameters or sizes out of range. */
bool image_slice_plan_for(uint32_t width, uint32_t height, uint32_t image_size, uint32_t align,
                          uint32_t max_slices, image_slice_plan *out, corral_error *err);

/*
 * LFM2-VL's tiling as llama.cpp d32676d77 does it: the overview (the thumbnail) is the image
 * as p (a smart resize) sizes it; an image wider or taller than 2 x tile pixels is also
 * resized to a grid of tile x tile cells and cut. The grid has 2 to max_tiles cells, its
 * aspect the nearest to the image's (a tie goes to the later grid in the reference's order
 * when the image covers more than half of it). false with err for unusable sizes.
 */
bool image_tile_plan_for(const image_preprocess *p, uint32_t width, uint32_t height,
                         uint32_t tile, uint32_t max_tiles, image_slice_plan *out,
                         corral_error *err);

/* The part k of a plan's 1 + cols * rows is the overview: 0, or the last for tiles. */
bool image_slice_part_is_overview(const image_slice_plan *plan, size_t k);

/* The parts of image under plan, normalised as p says: parts[0] the overview, then the
 * slices in row order, 1 + cols * rows of them (for tiles, the slices first and the overview
 * last). false with err (and nothing in parts) when
 * memory runs out or the plan does not fit the image. Free each with image_pixels_free. */
bool image_slices_run(const image_preprocess *p, const image_slice_plan *plan,
                      const image_rgb *image, image_pixels **parts, corral_error *err);

/* The reference's bicubic resize of src to width x height (its own kernel: cubic
 * interpolation through four samples per axis from the nearest-lower source pixel, edges
 * clamped, rounded to 8 bits). NULL with err set when memory runs out. */
image_rgb *image_resize_bicubic(const image_rgb *src, uint32_t width, uint32_t height,
                                corral_error *err);

#endif
