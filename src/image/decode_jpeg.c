/*
 * JPEG: libjpeg-turbo reads the file (markers, Huffman or arithmetic entropy data, baseline
 * or progressive) up to the DCT coefficients; jpeg_pixels.c turns those into RGB with the
 * reference decoder's arithmetic. libjpeg reports errors by longjmp: the jump lands in
 * jpeg_read_pixels, and everything that could leak is in a jpeg_job its caller owns and
 * frees on every path. Warnings that mean entropy data is missing or garbled (a truncated
 * file, a bad Huffman code) are errors here, where libjpeg would fill the gap with grey.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "image/decoders.h"
#include "image/jpeg_pixels.h"
#include "util/checked.h"

/* A progressive file may legally have many scans, each re-reading the image: past this many
 * it is an attack on decode time, not a photo (encoders use about ten). */
#define JPEG_MAX_SCANS 256

typedef struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    bool created;
    bool error_set; /* err already says why; libjpeg's message is not needed */
    const image_limits *limits;
    corral_error *err;
    uint8_t *planes[4];
    uint8_t *line;
    image_rgb *image;
    int orientation;
} jpeg_job;

static void jpeg_fail(j_common_ptr cinfo)
{
    jpeg_job *job = cinfo->client_data;
    if (!job->error_set) {
        char message[JMSG_LENGTH_MAX];
        (*cinfo->err->format_message)(cinfo, message);
        corral_error_set(job->err, "corrupt JPEG: %s", message);
    }
    longjmp(job->jump, 1);
}

static void jpeg_on_message(j_common_ptr cinfo, int level)
{
    if (level != -1)
        return; /* trace output */
    int code = cinfo->err->msg_code;
    if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
        code == JWRN_MUST_RESYNC)
        jpeg_fail(cinfo);
}

static void jpeg_on_progress(j_common_ptr cinfo)
{
    jpeg_job *job = cinfo->client_data;
    if (job->cinfo.input_scan_number > JPEG_MAX_SCANS) {
        corral_error_set(job->err, "corrupt JPEG: more than %d scans", JPEG_MAX_SCANS);
        job->error_set = true;
        jpeg_fail(cinfo);
    }
}

static void jpeg_fail_with(jpeg_job *job)
{
    job->error_set = true;
    jpeg_fail((j_common_ptr)&job->cinfo);
}

/* The colour model, decided as the reference decoder decides it. */
static jpeg_color jpeg_color_of(const struct jpeg_decompress_struct *cinfo)
{
    if (cinfo->num_components == 1)
        return JPEG_COLOR_GRAY;
    if (cinfo->num_components == 3) {
        const jpeg_component_info *c = cinfo->comp_info;
        bool ids_rgb = c[0].component_id == 'R' && c[1].component_id == 'G' &&
                       c[2].component_id == 'B';
        bool adobe_rgb = cinfo->saw_Adobe_marker && cinfo->Adobe_transform == 0 &&
                         !cinfo->saw_JFIF_marker;
        return ids_rgb || adobe_rgb ? JPEG_COLOR_RGB : JPEG_COLOR_YCBCR;
    }
    if (cinfo->saw_Adobe_marker && cinfo->Adobe_transform == 0)
        return JPEG_COLOR_CMYK;
    if (cinfo->saw_Adobe_marker && cinfo->Adobe_transform == 2)
        return JPEG_COLOR_YCCK;
    return JPEG_COLOR_YCBCR;
}

/* Inverse-DCT component ci into job->planes[ci] and describe it in plane. */
static void jpeg_component_plane(jpeg_job *job, jvirt_barray_ptr coefs, int ci,
                                 jpeg_plane *plane)
{
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    const jpeg_component_info *comp = &cinfo->comp_info[ci];
    int h = comp->h_samp_factor, v = comp->v_samp_factor;
    int hmax = cinfo->max_h_samp_factor, vmax = cinfo->max_v_samp_factor;
    if (h <= 0 || v <= 0 || hmax % h != 0 || vmax % v != 0 || hmax / h > 4 || vmax / v > 4) {
        corral_error_set(job->err, "unsupported JPEG chroma subsampling (%dx%d of %dx%d)", h,
                         v, hmax, vmax);
        jpeg_fail_with(job);
    }
    if (!comp->quant_table) {
        corral_error_set(job->err, "corrupt JPEG: component %d has no quantisation table", ci);
        jpeg_fail_with(job);
    }
    size_t stride = (size_t)comp->width_in_blocks * 8, bytes;
    if (!checked_mul_size(stride, (size_t)comp->height_in_blocks * 8, &bytes) ||
        !(job->planes[ci] = malloc(bytes ? bytes : 1))) {
        corral_error_set(job->err, "out of memory for a JPEG component");
        jpeg_fail_with(job);
    }
    const UINT16 *quant = comp->quant_table->quantval;
    for (JDIMENSION by = 0; by < comp->height_in_blocks; by++) {
        JBLOCKARRAY row = (*cinfo->mem->access_virt_barray)((j_common_ptr)cinfo, coefs, by, 1,
                                                            FALSE);
        for (JDIMENSION bx = 0; bx < comp->width_in_blocks; bx++) {
            int16_t block[64];
            /* dequantised into 16 bits, as the reference keeps them */
            for (int k = 0; k < 64; k++)
                block[k] = (int16_t)(row[0][bx][k] * quant[k]);
            jpeg_idct_block(block, job->planes[ci] + by * 8 * stride + bx * 8, stride);
        }
    }
    plane->samples = job->planes[ci];
    plane->stride = stride;
    plane->width = (uint32_t)(((uint64_t)cinfo->image_width * h + hmax - 1) / hmax);
    plane->height = (uint32_t)(((uint64_t)cinfo->image_height * v + vmax - 1) / vmax);
    plane->hs = (uint32_t)(hmax / h);
    plane->vs = (uint32_t)(vmax / v);
}

static bool jpeg_read_pixels(jpeg_job *job, const uint8_t *data, size_t len)
{
    if (setjmp(job->jump))
        return false;
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    /* client_data survives jpeg_create_decompress, so even its errors reach jpeg_fail; and
     * a half-made decompressor is safe to destroy */
    cinfo->client_data = job;
    job->created = true;
    jpeg_create_decompress(cinfo);
    job->progress.progress_monitor = jpeg_on_progress;
    cinfo->progress = &job->progress;
    jpeg_mem_src(cinfo, data, (unsigned long)len);
    jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(cinfo, TRUE);

    uint32_t width = cinfo->image_width, height = cinfo->image_height;
    if (!image_check_size(width, height, job->limits, job->err))
        jpeg_fail_with(job);
    if (cinfo->num_components != 1 && cinfo->num_components != 3 && cinfo->num_components != 4) {
        corral_error_set(job->err, "unsupported JPEG with %d components", cinfo->num_components);
        jpeg_fail_with(job);
    }
    /* The coefficients of the whole image are held at once, two bytes each: at most about
     * 6 bytes a pixel (three full-resolution components) plus MCU padding. */
    cinfo->mem->max_memory_to_use = (long)(job->limits->max_pixels * 8 + (64u << 20));
    jvirt_barray_ptr *coefs = jpeg_read_coefficients(cinfo);

    for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && job->orientation == 1)
            job->orientation = image_exif_orientation(m->data, m->data_length);

    int n = cinfo->num_components;
    jpeg_plane planes[4];
    for (int ci = 0; ci < n; ci++)
        jpeg_component_plane(job, coefs[ci], ci, &planes[ci]);
    jpeg_color color = jpeg_color_of(cinfo);

    job->image = image_rgb_create(width, height, job->err);
    job->line = job->image ? malloc(4 * ((size_t)width + 4)) : NULL;
    if (!job->line) {
        if (job->image)
            corral_error_set(job->err, "out of memory for a %u x %u image", width, height);
        jpeg_fail_with(job);
    }
    jpeg_planes_to_rgb(planes, n, color, width, height, job->line, job->image->pixels);
    return true;
}

image_rgb *image_decode_jpeg(const uint8_t *data, size_t len, const image_limits *limits,
                             corral_error *err)
{
    jpeg_job *job = calloc(1, sizeof *job);
    if (!job) {
        corral_error_set(err, "out of memory for the JPEG decoder");
        return NULL;
    }
    job->limits = limits;
    job->err = err;
    job->orientation = 1;
    job->cinfo.err = jpeg_std_error(&job->jerr);
    job->jerr.error_exit = jpeg_fail;
    job->jerr.emit_message = jpeg_on_message;
    bool ok = jpeg_read_pixels(job, data, len);
    if (job->created)
        jpeg_destroy_decompress(&job->cinfo);
    for (int i = 0; i < 4; i++)
        free(job->planes[i]);
    free(job->line);
    image_rgb *image = job->image;
    int orientation = job->orientation;
    free(job);
    if (!ok) {
        image_rgb_free(image);
        return NULL;
    }
    return image_apply_orientation(image, orientation, err);
}
