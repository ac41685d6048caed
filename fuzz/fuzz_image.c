/*
 * libFuzzer target for the image decoders (PNG, JPEG, WebP, GIF, and the EXIF orientation
 * parser) and the preprocessing after them: any byte string must either be rejected with a
 * message or decode to a bitmap of the size it claims, which then preprocesses for every
 * kind of projector, minicpm-v's slicing included. Limits are tighter than the defaults so
 * each input stays fast.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "image/decoders.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "image/slices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    volatile int sink = image_exif_orientation(data, size);
    const image_limits limits = {.max_side = 4096, .max_pixels = 1u << 20};
    corral_error err = {{0}};
    image_rgb *image = image_decode(data, size, &limits, &err);
    if (!image) {
        if (strlen(err.message) == 0)
            __builtin_trap();
        return 0;
    }
    if (image->width == 0 || image->height == 0 || image->width > limits.max_side ||
        image->height > limits.max_side ||
        (uint64_t)image->width * image->height > limits.max_pixels)
        __builtin_trap();
    /* touch the last pixel: the bitmap must be as large as it claims */
    sink += image->pixels[(size_t)image->width * image->height * 3 - 1];

    image_preprocess letterbox = {.fit = IMAGE_FIT_LETTERBOX, .image_size = 32,
                                  .patch_size = 4, .mean = {0.5f, 0.5f, 0.5f},
                                  .std = {0.5f, 0.5f, 0.5f}};
    image_preprocess smart = {.fit = IMAGE_FIT_SMART_RESIZE, .patch_size = 14, .merge = 2,
                              .mean = {0.5f, 0.5f, 0.5f}, .std = {0.5f, 0.5f, 0.5f}};
    image_preprocess_set_token_bounds(&smart, 4, 64);
    image_preprocess anyres = {.fit = IMAGE_FIT_ANYRES, .image_size = 16, .patch_size = 4,
                               .mean = {0.5f, 0.5f, 0.5f}, .std = {0.5f, 0.5f, 0.5f},
                               .n_pinpoints = 3, .pinpoints = {{16, 32}, {32, 16}, {32, 32}}};
    const image_preprocess *params[3] = {&letterbox, &smart, &anyres};
    for (int i = 0; i < 3; i++) {
        image_pixels *pixels = image_preprocess_run(params[i], image, &err);
        if (!pixels)
            __builtin_trap(); /* any decoded image preprocesses */
        sink += pixels->data[(size_t)pixels->nx * pixels->ny * 3 - 1] > 0.0f;
        image_pixels_free(pixels);
    }
    /* minicpm-v's overview and slices: a plan is made or refused with a message, and a plan
     * made cuts into parts of its sizes */
    image_slice_plan plan;
    if (image_slice_plan_for(image->width, image->height, 16, 4, 9, &plan, &err)) {
        image_pixels *parts[1 + IMAGE_MAX_SLICES];
        size_t n = 1 + (size_t)plan.cols * plan.rows;
        if (!image_slices_run(&anyres, &plan, image, parts, &err))
            __builtin_trap();
        for (size_t k = 0; k < n; k++) {
            if (parts[k]->nx != (k ? plan.cell_w : plan.overview_w) ||
                parts[k]->ny != (k ? plan.cell_h : plan.overview_h) || parts[k]->nx % 4 != 0 ||
                parts[k]->ny % 4 != 0)
                __builtin_trap();
            sink += parts[k]->data[(size_t)parts[k]->nx * parts[k]->ny * 3 - 1] > 0.0f;
            image_pixels_free(parts[k]);
        }
    } else if (strlen(err.message) == 0) {
        __builtin_trap();
    }
    (void)sink;
    image_rgb_free(image);
    return 0;
}
