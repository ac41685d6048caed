/* The vision tests' PNG through the runner's image steps (vision_png_fixture.h). */
#include "vision_png_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "file_fixture.h"
#include "image/image.h"
#include "image/projector_preprocess.h"

void vision_encode_png(const corral_mmproj *mm, const char *path, uint32_t want_nx,
                       uint32_t want_ny, corral_image_embd *embd)
{
    corral_error err = {0};
    image_rgb *rgb = image_decode_file(path, 1 << 20, NULL, &err);
    if (!rgb)
        fail_msg("%s: %s", path, err.message);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    assert_non_null(pixels);
    assert_int_equal(pixels->nx, want_nx);
    assert_int_equal(pixels->ny, want_ny);
    if (!corral_mmproj_encode(mm, pixels->data, pixels->nx, pixels->ny, 2, embd, &err))
        fail_msg("%s", err.message);
    image_pixels_free(pixels);
    image_rgb_free(rgb);
}

image_rgb *vision_decode_png(const char *path)
{
    size_t size;
    uint8_t *bytes = file_fixture_read(path, &size);
    corral_error err = {0};
    image_rgb *rgb = image_decode(bytes, size, NULL, &err);
    free(bytes);
    if (!rgb)
        fail_msg("%s: %s", path, err.message);
    return rgb;
}

image_preprocess vision_preprocessing(const corral_mmproj *mm)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    return image_preprocess_from_params(&params);
}
