/*
 * PNG through libpng, as the reference decoder presents it: every colour type becomes 8-bit
 * RGB (palette expanded, grey replicated, 16-bit samples cut to their high byte) and alpha,
 * whether a channel or a tRNS key, is dropped. libpng reports errors by longjmp; the jump
 * lands in png_read_pixels, and everything it could leak lives in a png_job owned by the
 * caller, so nothing is lost on any error path.
 */
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "image/decoders.h"

/* Ancillary chunks (text, ICC profiles) are never needed: cap what libpng may buffer or
 * decompress for one, and how many it keeps. */
#define PNG_CHUNK_MAX_BYTES (1u << 20)
#define PNG_CHUNK_MAX_COUNT 64

typedef struct png_job {
    const uint8_t *data;
    size_t len;
    size_t pos;
    const image_limits *limits;
    corral_error *err;
    png_structp png;
    png_infop info;
    image_rgb *image;
    png_bytep *rows;
    bool error_set; /* err already says why (a limit); libpng's message is not needed */
} png_job;

static void png_on_error(png_structp png, png_const_charp message)
{
    png_job *job = png_get_error_ptr(png);
    if (!job->error_set)
        corral_error_set(job->err, "corrupt PNG: %s", message);
    png_longjmp(png, 1);
}

/* Warnings are about chunks libpng ignores anyway (a bad ICC profile, a CRC in a text
 * chunk): the pixels are still right. */
static void png_on_warning(png_structp png, png_const_charp message)
{
    (void)png;
    (void)message;
}

static void png_read_from_memory(png_structp png, png_bytep out, size_t want)
{
    png_job *job = png_get_io_ptr(png);
    if (want > job->len - job->pos)
        png_error(png, "file is truncated");
    memcpy(out, job->data + job->pos, want);
    job->pos += want;
}

static bool png_read_pixels(png_job *job)
{
    if (setjmp(png_jmpbuf(job->png)))
        return false;
    png_structp png = job->png;
    png_infop info = job->info;
    png_set_read_fn(png, job, png_read_from_memory);
    png_set_chunk_malloc_max(png, PNG_CHUNK_MAX_BYTES);
    png_set_chunk_cache_max(png, PNG_CHUNK_MAX_COUNT);
    png_read_info(png, info);

    png_uint_32 width = png_get_image_width(png, info);
    png_uint_32 height = png_get_image_height(png, info);
    if (!image_check_size(width, height, job->limits, job->err)) {
        job->error_set = true;
        png_error(png, "size");
    }
    int color_type = png_get_color_type(png, info);
    png_set_strip_16(png);
    png_set_packing(png);
    if (color_type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) {
        png_set_expand_gray_1_2_4_to_8(png);
        png_set_gray_to_rgb(png);
    }
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_bit_depth(png, info) != 8 || png_get_channels(png, info) != 3 ||
        png_get_rowbytes(png, info) != (size_t)width * 3)
        png_error(png, "unexpected pixel layout after conversion to RGB");

    job->image = image_rgb_create(width, height, job->err);
    job->rows = job->image ? malloc(sizeof *job->rows * height) : NULL;
    if (!job->rows) {
        if (job->image)
            corral_error_set(job->err, "out of memory for a %u x %u image", width, height);
        job->error_set = true;
        png_error(png, "memory");
    }
    for (png_uint_32 y = 0; y < height; y++)
        job->rows[y] = job->image->pixels + (size_t)y * width * 3;
    /* Only the rows are read: whatever follows the image data (more chunks, or compressed
     * bytes past the last row) cannot change the pixels and is never inflated. */
    png_read_image(png, job->rows);
    return true;
}

image_rgb *image_decode_png(const uint8_t *data, size_t len, const image_limits *limits,
                            corral_error *err)
{
    png_job job = {.data = data, .len = len, .limits = limits, .err = err};
    job.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, png_on_error, png_on_warning);
    job.info = job.png ? png_create_info_struct(job.png) : NULL;
    bool ok = job.info && png_read_pixels(&job);
    if (!job.info)
        corral_error_set(err, "out of memory for the PNG decoder");
    png_destroy_read_struct(job.png ? &job.png : NULL, job.info ? &job.info : NULL, NULL);
    free(job.rows);
    if (!ok) {
        image_rgb_free(job.image);
        return NULL;
    }
    return job.image;
}
