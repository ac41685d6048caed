/*
 * JPEG samples to RGB with the reference decoder's arithmetic (see jpeg_pixels.h). The
 * constants and rounding below are what make the output identical to it, quirks included;
 * they are not the most accurate choice. Intermediate sums are 64-bit: a hostile file's
 * coefficients cannot overflow them (the reference would wrap, but only on such files).
 */
#include "image/jpeg_pixels.h"

#include <stdbool.h>

/* An IDCT multiplier: the real constant in 4.12 fixed point, rounded the reference's way
 * (add one half, then truncate toward zero, which differs from rounding for the negative
 * ones). */
#define IDCT_FIX(x) ((int64_t)((x) * 4096 + 0.5))

static uint8_t clamp_u8(int64_t v)
{
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* The 8-point inverse DCT both passes share (the LLM factorisation in 4.12 fixed point). s
 * holds the 8 inputs; out gets the 8 outputs, each offset by bias before the caller's
 * shift. */
static void idct_8(const int64_t s[8], int64_t bias, int64_t out[8])
{
    /* even part */
    int64_t rot = (s[2] + s[6]) * IDCT_FIX(0.5411961f);
    int64_t e2 = rot + s[6] * IDCT_FIX(-1.847759065f);
    int64_t e3 = rot + s[2] * IDCT_FIX(0.765366865f);
    int64_t e0 = (s[0] + s[4]) * 4096;
    int64_t e1 = (s[0] - s[4]) * 4096;
    int64_t x0 = e0 + e3 + bias;
    int64_t x3 = e0 - e3 + bias;
    int64_t x1 = e1 + e2 + bias;
    int64_t x2 = e1 - e2 + bias;
    /* odd part */
    int64_t o0 = s[7], o1 = s[5], o2 = s[3], o3 = s[1];
    int64_t z3 = o0 + o2, z4 = o1 + o3, z1 = o0 + o3, z2 = o1 + o2;
    int64_t z5 = (z3 + z4) * IDCT_FIX(1.175875602f);
    o0 *= IDCT_FIX(0.298631336f);
    o1 *= IDCT_FIX(2.053119869f);
    o2 *= IDCT_FIX(3.072711026f);
    o3 *= IDCT_FIX(1.501321110f);
    z1 = z5 + z1 * IDCT_FIX(-0.899976223f);
    z2 = z5 + z2 * IDCT_FIX(-2.562915447f);
    z3 *= IDCT_FIX(-1.961570560f);
    z4 *= IDCT_FIX(-0.390180644f);
    o3 += z1 + z4;
    o2 += z2 + z3;
    o1 += z2 + z4;
    o0 += z1 + z3;
    out[0] = x0 + o3;
    out[7] = x0 - o3;
    out[1] = x1 + o2;
    out[6] = x1 - o2;
    out[2] = x2 + o1;
    out[5] = x2 - o1;
    out[3] = x3 + o0;
    out[4] = x3 - o0;
}

void jpeg_idct_block(const int16_t coef[64], uint8_t *out, size_t stride)
{
    int64_t columns[64]; /* after the column pass, in natural order */
    int64_t in[8], res[8];
    for (int x = 0; x < 8; x++) {
        for (int k = 0; k < 8; k++)
            in[k] = coef[k * 8 + x];
        idct_8(in, 512, res);
        for (int k = 0; k < 8; k++)
            columns[k * 8 + x] = res[k] >> 10;
    }
    /* the row pass's bias also adds the level shift of +128 */
    const int64_t bias = 65536 + ((int64_t)128 << 17);
    for (int y = 0; y < 8; y++) {
        idct_8(columns + y * 8, bias, res);
        for (int k = 0; k < 8; k++)
            out[y * stride + k] = clamp_u8(res[k] >> 17);
    }
}

/* A plane's row r, clamped to the rows that belong to the image. */
static const uint8_t *plane_row(const jpeg_plane *p, int64_t r)
{
    if (r < 0)
        r = 0;
    if (r > (int64_t)p->height - 1)
        r = p->height - 1;
    return p->samples + (size_t)r * p->stride;
}

/* One full-resolution row y of plane p in out (at least width + hs samples), or the plane's
 * own row when it needs no upsampling. n is how many samples the plane has per row
 * (ceil(width / hs)). The triangle filters weight the nearer source 3:1; at the edges and
 * for other factors samples are repeated. */
static const uint8_t *upsample_row(const jpeg_plane *p, uint32_t y, uint32_t width,
                                   uint8_t *out)
{
    uint32_t n = (width + p->hs - 1) / p->hs;
    const uint8_t *near = plane_row(p, y / p->vs);
    const uint8_t *far = near;
    bool vertical = p->vs == 2 && (p->hs == 1 || p->hs == 2);
    if (vertical)
        far = plane_row(p, (int64_t)(y / 2) + ((y & 1) ? 1 : -1));

    if (p->hs == 1 && p->vs == 1)
        return near;
    if (p->hs == 1 && p->vs == 2) {
        for (uint32_t i = 0; i < n; i++)
            out[i] = (uint8_t)((3 * near[i] + far[i] + 2) >> 2);
        return out;
    }
    if (p->hs == 2 && p->vs == 1) {
        if (n == 1) {
            out[0] = out[1] = near[0];
            return out;
        }
        out[0] = near[0];
        out[1] = (uint8_t)((3 * near[0] + near[1] + 2) >> 2);
        for (uint32_t i = 1; i + 1 < n; i++) {
            out[2 * i] = (uint8_t)((3 * near[i] + near[i - 1] + 2) >> 2);
            out[2 * i + 1] = (uint8_t)((3 * near[i] + near[i + 1] + 2) >> 2);
        }
        /* The reference weights the second-to-last source sample 3:1 here, not the last. */
        out[2 * n - 2] = (uint8_t)((3 * near[n - 2] + near[n - 1] + 2) >> 2);
        out[2 * n - 1] = near[n - 1];
        return out;
    }
    if (p->hs == 2 && p->vs == 2) {
        int cur = 3 * near[0] + far[0];
        if (n == 1) {
            out[0] = out[1] = (uint8_t)((cur + 2) >> 2);
            return out;
        }
        out[0] = (uint8_t)((cur + 2) >> 2);
        for (uint32_t i = 1; i < n; i++) {
            int prev = cur;
            cur = 3 * near[i] + far[i];
            out[2 * i - 1] = (uint8_t)((3 * prev + cur + 8) >> 4);
            out[2 * i] = (uint8_t)((3 * cur + prev + 8) >> 4);
        }
        out[2 * n - 1] = (uint8_t)((cur + 2) >> 2);
        return out;
    }
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < p->hs; j++)
            out[i * p->hs + j] = near[i];
    return out;
}

/* x * y / 255, rounded the reference's way. */
static uint8_t mul_255(uint8_t x, uint8_t y)
{
    unsigned t = (unsigned)x * y + 128;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

/* YCbCr multipliers in 12.20 fixed point (a 4.12 constant shifted up by 8). */
#define YCC_FIX(x) (((int32_t)((x) * 4096.0f + 0.5f)) * 256)

static void ycbcr_to_rgb(uint8_t y, uint8_t cb, uint8_t cr, uint8_t *rgb)
{
    int32_t base = y * (1 << 20) + (1 << 19);
    int32_t dcr = cr - 128, dcb = cb - 128;
    int32_t r = base + dcr * YCC_FIX(1.40200f);
    /* The reference drops the low 16 bits of the blue-difference term of green. */
    int32_t g = base - dcr * YCC_FIX(0.71414f) + ((-dcb * YCC_FIX(0.34414f)) & ~0xffff);
    int32_t b = base + dcb * YCC_FIX(1.77200f);
    rgb[0] = clamp_u8(r >> 20);
    rgb[1] = clamp_u8(g >> 20);
    rgb[2] = clamp_u8(b >> 20);
}

void jpeg_planes_to_rgb(const jpeg_plane *planes, int n_planes, jpeg_color color,
                        uint32_t width, uint32_t height, uint8_t *line, uint8_t *rgb)
{
    const uint8_t *rows[4];
    for (uint32_t y = 0; y < height; y++) {
        for (int c = 0; c < n_planes; c++)
            rows[c] = upsample_row(&planes[c], y, width, line + (size_t)c * (width + 4));
        uint8_t *out = rgb + (size_t)y * width * 3;
        for (uint32_t x = 0; x < width; x++, out += 3) {
            switch (color) {
            case JPEG_COLOR_GRAY:
                out[0] = out[1] = out[2] = rows[0][x];
                break;
            case JPEG_COLOR_RGB:
                out[0] = rows[0][x];
                out[1] = rows[1][x];
                out[2] = rows[2][x];
                break;
            case JPEG_COLOR_YCBCR:
                ycbcr_to_rgb(rows[0][x], rows[1][x], rows[2][x], out);
                break;
            case JPEG_COLOR_CMYK:
                for (int c = 0; c < 3; c++)
                    out[c] = mul_255(rows[c][x], rows[3][x]);
                break;
            case JPEG_COLOR_YCCK:
                ycbcr_to_rgb(rows[0][x], rows[1][x], rows[2][x], out);
                for (int c = 0; c < 3; c++)
                    out[c] = mul_255((uint8_t)(255 - out[c]), rows[3][x]);
                break;
            }
        }
    }
}
