/*
 * DeepSeek-OCR's global and local views (views.c; preprocess.h's VIEWS): the grid of tiles an
 * image is cut into, Pillow's bicubic resize, and the views as the projector takes them.
 */
#ifndef CORRAL_IMAGE_VIEWS_H
#define CORRAL_IMAGE_VIEWS_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"
#include "image/image.h"
#include "image/preprocess.h"

/* The most tiles a side of a grid may have, and a grid in all (Unlimited-OCR's 32 fit). */
#define IMAGE_MAX_VIEW_TILES 32

/* The grid (cols x rows tiles of p->tile_size) an image of width x height is cut into; 0 x 0
 * when it fits in one tile (the global view alone). */
bool image_views_grid(const image_preprocess *p, uint32_t width, uint32_t height, uint32_t *cols,
                      uint32_t *rows, corral_error *err);

/* Pillow's bicubic resize of src to width x height (a copy when the size is src's). */
image_rgb *image_resize_bicubic_pillow(const image_rgb *src, uint32_t width, uint32_t height,
                                       corral_error *err);

/* The rows of nx pixels that hold an image_size square's pixels one after another (the last
 * row padded with zeros): how a grid nx wide carries its global view. */
uint32_t image_views_global_rows(uint32_t nx, uint32_t image_size);

/* The views of image, normalised, for nx x ny as image_preprocess_size gave it: the grid
 * (nx wide, its tile_size squares side by side), then the global view's image_size x
 * image_size pixels one after another in image_views_global_rows(nx) rows of nx, the rest
 * zeros; or, when nx x ny is the image_size square, the global view alone. */
image_pixels *image_views_run(const image_preprocess *p, const image_rgb *image, uint32_t nx,
                              uint32_t ny, corral_error *err);

#endif
