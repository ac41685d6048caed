/*
 * DeepSeek-OCR's views (preprocess.h's VIEWS), as llama.cpp d32676d77's multimodal library
 * makes them: a global view (the image fitted into the image_size square with its aspect kept,
 * centred on the pad colour, both steps rounded to the nearest pixel) and, for an image wider
 * or taller than a tile, local views: the image stretched to a grid of tile_size squares and
 * cut. Both resizes are Pillow's bicubic resampling (its filter with a = -0.5, widened when
 * shrinking, weights in 22-bit fixed point), which that library copies.
 *
 * The grid is the one whose aspect ratio is nearest the image's among those of min_tiles to
 * max_tiles cells, in the order the library's list has after std::sort by cell count (GCC's
 * introsort, emulated below: it is not stable, and the order decides ties); on a tie a later
 * grid wins when the image's area is over half of the grid's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image/preprocess.h"
#include "image/views.h"

/* ---- Pillow's bicubic resampling ---- */

enum { PRECISION_BITS = 32 - 8 - 2 };

static double bicubic_filter(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* Per output pixel its first input pixel and count (bounds) and fixed-point weights, ksize
 * a pixel; false when memory runs out. */
static bool pillow_weights(uint32_t in, uint32_t out, int **bounds, int32_t **weights,
                           int *ksize)
{
    double scale = (double)in / out, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 2.0 * filterscale;
    int k = (int)ceil(support) * 2 + 1;
    *ksize = k;
    *bounds = malloc((size_t)out * 2 * sizeof **bounds);
    *weights = malloc((size_t)out * k * sizeof **weights);
    double *pre = malloc((size_t)k * sizeof *pre);
    if (!*bounds || !*weights || !pre) {
        free(pre);
        return false;
    }
    for (uint32_t xx = 0; xx < out; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > (int)in)
            xmax = (int)in;
        xmax -= xmin;
        int x = 0;
        for (; x < xmax && x < k; x++) {
            double w = bicubic_filter((x + xmin - center + 0.5) * ss);
            pre[x] = w;
            ww += w;
        }
        xmax = x;
        for (x = 0; x < xmax; x++)
            if (ww != 0.0)
                pre[x] /= ww;
        for (; x < k; x++)
            pre[x] = 0;
        (*bounds)[xx * 2] = xmin;
        (*bounds)[xx * 2 + 1] = xmax;
        for (x = 0; x < k; x++) {
            double v = pre[x] * ldexp(1.0, PRECISION_BITS);
            v = round(pre[x] < 0 ? v - 0.5 : v + 0.5);
            v = v < (double)INT32_MIN ? (double)INT32_MIN : v > (double)INT32_MAX ? (double)INT32_MAX : v;
            (*weights)[(size_t)xx * k + x] = (int32_t)v;
        }
    }
    free(pre);
    return true;
}

static uint8_t clip8(int64_t v)
{
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* One pass along x (horizontal) or y of src into dst, already sized. */
static void pillow_pass(const image_rgb *src, image_rgb *dst, bool horizontal, const int *bounds,
                        const int32_t *weights, int ksize)
{
    for (uint32_t y = 0; y < dst->height; y++)
        for (uint32_t x = 0; x < dst->width; x++) {
            uint32_t o = horizontal ? x : y;
            int first = bounds[o * 2], count = bounds[o * 2 + 1];
            /* the reference sums in int32; its products of a byte and a 22-bit weight and
             * their sums stay within it */
            int64_t s[3] = {1 << (PRECISION_BITS - 1), 1 << (PRECISION_BITS - 1),
                            1 << (PRECISION_BITS - 1)};
            for (int i = 0; i < count; i++) {
                const uint8_t *px =
                    horizontal ? src->pixels + ((size_t)y * src->width + first + i) * 3
                               : src->pixels + ((size_t)(first + i) * src->width + x) * 3;
                int32_t w = weights[(size_t)o * ksize + i];
                for (int c = 0; c < 3; c++)
                    s[c] += (int64_t)px[c] * w;
            }
            uint8_t *out = dst->pixels + ((size_t)y * dst->width + x) * 3;
            for (int c = 0; c < 3; c++)
                out[c] = clip8(s[c] >> PRECISION_BITS);
        }
}

image_rgb *image_resize_bicubic_pillow(const image_rgb *src, uint32_t width, uint32_t height,
                                       corral_error *err)
{
    if (src->width == 0 || src->height == 0 || width == 0 || height == 0) {
        corral_error_set(err, "image resize: empty image");
        return NULL;
    }
    image_rgb *cur = NULL;
    const image_rgb *in = src;
    bool ok = true;
    for (int pass = 0; ok && pass < 2; pass++) {
        bool horizontal = pass == 0;
        uint32_t from = horizontal ? in->width : in->height, to = horizontal ? width : height;
        if (from == to)
            continue;
        int *bounds = NULL, ksize = 0;
        int32_t *weights = NULL;
        image_rgb *next = NULL;
        ok = pillow_weights(from, to, &bounds, &weights, &ksize) &&
             (next = image_rgb_create(horizontal ? width : in->width, horizontal ? in->height
                                                                                  : height,
                                      err)) != NULL;
        if (ok)
            pillow_pass(in, next, horizontal, bounds, weights, ksize);
        else if (!next)
            corral_error_set(err, "out of memory resizing a %u x %u image", src->width,
                             src->height);
        free(bounds);
        free(weights);
        image_rgb_free(cur);
        cur = next;
        in = next;
    }
    if (!ok)
        return NULL;
    if (!cur && (cur = image_rgb_create(width, height, err)))
        memcpy(cur->pixels, src->pixels, (size_t)width * height * 3);
    return cur;
}

/* ---- the grid ---- */

typedef struct grid {
    uint32_t w, h;
} grid;

static bool fewer_cells(const grid *a, const grid *b)
{
    return a->w * a->h < b->w * b->h;
}

static void swap_grid(grid *a, grid *b)
{
    grid t = *a;
    *a = *b;
    *b = t;
}

/* GCC's std::sort on g[0, n): introsort partitions while more than 16 remain, then an
 * insertion sort over the whole; false where it would fall back to heapsort (depth spent),
 * which no grid list here reaches. */
static bool introsort_loop(grid *g, size_t first, size_t last, int depth)
{
    while (last - first > 16) {
        if (depth == 0)
            return false;
        depth--;
        size_t mid = first + (last - first) / 2, a = first + 1, c = last - 1;
        /* the median of three moved to first */
        if (fewer_cells(&g[a], &g[mid])) {
            if (fewer_cells(&g[mid], &g[c]))
                swap_grid(&g[first], &g[mid]);
            else if (fewer_cells(&g[a], &g[c]))
                swap_grid(&g[first], &g[c]);
            else
                swap_grid(&g[first], &g[a]);
        } else if (fewer_cells(&g[a], &g[c])) {
            swap_grid(&g[first], &g[a]);
        } else if (fewer_cells(&g[mid], &g[c])) {
            swap_grid(&g[first], &g[c]);
        } else {
            swap_grid(&g[first], &g[mid]);
        }
        size_t lo = first + 1, hi = last;
        for (;;) {
            while (fewer_cells(&g[lo], &g[first]))
                lo++;
            hi--;
            while (fewer_cells(&g[first], &g[hi]))
                hi--;
            if (!(lo < hi))
                break;
            swap_grid(&g[lo], &g[hi]);
            lo++;
        }
        if (!introsort_loop(g, lo, last, depth))
            return false;
        last = lo;
    }
    return true;
}

static bool gcc_sort(grid *g, size_t n)
{
    int lg = 0;
    while (((size_t)2 << lg) <= n)
        lg++;
    if (n > 1 && !introsort_loop(g, 0, n, 2 * lg))
        return false;
    for (size_t i = 1; i < n; i++) { /* insertion sort: stable */
        grid v = g[i];
        size_t j = i;
        while (j > 0 && fewer_cells(&v, &g[j - 1])) {
            g[j] = g[j - 1];
            j--;
        }
        g[j] = v;
    }
    return true;
}

bool image_views_grid(const image_preprocess *p, uint32_t width, uint32_t height, uint32_t *cols,
                      uint32_t *rows, corral_error *err)
{
    *cols = *rows = 0;
    if (width <= p->tile_size && height <= p->tile_size)
        return true;
    grid g[IMAGE_MAX_VIEW_TILES * IMAGE_MAX_VIEW_TILES];
    size_t n = 0;
    for (uint32_t cells = p->min_tiles; cells <= p->max_tiles; cells++)
        for (uint32_t w = 1; w <= cells; w++)
            for (uint32_t h = 1; h <= cells; h++) {
                if (w * h < p->min_tiles || w * h > p->max_tiles)
                    continue;
                bool found = false;
                for (size_t i = 0; i < n && !found; i++)
                    found = g[i].w == w && g[i].h == h;
                if (!found)
                    g[n++] = (grid){w, h};
            }
    if (n == 0 || !gcc_sort(g, n)) {
        corral_error_set(err, "image preprocessing: no grid of %u to %u tiles", p->min_tiles,
                         p->max_tiles);
        return false;
    }
    float aspect = (float)width / (float)height, best_diff = INFINITY;
    float area = (float)((uint64_t)width * height);
    grid best = {1, 1};
    for (size_t i = 0; i < n; i++) {
        float diff = fabsf(aspect - (float)g[i].w / (float)g[i].h);
        if (diff < best_diff) {
            best_diff = diff;
            best = g[i];
        } else if (diff == best_diff &&
                   area > 0.5f * (float)((uint64_t)p->tile_size * p->tile_size * g[i].w * g[i].h)) {
            best = g[i];
        }
    }
    *cols = best.w;
    *rows = best.h;
    return true;
}

/* ---- the views ---- */

/* The global view: image fitted into the square, centred on the pad colour (a copy when it
 * is the square already). */
static image_rgb *global_view(const image_preprocess *p, const image_rgb *image,
                              corral_error *err)
{
    uint32_t S = p->image_size;
    image_rgb *out = image_rgb_create(S, S, err);
    if (!out)
        return NULL;
    if (image->width == S && image->height == S) {
        memcpy(out->pixels, image->pixels, (size_t)S * S * 3);
        return out;
    }
    float scale_w = (float)S / (float)image->width, scale_h = (float)S / (float)image->height;
    float scale = scale_w < scale_h ? scale_w : scale_h;
    float fw = roundf((float)image->width * scale), fh = roundf((float)image->height * scale);
    uint32_t w = fw >= (float)S ? S : (uint32_t)fw, h = fh >= (float)S ? S : (uint32_t)fh;
    if (w == 0 || h == 0) {
        corral_error_set(err, "image preprocessing: %u x %u is too thin to fit", image->width,
                         image->height);
        image_rgb_free(out);
        return NULL;
    }
    image_rgb *scaled = image_resize_bicubic_pillow(image, w, h, err);
    if (!scaled) {
        image_rgb_free(out);
        return NULL;
    }
    for (size_t i = 0; i < (size_t)S * S; i++)
        memcpy(out->pixels + i * 3, p->pad, 3);
    uint32_t left = (uint32_t)roundf((float)(S - w) / 2.0f);
    uint32_t top = (uint32_t)roundf((float)(S - h) / 2.0f);
    for (uint32_t y = 0; y < h && top + y < S; y++) {
        uint32_t n = left + w <= S ? w : S - left;
        memcpy(out->pixels + ((size_t)(top + y) * S + left) * 3,
               scaled->pixels + (size_t)y * w * 3, (size_t)n * 3);
    }
    image_rgb_free(scaled);
    return out;
}

static void normalise(const image_preprocess *p, const uint8_t *in, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i % 3);
        out[i] = ((float)in[i] / 255.0f - p->mean[c]) / p->std[c];
    }
}

uint32_t image_views_global_rows(uint32_t nx, uint32_t image_size)
{
    uint64_t values = (uint64_t)image_size * image_size;
    return nx ? (uint32_t)((values + nx - 1) / nx) : 0;
}

image_pixels *image_views_run(const image_preprocess *p, const image_rgb *image, uint32_t nx,
                              uint32_t ny, corral_error *err)
{
    bool tiled = nx != p->image_size || ny != p->image_size;
    size_t S = p->image_size;
    uint32_t grid_h = tiled ? ny - image_views_global_rows(nx, p->image_size) : 0;
    size_t grid_values = tiled ? (size_t)nx * grid_h * 3 : 0, total = (size_t)nx * ny * 3;
    image_pixels *out = calloc(1, sizeof *out);
    float *data = calloc(total, sizeof *data);
    image_rgb *global = out && data ? global_view(p, image, err) : NULL;
    image_rgb *refined = NULL;
    if (global && tiled)
        refined = image->width == nx && image->height == grid_h
                      ? image_rgb_create(nx, grid_h, err)
                      : image_resize_bicubic_pillow(image, nx, grid_h, err);
    if (refined && image->width == nx && image->height == grid_h)
        memcpy(refined->pixels, image->pixels, grid_values);
    if (!global || (tiled && !refined)) {
        if (!out || !data)
            corral_error_set(err, "out of memory for %u x %u image pixels", nx, ny);
        free(out);
        free(data);
        image_rgb_free(global);
        image_rgb_free(refined);
        return NULL;
    }
    if (tiled)
        normalise(p, refined->pixels, grid_values, data);
    normalise(p, global->pixels, S * S * 3, data + grid_values);
    image_rgb_free(global);
    image_rgb_free(refined);
    out->nx = nx;
    out->ny = ny;
    out->data = data;
    return out;
}
