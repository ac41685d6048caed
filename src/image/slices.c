/*
 * LLaVA-UHD slicing (slices.h). Each size is computed with the reference's types: float
 * where it divides or takes roots, int where it truncates, so that the plan is the same for
 * every image, ties included.
 */
#include "image/slices.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sides beyond this are refused before any arithmetic: the reference's int products stay
 * far from overflowing, and no decoder makes larger images. */
#define SLICE_MAX_SIDE 65536u
/* What a plan may make: a sliver's slices are upscaled to about the square's area, so their
 * long side can be many times the image's (4000 x 10 at a 448 square: slices 6202 x 28). A
 * part's side is bounded as the encoder bounds it (8192), the refined image's pixels as
 * preprocessing bounds any image's. */
#define SLICE_MAX_PART_SIDE 8192
#define SLICE_MAX_REFINED_PIXELS (1ll << 26)

/* length rounded to a multiple of align (at least align). */
static int64_t ensure_divide(int64_t length, int64_t align)
{
    int64_t v = (int64_t)(roundf((float)length / (float)align) * (float)align);
    return v > align ? v : align;
}

/* The size an image of w x h takes at about side x side pixels, aspect kept (only ever
 * smaller unless upscale), sides rounded to multiples of align. */
static void best_resize(int64_t w, int64_t h, int64_t side, int64_t align, bool upscale,
                        int64_t *out_w, int64_t *out_h)
{
    if (w * h > side * side || upscale) {
        float r = (float)w / (float)h;
        h = (int64_t)((float)side / sqrtf(r));
        w = (int64_t)((float)h * r);
    }
    *out_w = ensure_divide(w, align);
    *out_h = ensure_divide(h, align);
}

/* Among the grids of multiple - 1, multiple and multiple + 1 cells (never 1, never above
 * max_cells), the one whose aspect is nearest the image's in log ratio; the first wins a
 * tie. 1 x 1 when there is none. */
static void best_grid(int64_t max_cells, int64_t multiple, float log_ratio, uint32_t *cols,
                      uint32_t *rows)
{
    *cols = *rows = 1;
    float best = INFINITY;
    for (int64_t n = multiple - 1; n <= multiple + 1; n++) {
        if (n == 1 || n > max_cells)
            continue;
        for (int64_t m = 1; m <= n; m++) {
            if (n % m != 0)
                continue;
            /* the reference keeps the error in float, computed in double */
            float error = (float)fabs((double)log_ratio - log(1.0 * (double)m / (double)(n / m)));
            if (error < best) {
                best = error;
                *cols = (uint32_t)m;
                *rows = (uint32_t)(n / m);
            }
        }
    }
}

bool image_slice_plan_for(uint32_t width, uint32_t height, uint32_t image_size, uint32_t align,
                          uint32_t max_slices, image_slice_plan *out, corral_error *err)
{
    if (width == 0 || height == 0 || width > SLICE_MAX_SIDE || height > SLICE_MAX_SIDE ||
        align == 0 || image_size < align || image_size > SLICE_MAX_SIDE || max_slices == 0 ||
        max_slices > IMAGE_MAX_UHD_SLICES) {
        corral_error_set(err, "image slicing: unusable sizes (image %u x %u, square %u, align "
                         "%u, at most %u slices)", width, height, image_size, align, max_slices);
        return false;
    }
    memset(out, 0, sizeof *out);
    if (width <= image_size && height <= image_size) {
        out->overview_w = out->overview_h = image_size;
        return true;
    }
    int64_t w = width, h = height, side = image_size, a = align, ow, oh;
    best_resize(w, h, side, a, false, &ow, &oh);
    float log_ratio = logf((float)w / (float)h);
    float ratio = (float)w * (float)h / (float)(side * side);
    double cells = ceilf(ratio);
    int64_t multiple = (int64_t)(cells < (double)max_slices ? cells : (double)max_slices);
    uint32_t cols, rows;
    best_grid(max_slices, multiple, log_ratio, &cols, &rows);
    /* each cell of the image as the grid splits it, resized as a square would be */
    int64_t cell_w, cell_h;
    best_resize(ensure_divide(w, cols) / cols, ensure_divide(h, rows) / rows, side, a, true,
                &cell_w, &cell_h);
    int64_t rw = cell_w * cols, rh = cell_h * rows;
    if (ow > SLICE_MAX_PART_SIDE || oh > SLICE_MAX_PART_SIDE || cell_w > SLICE_MAX_PART_SIDE ||
        cell_h > SLICE_MAX_PART_SIDE || rw * rh > SLICE_MAX_REFINED_PIXELS) {
        corral_error_set(err, "image slicing: %u x %u is too thin: its parts would be %lld x %lld "
                         "and %lld x %lld pixels, more than %d a side", width, height,
                         (long long)ow, (long long)oh, (long long)cell_w, (long long)cell_h,
                         SLICE_MAX_PART_SIDE);
        return false;
    }
    *out = (image_slice_plan){.overview_w = (uint32_t)ow,
                              .overview_h = (uint32_t)oh,
                              .cols = cols,
                              .rows = rows,
                              .refined_w = (uint32_t)rw,
                              .refined_h = (uint32_t)rh,
                              .cell_w = (uint32_t)cell_w,
                              .cell_h = (uint32_t)cell_h};
    return true;
}

bool image_tile_plan_for(const image_preprocess *p, uint32_t width, uint32_t height,
                         uint32_t tile, uint32_t max_tiles, image_slice_plan *out,
                         corral_error *err)
{
    if (width == 0 || height == 0 || width > SLICE_MAX_SIDE || height > SLICE_MAX_SIDE ||
        p->fit != IMAGE_FIT_SMART_RESIZE || tile == 0 || tile > SLICE_MAX_PART_SIDE ||
        max_tiles < 2 || max_tiles > IMAGE_MAX_SLICES) {
        corral_error_set(err, "image tiling: unusable sizes (image %u x %u, tile %u, at most %u "
                         "tiles)", width, height, tile, max_tiles);
        return false;
    }
    memset(out, 0, sizeof *out);
    uint32_t ow, oh;
    if (!image_preprocess_size(p, width, height, &ow, &oh, err))
        return false;
    if (ow > SLICE_MAX_PART_SIDE || oh > SLICE_MAX_PART_SIDE) {
        corral_error_set(err, "image tiling: %u x %u is too thin: its thumbnail would be %u x %u "
                         "pixels, more than %d a side", width, height, ow, oh,
                         SLICE_MAX_PART_SIDE);
        return false;
    }
    out->overview_w = ow;
    out->overview_h = oh;
    out->tiles = true;
    /* the reference's tolerance: twice the tile before it tiles */
    if ((float)width <= (float)tile * 2.0f && (float)height <= (float)tile * 2.0f)
        return true;
    /* the grids of 2 to max_tiles cells in the reference's order: as its loops first meet
     * them (by the larger side), then by cell count, ties kept in that order */
    uint32_t grid[IMAGE_MAX_SLICES * IMAGE_MAX_SLICES][2], n_grids = 0;
    for (uint32_t n = 2; n <= max_tiles; n++)
        for (uint32_t c = 1; c <= n; c++)
            for (uint32_t r = 1; r <= n; r++) {
                bool seen = c * r < 2 || c * r > max_tiles;
                for (uint32_t i = 0; !seen && i < n_grids; i++)
                    seen = grid[i][0] == c && grid[i][1] == r;
                if (!seen) {
                    grid[n_grids][0] = c;
                    grid[n_grids++][1] = r;
                }
            }
    for (uint32_t i = 1; i < n_grids; i++)
        for (uint32_t j = i; j > 0 && grid[j][0] * grid[j][1] < grid[j - 1][0] * grid[j - 1][1];
             j--) {
            uint32_t t[2] = {grid[j][0], grid[j][1]};
            grid[j][0] = grid[j - 1][0];
            grid[j][1] = grid[j - 1][1];
            grid[j - 1][0] = t[0];
            grid[j - 1][1] = t[1];
        }
    /* the nearest aspect wins; on a tie the later grid, when the image covers more than half
     * of it */
    float aspect = (float)width / (float)height, best_diff = INFINITY;
    float area = (float)((int64_t)width * height);
    uint32_t cols = 1, rows = 1;
    for (uint32_t i = 0; i < n_grids; i++) {
        uint32_t c = grid[i][0], r = grid[i][1];
        float diff = fabsf(aspect - (float)c / (float)r);
        if (diff < best_diff) {
            best_diff = diff;
            cols = c;
            rows = r;
        } else if (diff == best_diff &&
                   area > 0.5f * (float)((uint64_t)tile * tile * c * r)) {
            cols = c;
            rows = r;
        }
    }
    if ((uint64_t)tile * cols * tile * rows > SLICE_MAX_REFINED_PIXELS) {
        corral_error_set(err, "image tiling: %u x %u tiles of %u pixels are too many pixels",
                         cols, rows, tile);
        return false;
    }
    out->cols = cols;
    out->rows = rows;
    out->cell_w = out->cell_h = tile;
    out->refined_w = tile * cols;
    out->refined_h = tile * rows;
    return true;
}

bool image_slice_part_is_overview(const image_slice_plan *plan, size_t k)
{
    return plan->tiles ? k == (size_t)plan->cols * plan->rows : k == 0;
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* One cubic through samples at -1, 0, 1, 2 (p0 at 0), at t in [0, 1): the coefficients in
 * double as the reference's constants make them, each stored to float, the sum in float. */
static float cubic(float p_1, float p0, float p1, float p2, float t)
{
    float d0 = p_1 - p0, d2 = p1 - p0, d3 = p2 - p0;
    float a0 = p0;
    float a1 = (float)(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
    float a2 = (float)(1.0 / 2 * d0 + 1.0 / 2 * d2);
    float a3 = (float)(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
    return a0 + a1 * t + a2 * t * t + a3 * t * t * t;
}

image_rgb *image_resize_bicubic(const image_rgb *src, uint32_t width, uint32_t height,
                                corral_error *err)
{
    if (src->width == 0 || src->height == 0 || width == 0 || height == 0 ||
        src->width > SLICE_MAX_SIDE || src->height > SLICE_MAX_SIDE) {
        corral_error_set(err, "image resize: unusable sizes");
        return NULL;
    }
    image_rgb *dst = image_rgb_create(width, height, err);
    if (!dst)
        return NULL;
    int nx = (int)src->width, ny = (int)src->height;
    float tx = (float)nx / (float)width, ty = (float)ny / (float)height;
    for (uint32_t i = 0; i < height; i++) {
        for (uint32_t j = 0; j < width; j++) {
            int x = (int)(tx * (float)j), y = (int)(ty * (float)i);
            float dx = tx * (float)j - (float)x, dy = ty * (float)i - (float)y;
            for (int k = 0; k < 3; k++) {
                float col[4];
                for (int r = 0; r < 4; r++) {
                    const uint8_t *row = src->pixels + (size_t)clampi(y - 1 + r, 0, ny - 1) * nx * 3;
                    col[r] = cubic(row[clampi(x - 1, 0, nx - 1) * 3 + k],
                                   row[clampi(x, 0, nx - 1) * 3 + k],
                                   row[clampi(x + 1, 0, nx - 1) * 3 + k],
                                   row[clampi(x + 2, 0, nx - 1) * 3 + k], dx);
                }
                float v = roundf(cubic(col[0], col[1], col[2], col[3], dy));
                v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
                dst->pixels[((size_t)i * width + j) * 3 + k] = (uint8_t)v;
            }
        }
    }
    return dst;
}

enum slice_resize { RESIZE_BILINEAR, RESIZE_BICUBIC, RESIZE_BILINEAR_CORNERS };

/* image resized to w x h by resize (a copy when it already is that size). */
static image_rgb *resized(const image_rgb *image, uint32_t w, uint32_t h, enum slice_resize how,
                          corral_error *err)
{
    if (image->width == w && image->height == h) {
        image_rgb *copy = image_rgb_create(w, h, err);
        if (copy)
            memcpy(copy->pixels, image->pixels, (size_t)w * h * 3);
        return copy;
    }
    return how == RESIZE_BICUBIC   ? image_resize_bicubic(image, w, h, err)
           : how == RESIZE_BILINEAR ? image_resize_bilinear(image, w, h, err)
                                    : image_resize_bilinear_corners(image, w, h, err);
}

/* The x0, y0 corner's w x h of image, normalised as p says. */
static image_pixels *normalised(const image_preprocess *p, const image_rgb *image, uint32_t x0,
                                uint32_t y0, uint32_t w, uint32_t h, corral_error *err)
{
    image_pixels *out = calloc(1, sizeof *out);
    float *data = malloc((size_t)w * h * 3 * sizeof *data);
    if (!out || !data) {
        free(out);
        free(data);
        corral_error_set(err, "out of memory for %u x %u image pixels", w, h);
        return NULL;
    }
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                uint8_t v = image->pixels[(((size_t)y0 + y) * image->width + x0 + x) * 3 + c];
                data[((size_t)y * w + x) * 3 + c] = ((float)v / 255.0f - p->mean[c]) / p->std[c];
            }
    out->nx = w;
    out->ny = h;
    out->data = data;
    return out;
}

bool image_slices_run(const image_preprocess *p, const image_slice_plan *plan,
                      const image_rgb *image, image_pixels **parts, corral_error *err)
{
    size_t n = 1 + (size_t)plan->cols * plan->rows;
    if (plan->cols * plan->rows > (plan->tiles ? IMAGE_MAX_SLICES : IMAGE_MAX_UHD_SLICES) ||
        (size_t)plan->cell_w * plan->cols != plan->refined_w ||
        (size_t)plan->cell_h * plan->rows != plan->refined_h) {
        corral_error_set(err, "image slicing: inconsistent plan");
        return false;
    }
    memset(parts, 0, n * sizeof *parts);
    /* tiles: the slices at 0.., the overview last */
    size_t at_overview = plan->tiles ? n - 1 : 0, first_slice = plan->tiles ? 0 : 1;
    /* minicpm-v: the older library's bilinear overview and bicubic slices; LFM2-VL's tiles:
     * d32676d77's bilinear (corners aligned) for both */
    image_rgb *overview = resized(image, plan->overview_w, plan->overview_h,
                                  plan->tiles ? RESIZE_BILINEAR_CORNERS : RESIZE_BILINEAR, err);
    bool ok = overview && (parts[at_overview] = normalised(p, overview, 0, 0, plan->overview_w,
                                                           plan->overview_h, err));
    image_rgb_free(overview);
    image_rgb *refined = NULL;
    if (ok && n > 1)
        ok = (refined = resized(image, plan->refined_w, plan->refined_h,
                                plan->tiles ? RESIZE_BILINEAR_CORNERS : RESIZE_BICUBIC, err)) !=
             NULL;
    for (uint32_t r = 0; ok && r < plan->rows; r++)
        for (uint32_t c = 0; ok && c < plan->cols; c++)
            ok = (parts[first_slice + r * plan->cols + c] =
                      normalised(p, refined, c * plan->cell_w, r * plan->cell_h, plan->cell_w,
                                 plan->cell_h, err)) != NULL;
    image_rgb_free(refined);
    if (!ok)
        for (size_t i = 0; i < n; i++) {
            image_pixels_free(parts[i]);
            parts[i] = NULL;
        }
    return ok;
}
