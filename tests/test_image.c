/*
 * Image decoding: the reference JPEG decodes to the reference decoder's exact RGB (its IDCT
 * and colour conversion are the reference's; PNG exactness shows in test_preprocess); WebP and GIF made here with
 * their libraries' encoders decode to what was encoded; EXIF orientation turns a JPEG
 * upright; and hostile files (truncated at every length, a 50,000 x 50,000 header, a
 * decompression bomb, a wrong magic) each fail with a message, never a crash (the asan
 * preset runs this under ASan and UBSan). Preprocessing gives llama.cpp's float pixels bit
 * for bit for the gemma3 and qwen2.5-vl projectors, PNG and JPEG.
 */
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <gif_lib.h>
#include <webp/encode.h>
#include <zlib.h>

#include "image/decoders.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "util/file.h"

#define FIXTURE_MAX_BYTES (1u << 20)

static uint8_t *read_fixture(const char *name, size_t *len)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/vision/%s", dir, name);
    corral_error err;
    uint8_t *data = (uint8_t *)util_read_file(path, FIXTURE_MAX_BYTES, len, &err);
    if (!data)
        fail_msg("%s", err.message);
    return data;
}

/* The decoded image in an allocation of exactly len bytes, so ASan sees any over-read. */
static image_rgb *decode_exact(const uint8_t *data, size_t len, const image_limits *limits,
                               corral_error *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, data, len);
    image_rgb *image = image_decode(copy, len, limits, err);
    free(copy);
    return image;
}

static image_rgb *decode_fixture(const char *name)
{
    size_t len;
    uint8_t *data = read_fixture(name, &len);
    corral_error err = {{0}};
    image_rgb *image = decode_exact(data, len, NULL, &err);
    free(data);
    if (!image)
        fail_msg("%s: %s", name, err.message);
    return image;
}

static void test_sniff(void **state)
{
    (void)state;
    size_t len;
    uint8_t *png = read_fixture("square.png", &len);
    assert_int_equal(image_sniff_format(png, len), IMAGE_FORMAT_PNG);
    assert_int_equal(image_sniff_format(png, 7), IMAGE_FORMAT_UNKNOWN);
    free(png);
    uint8_t *jpeg = read_fixture("square-jpeg.jpg", &len);
    assert_int_equal(image_sniff_format(jpeg, len), IMAGE_FORMAT_JPEG);
    free(jpeg);
    assert_int_equal(image_sniff_format((const uint8_t *)"RIFF\0\0\0\0WEBPVP8 ", 16),
                     IMAGE_FORMAT_WEBP);
    assert_int_equal(image_sniff_format((const uint8_t *)"RIFF\0\0\0\0WAVE", 12),
                     IMAGE_FORMAT_UNKNOWN);
    assert_int_equal(image_sniff_format((const uint8_t *)"GIF89a", 6), IMAGE_FORMAT_GIF);
    assert_int_equal(image_sniff_format((const uint8_t *)"BM", 2), IMAGE_FORMAT_UNKNOWN);
    assert_string_equal(image_format_name(IMAGE_FORMAT_WEBP), "webp");
}

/* The frame drawn into both test images: 2 pixels white at the top, black at the bottom and
 * blue at the left. The exact pixels are checked through preprocessing (test_preprocess),
 * whose references start from the reference decoder's bitmap. */
static void test_png_decodes(void **state)
{
    (void)state;
    const char *names[] = {"square.png", "wide.png"};
    const uint32_t widths[] = {96, 160};
    for (int i = 0; i < 2; i++) {
        image_rgb *image = decode_fixture(names[i]);
        uint32_t w = widths[i];
        assert_int_equal(image->width, w);
        assert_int_equal(image->height, 96);
        assert_memory_equal(image->pixels + (0 * w + w / 2) * 3, "\xff\xff\xff", 3);
        assert_memory_equal(image->pixels + (95 * w + w / 2) * 3, "\0\0\0", 3);
        assert_memory_equal(image->pixels + (48 * w + 0) * 3, "\0\0\xff", 3);
        image_rgb_free(image);
    }
}

static void test_jpeg_matches_reference(void **state)
{
    (void)state;
    image_rgb *image = decode_fixture("square-jpeg.jpg");
    size_t len;
    uint8_t *want = read_fixture("square-jpeg.rgb.u8", &len);
    assert_int_equal(image->width, 96);
    assert_int_equal(image->height, 96);
    assert_int_equal(len, 96 * 96 * 3);
    size_t differ = 0;
    for (size_t i = 0; i < len; i++)
        differ += image->pixels[i] != want[i];
    if (differ)
        fail_msg("%zu of %zu samples differ from the reference decoder", differ, len);
    free(want);
    image_rgb_free(image);
}

/* square-jpeg.jpg with an EXIF APP1 segment carrying orientation right after SOI. */
static uint8_t *jpeg_with_orientation(int orientation, bool big_endian, size_t *out_len)
{
    size_t len;
    uint8_t *jpeg = read_fixture("square-jpeg.jpg", &len);
    uint8_t tiff[26];
    if (big_endian) {
        const uint8_t t[26] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1,
                               0, (uint8_t)orientation, 0, 0, 0, 0, 0, 0};
        memcpy(tiff, t, sizeof t);
    } else {
        const uint8_t t[26] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0,
                               (uint8_t)orientation, 0, 0, 0, 0, 0, 0, 0};
        memcpy(tiff, t, sizeof t);
    }
    size_t seg = 2 + 6 + sizeof tiff; /* length field counts itself */
    uint8_t *out = malloc(len + 2 + seg);
    assert_non_null(out);
    memcpy(out, jpeg, 2);
    uint8_t head[4] = {0xff, 0xe1, (uint8_t)(seg >> 8), (uint8_t)seg};
    memcpy(out + 2, head, 4);
    memcpy(out + 6, "Exif\0\0", 6);
    memcpy(out + 12, tiff, sizeof tiff);
    memcpy(out + 12 + sizeof tiff, jpeg + 2, len - 2);
    *out_len = len + 2 + seg;
    free(jpeg);
    return out;
}

static void test_jpeg_exif_orientation(void **state)
{
    (void)state;
    image_rgb *upright = decode_fixture("square-jpeg.jpg");
    const uint32_t n = 96;
    for (int orientation = 1; orientation <= 8; orientation++) {
        size_t len;
        uint8_t *jpeg = jpeg_with_orientation(orientation, orientation % 2 == 0, &len);
        corral_error err = {{0}};
        image_rgb *turned = decode_exact(jpeg, len, NULL, &err);
        free(jpeg);
        if (!turned)
            fail_msg("orientation %d: %s", orientation, err.message);
        /* where the stored pixel (x, y) must show up for each tag */
        for (uint32_t y = 0; y < n; y++)
            for (uint32_t x = 0; x < n; x++) {
                uint32_t dx, dy;
                switch (orientation) {
                case 1: dx = x, dy = y; break;
                case 2: dx = n - 1 - x, dy = y; break;
                case 3: dx = n - 1 - x, dy = n - 1 - y; break;
                case 4: dx = x, dy = n - 1 - y; break;
                case 5: dx = y, dy = x; break;
                case 6: dx = n - 1 - y, dy = x; break;
                case 7: dx = n - 1 - y, dy = n - 1 - x; break;
                default: dx = y, dy = n - 1 - x; break;
                }
                if (memcmp(turned->pixels + (dy * n + dx) * 3, upright->pixels + (y * n + x) * 3,
                           3) != 0)
                    fail_msg("orientation %d: stored (%u, %u) is not at (%u, %u)", orientation,
                             x, y, dx, dy);
            }
        image_rgb_free(turned);
    }
    image_rgb_free(upright);
}

static void test_exif_parser_is_bounded(void **state)
{
    (void)state;
    const uint8_t good[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                            0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0};
    assert_int_equal(image_exif_orientation(good, sizeof good), 6);
    /* every truncation is "no orientation", read within the buffer (ASan checks) */
    for (size_t len = 0; len < sizeof good; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, good, len);
        assert_int_equal(image_exif_orientation(cut, len), 1);
        free(cut);
    }
    uint8_t bad[sizeof good];
    memcpy(bad, good, sizeof good);
    bad[24] = 9; /* no such orientation */
    assert_int_equal(image_exif_orientation(bad, sizeof bad), 1);
    memcpy(bad, good, sizeof good);
    bad[10] = 0xff, bad[11] = 0xff, bad[12] = 0xff, bad[13] = 0xff; /* IFD far outside */
    assert_int_equal(image_exif_orientation(bad, sizeof bad), 1);
    memcpy(bad, good, sizeof good);
    bad[14] = 0xff, bad[15] = 0xff; /* 65535 entries claimed */
    assert_int_equal(image_exif_orientation(bad, sizeof bad), 1);
}

static void test_webp_round_trip(void **state)
{
    (void)state;
    image_rgb *src = decode_fixture("wide.png");
    uint8_t *webp = NULL;
    size_t len = WebPEncodeLosslessRGB(src->pixels, (int)src->width, (int)src->height,
                                       (int)src->width * 3, &webp);
    assert_true(len > 0);
    corral_error err = {{0}};
    image_rgb *back = decode_exact(webp, len, NULL, &err);
    if (!back)
        fail_msg("%s", err.message);
    assert_int_equal(back->width, src->width);
    assert_int_equal(back->height, src->height);
    assert_memory_equal(back->pixels, src->pixels, (size_t)src->width * src->height * 3);
    image_rgb_free(back);
    /* every truncation is an error with a message */
    for (size_t cut = 0; cut < len; cut += cut < 64 ? 1 : 97) {
        corral_error e = {{0}};
        image_rgb *partial = decode_exact(webp, cut, NULL, &e);
        assert_null(partial);
        assert_true(e.message[0] != '\0');
    }
    WebPFree(webp);
    image_rgb_free(src);
}

/* ---- GIF written with giflib into memory ---- */

typedef struct byte_sink {
    uint8_t data[1 << 16];
    size_t len;
} byte_sink;

static int sink_write(GifFileType *gif, const GifByteType *p, int n)
{
    byte_sink *sink = gif->UserData;
    assert_true(sink->len + (size_t)n <= sizeof sink->data);
    memcpy(sink->data + sink->len, p, (size_t)n);
    sink->len += (size_t)n;
    return n;
}

/* A 12 x 10 screen, background index 3, whose first frame (8 x 6 at (2, 3), interlaced or
 * not) shows index (x + y) % 4 with index 2 transparent; then a second frame that must not
 * show. */
static void make_gif(byte_sink *sink, bool interlaced)
{
    int error;
    sink->len = 0;
    GifFileType *gif = EGifOpen(sink, sink_write, &error);
    assert_non_null(gif);
    GifColorType colors[4] = {{10, 20, 30}, {200, 100, 50}, {0, 255, 0}, {1, 2, 250}};
    ColorMapObject *map = GifMakeMapObject(4, colors);
    assert_int_equal(EGifPutScreenDesc(gif, 12, 10, 2, 3, map), GIF_OK);
    GraphicsControlBlock gcb = {.DisposalMode = DISPOSAL_UNSPECIFIED, .TransparentColor = 2};
    GifByteType ext[4];
    size_t ext_len = EGifGCBToExtension(&gcb, ext);
    assert_int_equal(EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, (int)ext_len, ext), GIF_OK);
    assert_int_equal(EGifPutImageDesc(gif, 2, 3, 8, 6, interlaced, NULL), GIF_OK);
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    for (int pass = 0; pass < (interlaced ? 4 : 1); pass++)
        for (int y = interlaced ? start[pass] : 0; y < 6; y += interlaced ? step[pass] : 1) {
            GifPixelType line[8];
            for (int x = 0; x < 8; x++)
                line[x] = (GifPixelType)((x + y) % 4);
            assert_int_equal(EGifPutLine(gif, line, 8), GIF_OK);
        }
    assert_int_equal(EGifPutImageDesc(gif, 0, 0, 12, 10, false, NULL), GIF_OK);
    for (int y = 0; y < 10; y++) {
        GifPixelType line[12] = {0};
        assert_int_equal(EGifPutLine(gif, line, 12), GIF_OK);
    }
    assert_int_equal(EGifCloseFile(gif, &error), GIF_OK);
    GifFreeMapObject(map);
}

static void test_gif_first_frame(void **state)
{
    (void)state;
    static byte_sink sink;
    for (int interlaced = 0; interlaced < 2; interlaced++) {
        make_gif(&sink, interlaced);
        corral_error err = {{0}};
        image_rgb *image = decode_exact(sink.data, sink.len, NULL, &err);
        if (!image)
            fail_msg("%s", err.message);
        assert_int_equal(image->width, 12);
        assert_int_equal(image->height, 10);
        for (uint32_t y = 0; y < 10; y++)
            for (uint32_t x = 0; x < 12; x++) {
                const uint8_t *p = image->pixels + (y * 12 + x) * 3;
                uint8_t want[3];
                bool inside = x >= 2 && x < 10 && y >= 3 && y < 9;
                int index = inside ? (int)((x - 2 + y - 3) % 4) : -1;
                if (!inside) { /* background entry 3 = (1, 2, 250), red and blue swapped */
                    want[0] = 250, want[1] = 2, want[2] = 1;
                } else if (index == 2) { /* transparent */
                    want[0] = want[1] = want[2] = 0;
                } else {
                    static const uint8_t rgb[4][3] = {{10, 20, 30}, {200, 100, 50}, {0, 0, 0},
                                                      {1, 2, 250}};
                    memcpy(want, rgb[index], 3);
                }
                if (memcmp(p, want, 3) != 0)
                    fail_msg("interlaced %d: pixel (%u, %u) is %u,%u,%u", interlaced, x, y,
                             p[0], p[1], p[2]);
            }
        image_rgb_free(image);
        for (size_t cut = 0; cut + 1 < sink.len; cut++) {
            corral_error e = {{0}};
            image_rgb *partial = decode_exact(sink.data, cut, NULL, &e);
            /* cut inside the second frame: the first is complete, and is all that is read */
            if (partial) {
                image_rgb_free(partial);
                continue;
            }
            assert_true(e.message[0] != '\0');
        }
    }
}

/* ---- hand-made PNGs ---- */

static void put_chunk(uint8_t *out, size_t *len, const char *type, const uint8_t *body,
                      uint32_t n)
{
    uint8_t be[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    memcpy(out + *len, be, 4);
    memcpy(out + *len + 4, type, 4);
    if (n)
        memcpy(out + *len + 8, body, n);
    uLong crc = crc32(0, (const Bytef *)type, 4);
    crc = crc32(crc, body, n);
    uint8_t c[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
                    (uint8_t)crc};
    memcpy(out + *len + 8 + n, c, 4);
    *len += 12 + n;
}

/* An 8-bit RGB PNG claiming width x height whose IDAT is raw_bytes of zeros, deflated (a
 * small file that inflates to raw_bytes). */
static uint8_t *make_png(uint32_t width, uint32_t height, size_t raw_bytes, size_t *len)
{
    uint8_t *raw = calloc(raw_bytes, 1);
    uLongf packed_len = compressBound(raw_bytes);
    uint8_t *packed = malloc(packed_len);
    assert_non_null(raw);
    assert_non_null(packed);
    assert_int_equal(compress2(packed, &packed_len, raw, raw_bytes, 9), Z_OK);
    free(raw);
    uint8_t *out = malloc(64 + packed_len);
    assert_non_null(out);
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(out, sig, 8);
    *len = 8;
    uint8_t ihdr[13] = {(uint8_t)(width >> 24), (uint8_t)(width >> 16), (uint8_t)(width >> 8),
                        (uint8_t)width, (uint8_t)(height >> 24), (uint8_t)(height >> 16),
                        (uint8_t)(height >> 8), (uint8_t)height, 8, 2, 0, 0, 0};
    put_chunk(out, len, "IHDR", ihdr, 13);
    put_chunk(out, len, "IDAT", packed, (uint32_t)packed_len);
    put_chunk(out, len, "IEND", NULL, 0);
    free(packed);
    return out;
}

static void expect_rejected(const uint8_t *data, size_t len, const image_limits *limits,
                            const char *needle)
{
    corral_error err = {{0}};
    image_rgb *image = decode_exact(data, len, limits, &err);
    if (image)
        fail_msg("decoded a %u x %u image, expected an error with \"%s\"", image->width,
                 image->height, needle);
    if (!strstr(err.message, needle))
        fail_msg("error \"%s\" does not say \"%s\"", err.message, needle);
}

static void test_hostile_sizes(void **state)
{
    (void)state;
    size_t len;
    /* a 50,000 x 50,000 header: refused from the header, nothing inflated */
    uint8_t *huge = make_png(50000, 50000, 1 << 16, &len);
    expect_rejected(huge, len, NULL, "50000 x 50000 pixels, more than 16384 a side");
    free(huge);
    /* a bomb inside the side limit: 16384 x 16384 of zeros (768 MiB inflated) in a small file */
    uint8_t *bomb = make_png(16384, 16384, 8 << 20, &len);
    assert_true(len < 64 * 1024);
    expect_rejected(bomb, len, NULL, "more than 67108864 in all");
    free(bomb);
    /* limits are the caller's: the same file under tighter ones */
    uint8_t *small = make_png(64, 64, 64 * (1 + 64 * 3), &len);
    image_limits tight = {.max_side = 32, .max_pixels = 1 << 20};
    expect_rejected(small, len, &tight, "more than 32 a side");
    tight = (image_limits){.max_side = 1000, .max_pixels = 1000};
    expect_rejected(small, len, &tight, "more than 1000 in all");
    corral_error err = {{0}};
    image_rgb *ok = decode_exact(small, len, NULL, &err);
    assert_non_null(ok);
    image_rgb_free(ok);
    free(small);
    /* far more compressed data than a 1 x 1 image needs: only what the rows need is
     * inflated, and the picture is the one pixel */
    uint8_t *extra = make_png(1, 1, 16 << 20, &len);
    image_rgb *one = decode_exact(extra, len, NULL, &err);
    if (one) {
        assert_int_equal(one->width, 1);
        assert_memory_equal(one->pixels, "\0\0\0", 3);
        image_rgb_free(one);
    } else {
        assert_true(err.message[0] != '\0');
    }
    free(extra);
    /* too little compressed data for the rows */
    uint8_t *short_idat = make_png(64, 64, 10 * (1 + 64 * 3), &len);
    expect_rejected(short_idat, len, NULL, "corrupt PNG");
    free(short_idat);
}

static void test_truncated_and_wrong_magic(void **state)
{
    (void)state;
    const char *files[] = {"square.png", "wide.png", "square-jpeg.jpg"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t len;
        uint8_t *data = read_fixture(files[f], &len);
        for (size_t cut = 0; cut < len; cut++) {
            corral_error err = {{0}};
            image_rgb *image = decode_exact(data, cut, NULL, &err);
            /* a file cut only in its end marker (a JPEG's EOI, a PNG's IEND chunk) still
             * has every pixel */
            size_t end_marker = strstr(files[f], "jpg") ? 2 : 12;
            if (image && cut >= len - end_marker) {
                image_rgb *whole = decode_exact(data, len, NULL, &err);
                assert_non_null(whole);
                assert_memory_equal(image->pixels, whole->pixels,
                                    (size_t)whole->width * whole->height * 3);
                image_rgb_free(whole);
                image_rgb_free(image);
                continue;
            }
            if (image)
                fail_msg("%s cut to %zu of %zu bytes decoded", files[f], cut, len);
            assert_true(err.message[0] != '\0');
        }
        data[0] ^= 0xff; /* wrong magic */
        expect_rejected(data, len, NULL, "unsupported image format");
        free(data);
    }
    expect_rejected((const uint8_t *)"", 0, NULL, "unsupported image format");
    expect_rejected((const uint8_t *)"<html>not an image</html>", 25, NULL,
                    "unsupported image format");
}

/* A valid JPEG with one entropy-coded byte flipped anywhere either decodes (the damage
 * only changes pixels) or fails with a message; never a crash or an over-read. */
static void test_jpeg_corruption(void **state)
{
    (void)state;
    size_t len;
    uint8_t *data = read_fixture("square-jpeg.jpg", &len);
    for (size_t i = 2; i < len; i += 7) {
        data[i] ^= 0x5a;
        corral_error err = {{0}};
        image_rgb *image = decode_exact(data, len, NULL, &err);
        if (image)
            image_rgb_free(image);
        else
            assert_true(err.message[0] != '\0');
        data[i] ^= 0x5a;
    }
    free(data);
}

/* ---- preprocessing (image/preprocess.h) ---- */

/* The two projectors' parameters as their projector files give them (clip.vision.image_size,
 * patch_size, image_mean, image_std) plus the fit, merge and token bounds llama.cpp applies
 * to each projector type. Written out here so this test needs no model file. */
static image_preprocess gemma3_params(void)
{
    return (image_preprocess){
        .fit = IMAGE_FIT_LETTERBOX,
        .image_size = 64,
        .patch_size = 4,
        .mean = {0.5f, 0.5f, 0.5f},
        .std = {0.5f, 0.5f, 0.5f},
    };
}

static image_preprocess qwen25vl_params(void)
{
    image_preprocess p = {
        .fit = IMAGE_FIT_SMART_RESIZE,
        .patch_size = 14,
        .merge = 2,
        .mean = {0.48145466f, 0.4578275f, 0.40821073f},
        .std = {0.26862954f, 0.26130258f, 0.27577711f},
    };
    image_preprocess_set_token_bounds(&p, 8, 4096);
    return p;
}

static void expect_pixels(const char *model, const char *image_name, const char *fixture,
                          const image_preprocess *p, uint32_t nx, uint32_t ny)
{
    image_rgb *image = decode_fixture(image_name);
    corral_error err = {{0}};
    image_pixels *pixels = image_preprocess_run(p, image, &err);
    if (!pixels)
        fail_msg("%s %s: %s", model, image_name, err.message);
    assert_int_equal(pixels->nx, nx);
    assert_int_equal(pixels->ny, ny);
    size_t len;
    uint8_t *want = read_fixture(fixture, &len);
    size_t n = (size_t)nx * ny * 3;
    assert_int_equal(len, n * sizeof(float));
    size_t differ = 0;
    float max_diff = 0;
    for (size_t i = 0; i < n; i++) {
        float w;
        memcpy(&w, want + i * sizeof w, sizeof w);
        float d = fabsf(w - pixels->data[i]);
        differ += d != 0.0f;
        max_diff = d > max_diff ? d : max_diff;
    }
    if (differ)
        fail_msg("%s %s: %zu of %zu values differ (max %g)", model, image_name, differ, n,
                 (double)max_diff);
    free(want);
    image_pixels_free(pixels);
    image_rgb_free(image);
}

static void test_preprocess_matches_reference(void **state)
{
    (void)state;
    image_preprocess gemma3 = gemma3_params(), qwen = qwen25vl_params();
    expect_pixels("gemma3", "square.png", "gemma3.square.pixels.f32", &gemma3, 64, 64);
    expect_pixels("gemma3", "wide.png", "gemma3.wide.pixels.f32", &gemma3, 64, 64);
    expect_pixels("gemma3", "square-jpeg.jpg", "gemma3.square-jpeg.pixels.f32", &gemma3, 64, 64);
    expect_pixels("qwen2.5-vl", "square.png", "qwen25vl.square.pixels.f32", &qwen, 84, 84);
    expect_pixels("qwen2.5-vl", "wide.png", "qwen25vl.wide.pixels.f32", &qwen, 168, 84);
    expect_pixels("qwen2.5-vl", "square-jpeg.jpg", "qwen25vl.square-jpeg.pixels.f32", &qwen, 84,
                  84);
}

static void expect_size(const image_preprocess *p, uint32_t w, uint32_t h, uint32_t nx,
                        uint32_t ny)
{
    uint32_t got_x = 0, got_y = 0;
    corral_error err = {{0}};
    if (!image_preprocess_size(p, w, h, &got_x, &got_y, &err))
        fail_msg("%u x %u: %s", w, h, err.message);
    if (got_x != nx || got_y != ny)
        fail_msg("%u x %u became %u x %u, expected %u x %u", w, h, got_x, got_y, nx, ny);
}

/* The smart resize's three branches, worked by hand: round to multiples of 28; over 4096
 * tokens, scale down by beta = sqrt(w h / max) and floor; under 8 tokens, scale up and ceil. */
static void test_smart_resize_sizes(void **state)
{
    (void)state;
    image_preprocess qwen = qwen25vl_params();
    assert_int_equal(qwen.min_pixels, 8 * 28 * 28);
    assert_int_equal(qwen.max_pixels, 4096 * 28 * 28);
    expect_size(&qwen, 84, 84, 84, 84);
    expect_size(&qwen, 100, 50, 112, 56);     /* 3.57 -> 4, 1.79 -> 2 */
    expect_size(&qwen, 4000, 3000, 2044, 1540); /* beta 1.933: 73.9 -> 73, 55.4 -> 55 */
    expect_size(&qwen, 10, 10, 84, 84);       /* beta 7.92: 2.83 -> 3 */
    expect_size(&qwen, 1, 16384, 28, 16380);  /* the thin side stays one unit */
    image_preprocess gemma3 = gemma3_params();
    expect_size(&gemma3, 4000, 3000, 64, 64);
}

static void test_preprocess_rejects_bad_parameters(void **state)
{
    (void)state;
    uint32_t nx, ny;
    corral_error err = {{0}};
    image_preprocess p = gemma3_params();
    p.patch_size = 0;
    assert_false(image_preprocess_size(&p, 10, 10, &nx, &ny, &err));
    p = gemma3_params();
    p.std[1] = 0.0f;
    assert_false(image_preprocess_size(&p, 10, 10, &nx, &ny, &err));
    p = gemma3_params();
    p.image_size = 0;
    assert_false(image_preprocess_size(&p, 10, 10, &nx, &ny, &err));
    p = qwen25vl_params();
    p.min_pixels = p.max_pixels + 1;
    assert_false(image_preprocess_size(&p, 10, 10, &nx, &ny, &err));
    p = qwen25vl_params();
    p.max_pixels = 1ull << 40; /* a projector file asking for a terapixel */
    assert_false(image_preprocess_size(&p, 10, 10, &nx, &ny, &err));
    assert_true(err.message[0] != '\0');
}

/* The letterbox keeps the aspect ratio: a 1-pixel-tall strip still fills a centred row band
 * with the rest black, and a one-pixel image (which the reference's resize would read past)
 * becomes a solid square. */
static void test_letterbox_edges(void **state)
{
    (void)state;
    image_preprocess p = gemma3_params();
    corral_error err = {{0}};
    image_rgb *strip = image_rgb_create(640, 1, &err);
    memset(strip->pixels, 255, 640 * 3);
    image_pixels *px = image_preprocess_run(&p, strip, &err);
    assert_non_null(px);
    /* 640 x 1 scales by 0.1 to 64 x ceil(0.1) = 64 x 1 at row (64 - 1) / 2 = 31 */
    for (uint32_t y = 0; y < 64; y++)
        for (uint32_t x = 0; x < 64; x++)
            assert_true(px->data[(y * 64 + x) * 3] == (y == 31 ? 1.0f : -1.0f));
    image_pixels_free(px);
    image_rgb_free(strip);
    image_rgb *dot = image_rgb_create(1, 1, &err);
    memcpy(dot->pixels, "\xff\x00\xff", 3);
    px = image_preprocess_run(&p, dot, &err);
    assert_non_null(px);
    for (size_t i = 0; i < 64 * 64; i++)
        assert_true(px->data[i * 3] == 1.0f && px->data[i * 3 + 1] == -1.0f);
    image_pixels_free(px);
    image_rgb_free(dot);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sniff),
        cmocka_unit_test(test_png_decodes),
        cmocka_unit_test(test_jpeg_matches_reference),
        cmocka_unit_test(test_jpeg_exif_orientation),
        cmocka_unit_test(test_exif_parser_is_bounded),
        cmocka_unit_test(test_webp_round_trip),
        cmocka_unit_test(test_gif_first_frame),
        cmocka_unit_test(test_hostile_sizes),
        cmocka_unit_test(test_truncated_and_wrong_magic),
        cmocka_unit_test(test_jpeg_corruption),
        cmocka_unit_test(test_preprocess_matches_reference),
        cmocka_unit_test(test_smart_resize_sizes),
        cmocka_unit_test(test_preprocess_rejects_bad_parameters),
        cmocka_unit_test(test_letterbox_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
