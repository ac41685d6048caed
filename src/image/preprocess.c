/*
 * Vision preprocessing (see preprocess.h): target size, bilinear resize, letterbox and
 * normalisation. Every float expression is written in the order and precision the reference
 * evaluates it (float32, no fused multiply-add), because the point is identical pixels.
 */
#include "image/preprocess.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image/slices.h"
#include "image/views.h"
#include "util/checked.h"

/* Bounds on what any parameters may produce: a projector file cannot make us allocate
 * more than this for one image. */
#define PREPROCESS_MAX_SIDE 65536u
#define PREPROCESS_MAX_PIXELS (1ull << 26)

void image_preprocess_set_token_bounds(image_preprocess *p, uint32_t min_tokens,
                                       uint32_t max_tokens)
{
    uint64_t side = (uint64_t)p->patch_size * p->merge;
    p->min_pixels = min_tokens * side * side;
    p->max_pixels = max_tokens * side * side;
}

static bool preprocess_check(const image_preprocess *p, corral_error *err)
{
    if (p->patch_size == 0) {
        corral_error_set(err, "image preprocessing: patch size is 0");
        return false;
    }
    for (int c = 0; c < 3; c++) {
        if (!(p->std[c] != 0.0f) || !isfinite(p->std[c]) || !isfinite(p->mean[c])) {
            corral_error_set(err, "image preprocessing: unusable mean/std for channel %d", c);
            return false;
        }
    }
    if (p->fit != IMAGE_FIT_SMART_RESIZE) {
        if (p->image_size == 0 || p->image_size > PREPROCESS_MAX_SIDE) {
            corral_error_set(err, "image preprocessing: image size %u out of range",
                             p->image_size);
            return false;
        }
        if (p->fit == IMAGE_FIT_VIEWS) {
            if (p->tile_size == 0 || p->tile_size > PREPROCESS_MAX_SIDE / IMAGE_MAX_VIEW_TILES ||
                p->min_tiles == 0 || p->min_tiles > p->max_tiles ||
                p->max_tiles > IMAGE_MAX_VIEW_TILES) {
                corral_error_set(err, "image preprocessing: tiles of %u pixels, %u to %u of them",
                                 p->tile_size, p->min_tiles, p->max_tiles);
                return false;
            }
            return true;
        }
        if (p->fit == IMAGE_FIT_CANVAS) {
            if (p->max_tiles == 0 || p->max_tiles > IMAGE_MAX_CANVAS_TILES) {
                corral_error_set(err, "image preprocessing: a canvas of %u tiles", p->max_tiles);
                return false;
            }
            return true;
        }
        if (p->fit != IMAGE_FIT_ANYRES && p->fit != IMAGE_FIT_TILES)
            return true;
        if (p->n_pinpoints == 0 || p->n_pinpoints > IMAGE_MAX_PINPOINTS) {
            corral_error_set(err, "image preprocessing: %u pinpoints", p->n_pinpoints);
            return false;
        }
        uint64_t S = p->image_size;
        for (uint32_t i = 0; i < p->n_pinpoints; i++) {
            uint64_t w = p->pinpoints[i][0], h = p->pinpoints[i][1];
            /* the column of the overview and the slices is bounded like any result */
            if (w == 0 || h == 0 || w % S != 0 || h % S != 0 ||
                (w / S) * (h / S) + 1 > PREPROCESS_MAX_PIXELS / (S * S)) {
                corral_error_set(err, "image preprocessing: pinpoint %llu x %llu is not a "
                                 "grid of %llu-pixel squares within bounds",
                                 (unsigned long long)w, (unsigned long long)h,
                                 (unsigned long long)S);
                return false;
            }
        }
        return true;
    }
    uint64_t align = (uint64_t)p->patch_size * p->merge;
    if (p->merge == 0 || align > 4096 || p->max_pixels == 0 || p->min_pixels > p->max_pixels ||
        p->max_pixels > PREPROCESS_MAX_PIXELS) {
        corral_error_set(err, "image preprocessing: unusable smart-resize bounds "
                              "(align %llu, pixels %llu..%llu)",
                         (unsigned long long)align, (unsigned long long)p->min_pixels,
                         (unsigned long long)p->max_pixels);
        return false;
    }
    return true;
}

bool image_preprocess_for_projector(const char *projector_type, uint32_t image_size,
                                    uint32_t patch_size, const float mean[3],
                                    const float std[3], image_preprocess *out,
                                    corral_error *err)
{
    image_preprocess p = {.image_size = image_size, .patch_size = patch_size};
    memcpy(p.mean, mean, sizeof p.mean);
    memcpy(p.std, std, sizeof p.std);
    if (strcmp(projector_type, "gemma3") == 0) {
        p.fit = IMAGE_FIT_LETTERBOX;
    } else if (strcmp(projector_type, "resampler") == 0) {
        p.fit = IMAGE_FIT_STRETCH;
    } else if (strcmp(projector_type, "qwen2.5vl_merger") == 0 ||
               strcmp(projector_type, "qwen3vl_merger") == 0) {
        p.fit = IMAGE_FIT_SMART_RESIZE;
        p.merge = 2;
        image_preprocess_set_token_bounds(&p, 8, 4096);
    } else {
        corral_error_set(err, "image preprocessing for projector type %s is not supported",
                         projector_type);
        return false;
    }
    if (!preprocess_check(&p, err))
        return false;
    *out = p;
    return true;
}

/* Qwen's smart resize, in the reference's float32 arithmetic. */
static void smart_resize(const image_preprocess *p, uint32_t width, uint32_t height,
                         int64_t *nx, int64_t *ny)
{
    int64_t align = (int64_t)p->patch_size * p->merge;
    float falign = (float)align;
    int64_t h = height, w = width;
    int64_t h_bar = (int64_t)roundf((float)h / falign) * align;
    int64_t w_bar = (int64_t)roundf((float)w / falign) * align;
    if (h_bar < align)
        h_bar = align;
    if (w_bar < align)
        w_bar = align;
    if ((uint64_t)(h_bar * w_bar) > p->max_pixels) {
        float beta = sqrtf((float)(h * w) / (float)p->max_pixels);
        h_bar = (int64_t)floorf((float)h / beta / falign) * align;
        w_bar = (int64_t)floorf((float)w / beta / falign) * align;
        if (h_bar < align)
            h_bar = align;
        if (w_bar < align)
            w_bar = align;
    } else if ((uint64_t)(h_bar * w_bar) < p->min_pixels) {
        float beta = sqrtf((float)p->min_pixels / (float)(h * w));
        h_bar = (int64_t)ceilf((float)h * beta / falign) * align;
        w_bar = (int64_t)ceilf((float)w * beta / falign) * align;
    }
    *nx = w_bar;
    *ny = h_bar;
}

/* LLaVA 1.6's choice among the pinpoints (at least one) for a width x height image: the one
 * that keeps the most of its pixels when it is fitted inside with its aspect ratio, then the
 * one that wastes the least; the first of equals. Sizes are truncated from float scales, as
 * the reference computes them, so a hair-thin image may keep nothing anywhere: then the least
 * waste decides. */
static void best_pinpoint(const image_preprocess *p, uint32_t width, uint32_t height,
                          uint32_t *out_w, uint32_t *out_h)
{
    int64_t best_kept = -1, best_waste = INT64_MAX, original = (int64_t)width * height;
    for (uint32_t i = 0; i < p->n_pinpoints; i++) {
        uint32_t cw = p->pinpoints[i][0], ch = p->pinpoints[i][1];
        float scale_w = (float)cw / (float)width, scale_h = (float)ch / (float)height;
        float scale = scale_w < scale_h ? scale_w : scale_h;
        int64_t tw = (int64_t)((float)width * scale), th = (int64_t)((float)height * scale);
        int64_t kept = tw * th < original ? tw * th : original;
        int64_t waste = (int64_t)cw * ch - kept;
        if (kept > best_kept || (kept == best_kept && waste < best_waste)) {
            best_kept = kept;
            best_waste = waste;
            *out_w = cw;
            *out_h = ch;
        }
    }
}

/* The grid an ANYRES image is sliced at: none (0 x 0) when it fits the square. */
static void anyres_grid(const image_preprocess *p, uint32_t width, uint32_t height,
                        uint32_t *grid_w, uint32_t *grid_h)
{
    *grid_w = *grid_h = 0;
    if (width > p->image_size || height > p->image_size)
        best_pinpoint(p, width, height, grid_w, grid_h);
}

/* ollama's mistral3 rule, in its float64 arithmetic: an image over image_size on its longer
 * side scaled down by that ratio (each side floored), then each side rounded up to whole
 * patches (a side floored to 0 is one patch). */
static void longest_edge(const image_preprocess *p, uint32_t width, uint32_t height,
                         int64_t *nx, int64_t *ny)
{
    double edge = p->image_size, rw = width / edge, rh = height / edge;
    double ratio = rw > rh ? rw : rh;
    int64_t w = width, h = height, patch = p->patch_size;
    if (ratio > 1.0) {
        w = (int64_t)floor(width / ratio);
        h = (int64_t)floor(height / ratio);
    }
    *nx = w > 0 ? ((w - 1) / patch + 1) * patch : patch;
    *ny = h > 0 ? ((h - 1) / patch + 1) * patch : patch;
}

/*
 * CANVAS: of the arrangements of w x h tiles (w * h <= max_tiles), those whose canvas takes
 * the image at the smallest scale of at least 1, or failing any, at the largest below 1;
 * among them the smallest canvas, the first on a tie (w major). The image is resized to fit
 * it (the side that limits the scale exactly, the other floored, at least 1 pixel; neither
 * side below a tile nor above the canvas), as transformers' MllamaImageProcessor sizes it.
 */
static void canvas_of(const image_preprocess *p, uint32_t width, uint32_t height,
                      uint32_t *canvas_w, uint32_t *canvas_h, uint32_t *fit_w, uint32_t *fit_h)
{
    double best = 0.0;
    bool up = false;
    uint64_t area = 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t w = 1; w <= p->max_tiles; w++)
            for (uint32_t h = 1; h <= p->max_tiles / w; h++) {
                double cw = (double)w * p->image_size, ch = (double)h * p->image_size;
                double scale = fmin(ch / height, cw / width);
                if (pass == 0) { /* the scale: the least upscale, else the largest downscale */
                    if (scale >= 1.0 && (!up || scale < best))
                        best = scale, up = true;
                    else if (scale < 1.0 && !up && scale > best)
                        best = scale;
                } else if (scale == best && (area == 0 || (uint64_t)(cw * ch) < area)) {
                    area = (uint64_t)(cw * ch);
                    *canvas_w = (uint32_t)cw;
                    *canvas_h = (uint32_t)ch;
                }
            }
    uint32_t tw = width < p->image_size ? p->image_size : width > *canvas_w ? *canvas_w : width;
    uint32_t th = height < p->image_size ? p->image_size : height > *canvas_h ? *canvas_h : height;
    double scale_w = (double)tw / width, scale_h = (double)th / height;
    if (scale_w < scale_h) {
        uint32_t h = (uint32_t)floor(height * scale_w);
        *fit_w = tw;
        *fit_h = h == 0 ? 1 : h < th ? h : th;
    } else {
        uint32_t w = (uint32_t)floor(width * scale_h);
        *fit_h = th;
        *fit_w = w == 0 ? 1 : w < tw ? w : tw;
    }
}

bool image_preprocess_size(const image_preprocess *p, uint32_t width, uint32_t height,
                           uint32_t *nx, uint32_t *ny, corral_error *err)
{
    if (!preprocess_check(p, err))
        return false;
    if (width == 0 || height == 0) {
        corral_error_set(err, "image preprocessing: empty image");
        return false;
    }
    int64_t w = p->image_size, h = p->image_size;
    if (p->fit == IMAGE_FIT_STRETCH && (width > p->image_size || height > p->image_size)) {
        corral_error_set(err, "image of %u x %u pixels: this projector cuts images larger than "
                         "%u x %u into slices, which is not supported; send a smaller image",
                         width, height, p->image_size, p->image_size);
        return false;
    }
    if (p->fit == IMAGE_FIT_SMART_RESIZE)
        smart_resize(p, width, height, &w, &h);
    if (p->fit == IMAGE_FIT_ANYRES || p->fit == IMAGE_FIT_TILES) {
        uint32_t gw, gh;
        anyres_grid(p, width, height, &gw, &gh);
        h *= 1 + (int64_t)(gw / p->image_size) * (gh / p->image_size);
    }
    if (p->fit == IMAGE_FIT_LONGEST_EDGE)
        longest_edge(p, width, height, &w, &h);
    if (p->fit == IMAGE_FIT_CANVAS) {
        uint32_t cw, ch, fw, fh;
        canvas_of(p, width, height, &cw, &ch, &fw, &fh);
        w = cw;
        h = ch;
    }
    if (p->fit == IMAGE_FIT_VIEWS) {
        uint32_t cols, rows;
        if (!image_views_grid(p, width, height, &cols, &rows, err))
            return false;
        if (cols) { /* the grid, then the global view in rows of its width */
            w = (int64_t)p->tile_size * cols;
            h = (int64_t)p->tile_size * rows + image_views_global_rows((uint32_t)w, p->image_size);
        }
    }
    if (w <= 0 || h <= 0 || w > PREPROCESS_MAX_SIDE || h > PREPROCESS_MAX_SIDE ||
        (uint64_t)(w * h) > PREPROCESS_MAX_PIXELS) {
        corral_error_set(err, "image preprocessing: %u x %u would become %lld x %lld", width,
                         height, (long long)w, (long long)h);
        return false;
    }
    *nx = (uint32_t)w;
    *ny = (uint32_t)h;
    return true;
}

static uint8_t lerp_u8(float top, float bottom, float t)
{
    float v = top + (bottom - top) * t;
    /* truncated, as the reference converts; the clamp only guards the conversion */
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

image_rgb *image_resize_bilinear(const image_rgb *src, uint32_t width, uint32_t height,
                                 corral_error *err)
{
    if (src->width == 0 || src->height == 0 || width == 0 || height == 0) {
        corral_error_set(err, "image resize: empty image");
        return NULL;
    }
    image_rgb *dst = image_rgb_create(width, height, err);
    if (!dst)
        return NULL;
    /* The sample grid spans src_w - 1 source steps over dst_w (not dst_w - 1) destination
     * steps: neither corner-aligned nor pixel-centred, but what the reference does. */
    float x_ratio = (float)(src->width - 1) / (float)width;
    float y_ratio = (float)(src->height - 1) / (float)height;
    size_t row = (size_t)src->width * 3;
    for (uint32_t y = 0; y < height; y++) {
        float py = y_ratio * (float)y;
        uint32_t y0 = (uint32_t)py;
        float fy = py - (float)y0;
        /* The reference reads past a one-pixel-tall (or -wide) source here; repeat the
         * edge instead (the weight of that sample is 0 for such a source anyway). */
        uint32_t y1 = y0 + 1 < src->height ? y0 + 1 : y0;
        const uint8_t *r0 = src->pixels + y0 * row, *r1 = src->pixels + y1 * row;
        uint8_t *out = dst->pixels + (size_t)y * width * 3;
        for (uint32_t x = 0; x < width; x++) {
            float px = x_ratio * (float)x;
            uint32_t x0 = (uint32_t)px;
            float fx = px - (float)x0;
            uint32_t x1 = x0 + 1 < src->width ? x0 + 1 : x0;
            for (int c = 0; c < 3; c++) {
                float a = r0[x0 * 3 + c], b = r0[x1 * 3 + c];
                float d = r1[x0 * 3 + c], e = r1[x1 * 3 + c];
                float top = a + (b - a) * fx;
                float bottom = d + (e - d) * fx;
                out[x * 3 + c] = lerp_u8(top, bottom, fy);
            }
        }
    }
    return dst;
}

image_rgb *image_resize_bilinear_corners(const image_rgb *src, uint32_t width, uint32_t height,
                                         corral_error *err)
{
    if (src->width == 0 || src->height == 0 || width == 0 || height == 0) {
        corral_error_set(err, "image resize: empty image");
        return NULL;
    }
    image_rgb *dst = image_rgb_create(width, height, err);
    if (!dst)
        return NULL;
    /* the first and last samples on the source's first and last pixels; a one-pixel side
     * samples the first pixel only */
    float x_ratio = width > 1 ? (float)(src->width - 1) / (float)(width - 1) : 0.0f;
    float y_ratio = height > 1 ? (float)(src->height - 1) / (float)(height - 1) : 0.0f;
    size_t row = (size_t)src->width * 3;
    for (uint32_t y = 0; y < height; y++) {
        float py = (float)y * y_ratio;
        uint32_t y0 = (uint32_t)py < src->height ? (uint32_t)py : src->height - 1;
        float fy = py - (float)y0;
        uint32_t y1 = y0 + 1 < src->height ? y0 + 1 : y0;
        const uint8_t *r0 = src->pixels + y0 * row, *r1 = src->pixels + y1 * row;
        uint8_t *out = dst->pixels + (size_t)y * width * 3;
        for (uint32_t x = 0; x < width; x++) {
            float px = (float)x * x_ratio;
            uint32_t x0 = (uint32_t)px < src->width ? (uint32_t)px : src->width - 1;
            float fx = px - (float)x0;
            uint32_t x1 = x0 + 1 < src->width ? x0 + 1 : x0;
            for (int c = 0; c < 3; c++) {
                float a = r0[x0 * 3 + c], b = r0[x1 * 3 + c];
                float d = r1[x0 * 3 + c], e = r1[x1 * 3 + c];
                float top = a + (b - a) * fx;
                float bottom = d + (e - d) * fx;
                out[x * 3 + c] = lerp_u8(top, bottom, fy);
            }
        }
    }
    return dst;
}

typedef image_rgb *(*resize_fn)(const image_rgb *src, uint32_t width, uint32_t height,
                                corral_error *err);

/* image scaled to fit width x height with its aspect ratio by resize, centred on the colour
 * pad. */
static image_rgb *letterbox_by(const image_rgb *image, uint32_t width, uint32_t height,
                               const uint8_t pad[3], resize_fn resize, corral_error *err)
{
    float scale_w = (float)width / (float)image->width;
    float scale_h = (float)height / (float)image->height;
    float scale = scale_w < scale_h ? scale_w : scale_h;
    float fw = ceilf((float)image->width * scale), fh = ceilf((float)image->height * scale);
    uint32_t w = fw >= (float)width ? width : (uint32_t)fw;
    uint32_t h = fh >= (float)height ? height : (uint32_t)fh;
    if (w == 0 || h == 0) {
        corral_error_set(err, "image preprocessing: %u x %u is too thin to letterbox",
                         image->width, image->height);
        return NULL;
    }
    image_rgb *scaled = resize(image, w, h, err);
    image_rgb *out = scaled ? image_rgb_create(width, height, err) : NULL;
    if (!out) {
        image_rgb_free(scaled);
        return NULL;
    }
    for (size_t i = 0; i < (size_t)width * height; i++)
        memcpy(out->pixels + i * 3, pad, 3);
    uint32_t left = (width - w) / 2, top = (height - h) / 2;
    for (uint32_t y = 0; y < h; y++)
        memcpy(out->pixels + ((size_t)(top + y) * width + left) * 3,
               scaled->pixels + (size_t)y * w * 3, (size_t)w * 3);
    image_rgb_free(scaled);
    return out;
}

static image_rgb *letterbox(const image_rgb *image, uint32_t width, uint32_t height,
                            const uint8_t pad[3], corral_error *err)
{
    return letterbox_by(image, width, height, pad, image_resize_bilinear, err);
}

/* A copy of image (the reference copies rather than resamples an image already that size). */
static image_rgb *copy_rgb(const image_rgb *image, corral_error *err)
{
    image_rgb *out = image_rgb_create(image->width, image->height, err);
    if (out)
        memcpy(out->pixels, image->pixels, (size_t)image->width * image->height * 3);
    return out;
}

/* LLaVA 1.6's column (preprocess.h), or llama4's (TILES): nx x ny as image_preprocess_size
 * gave it. */
static image_rgb *anyres(const image_preprocess *p, const image_rgb *image, uint32_t nx,
                         uint32_t ny, corral_error *err)
{
    uint32_t S = p->image_size, gw, gh;
    bool tiles = p->fit == IMAGE_FIT_TILES;
    anyres_grid(p, image->width, image->height, &gw, &gh);
    image_rgb *out = image_rgb_create(nx, ny, err);
    bool same = image->width == S && image->height == S;
    image_rgb *overview = !out ? NULL
                          : same ? copy_rgb(image, err)
                          : (tiles ? image_resize_bilinear_corners
                                   : image_resize_bilinear)(image, S, S, err);
    image_rgb *refined = NULL;
    if (overview && gw) {
        static const uint8_t black[3] = {0, 0, 0};
        same = image->width == gw && image->height == gh;
        refined = same ? copy_rgb(image, err)
                       : letterbox_by(image, gw, gh, black,
                                      tiles ? image_resize_bicubic : image_resize_bilinear, err);
    }
    if (!overview || (gw && !refined)) {
        image_rgb_free(out);
        image_rgb_free(overview);
        return NULL;
    }
    size_t square = (size_t)S * S * 3, row = (size_t)S * 3;
    size_t n_slices = gw ? (size_t)(gw / S) * (gh / S) : 0;
    /* the overview first (LLaVA), or after the slices (llama4) */
    memcpy(out->pixels + (tiles ? n_slices * square : 0), overview->pixels, square);
    uint8_t *dst = out->pixels + (tiles ? 0 : square);
    for (uint32_t sy = 0; gw && sy < gh / S; sy++)
        for (uint32_t sx = 0; sx < gw / S; sx++)
            for (uint32_t y = 0; y < S; y++, dst += row)
                memcpy(dst, refined->pixels + (((size_t)sy * S + y) * gw + (size_t)sx * S) * 3,
                       row);
    image_rgb_free(overview);
    image_rgb_free(refined);
    return out;
}

/* The canvas: the image resized to fit (fit_w x fit_h), black to its right and below. */
static image_rgb *canvas(const image_preprocess *p, const image_rgb *image, uint32_t nx,
                         uint32_t ny, corral_error *err)
{
    uint32_t cw, ch, fw, fh;
    canvas_of(p, image->width, image->height, &cw, &ch, &fw, &fh);
    image_rgb *fitted = fw == image->width && fh == image->height
                            ? copy_rgb(image, err)
                            : image_resize_bilinear(image, fw, fh, err);
    image_rgb *out = fitted ? image_rgb_create(nx, ny, err) : NULL;
    if (out) {
        memset(out->pixels, 0, (size_t)nx * ny * 3);
        for (uint32_t y = 0; y < fh; y++)
            memcpy(out->pixels + (size_t)y * nx * 3, fitted->pixels + (size_t)y * fw * 3,
                   (size_t)fw * 3);
    }
    image_rgb_free(fitted);
    return out;
}

image_pixels *image_preprocess_run(const image_preprocess *p, const image_rgb *image,
                                   corral_error *err)
{
    uint32_t nx, ny;
    if (!image_preprocess_size(p, image->width, image->height, &nx, &ny, err))
        return NULL;
    if (p->fit == IMAGE_FIT_VIEWS)
        return image_views_run(p, image, nx, ny, err);
    const image_rgb *fitted = image;
    image_rgb *owned = NULL;
    bool column = p->fit == IMAGE_FIT_ANYRES || p->fit == IMAGE_FIT_TILES;
    if (column || p->fit == IMAGE_FIT_CANVAS || nx != image->width || ny != image->height) {
        owned = column                      ? anyres(p, image, nx, ny, err)
                : p->fit == IMAGE_FIT_CANVAS ? canvas(p, image, nx, ny, err)
                : p->fit == IMAGE_FIT_LETTERBOX
                    ? letterbox(image, p->image_size, p->image_size, p->pad, err)
                    : image_resize_bilinear(image, nx, ny, err); /* smart, stretch */
        if (!owned)
            return NULL;
        fitted = owned;
    }
    size_t n = (size_t)nx * ny * 3; /* bounded by PREPROCESS_MAX_PIXELS */
    image_pixels *out = calloc(1, sizeof *out);
    float *data = malloc(n * sizeof *data);
    if (!out || !data) {
        free(out);
        free(data);
        image_rgb_free(owned);
        corral_error_set(err, "out of memory for %u x %u image pixels", nx, ny);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i % 3);
        data[i] = ((float)fitted->pixels[i] / 255.0f - p->mean[c]) / p->std[c];
    }
    image_rgb_free(owned);
    out->nx = nx;
    out->ny = ny;
    out->data = data;
    return out;
}

void image_pixels_free(image_pixels *pixels)
{
    if (!pixels)
        return;
    free(pixels->data);
    free(pixels);
}
