/*
 * GGUF reader and writer: every fixture loads with the keys and tensors its reference JSON
 * lists; hand-built malformed files each fail with their own message (and, under ASan, with
 * no out-of-bounds read: each image sits in an allocation of exactly its size); the writer
 * round-trips every value type and never leaves a partial file behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "gguf.h"
#include "tensor_type.h"

/* ---- a byte builder for hand-made GGUF images ---- */

typedef struct image {
    uint8_t data[1 << 17];
    size_t size;
} image;

static void put(image *im, const void *p, size_t n)
{
    assert_true(im->size + n <= sizeof im->data);
    memcpy(im->data + im->size, p, n);
    im->size += n;
}

static void put_u32(image *im, uint32_t v) { put(im, &v, 4); }
static void put_u64(image *im, uint64_t v) { put(im, &v, 8); }

static void put_str(image *im, const char *s)
{
    put_u64(im, strlen(s));
    put(im, s, strlen(s));
}

static void header(image *im, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    im->size = 0;
    put(im, "GGUF", 4);
    put_u32(im, version);
    put_u64(im, n_tensors);
    put_u64(im, n_kv);
}

static void kv_u32(image *im, const char *key, uint32_t v)
{
    put_str(im, key);
    put_u32(im, GGUF_TYPE_UINT32);
    put_u32(im, v);
}

static void kv_str(image *im, const char *key, const char *v)
{
    put_str(im, key);
    put_u32(im, GGUF_TYPE_STRING);
    put_str(im, v);
}

static void tensor_info(image *im, const char *name, uint32_t n_dims, const int64_t *ne,
                        uint32_t type, uint64_t offset)
{
    put_str(im, name);
    put_u32(im, n_dims);
    put(im, ne, 8 * (size_t)n_dims);
    put_u32(im, type);
    put_u64(im, offset);
}

static void pad_and_data(image *im, size_t alignment, size_t data_bytes)
{
    while (im->size % alignment)
        im->data[im->size++] = 0;
    for (size_t i = 0; i < data_bytes; i++)
        im->data[im->size++] = (uint8_t)i;
}

/* Open a copy of the image in an exact-size allocation; returns the error or NULL. */
static const char *open_image(const image *im, corral_error *err)
{
    uint8_t *copy = malloc(im->size ? im->size : 1);
    assert_non_null(copy);
    memcpy(copy, im->data, im->size);
    err->message[0] = '\0';
    gguf_file *f = gguf_open_memory(copy, im->size, "bad.gguf", err);
    bool ok = f != NULL;
    gguf_close(f);
    free(copy);
    return ok ? NULL : err->message;
}

static void expect_error(const image *im, const char *fragment)
{
    corral_error err;
    const char *message = open_image(im, &err);
    if (!message)
        fail_msg("expected an error containing '%s', but the file loaded", fragment);
    if (!strstr(message, fragment))
        fail_msg("expected an error containing '%s', got '%s'", fragment, message);
    assert_non_null(strstr(message, "bad.gguf")); /* every message names the file */
}

/* A valid two-tensor file the malformed cases start from. */
static const int64_t ne_8x2[2] = {8, 2};
static const int64_t ne_32[1] = {32};

static void valid_file(image *im)
{
    header(im, 3, 2, 2);
    kv_str(im, "general.architecture", "llama");
    kv_u32(im, "llama.block_count", 1);
    tensor_info(im, "a", 2, ne_8x2, TENSOR_TYPE_F32, 0);
    tensor_info(im, "b", 1, ne_32, TENSOR_TYPE_Q8_0, 64);
    pad_and_data(im, 32, 64 + 34);
}

static void test_gguf_accepts_minimal_valid_file(void **state)
{
    (void)state;
    image im;
    valid_file(&im);
    corral_error err;
    gguf_file *f = gguf_open_memory(im.data, im.size, "ok.gguf", &err);
    assert_non_null(f);
    assert_int_equal(gguf_n_tensors(f), 2);
    const gguf_tensor *b = gguf_find_tensor(f, "b");
    assert_non_null(b);
    assert_int_equal(b->size_bytes, 34);
    assert_ptr_equal(b->data, im.data + gguf_data_offset(f) + 64);
    uint32_t blocks = 0;
    assert_true(gguf_get_u32(f, "llama.block_count", &blocks, &err));
    assert_int_equal(blocks, 1);
    gguf_close(f);
}

static void test_gguf_rejects_empty_input(void **state)
{
    (void)state;
    image im = {.size = 0};
    expect_error(&im, "truncated");
}

static void test_gguf_rejects_bad_magic(void **state)
{
    (void)state;
    image im;
    valid_file(&im);
    im.data[0] = 'X';
    expect_error(&im, "bad magic");
}

static void test_gguf_rejects_version_1(void **state)
{
    (void)state;
    image im;
    header(&im, 1, 0, 0);
    expect_error(&im, "version 1 is not supported");
}

static void test_gguf_rejects_version_4(void **state)
{
    (void)state;
    image im;
    header(&im, 4, 0, 0);
    expect_error(&im, "version 4 is not supported");
}

static void test_gguf_rejects_byte_swapped_version(void **state)
{
    (void)state;
    image im;
    header(&im, 0x03000000, 0, 0);
    expect_error(&im, "byte-swapped");
}

static void test_gguf_rejects_truncated_header(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 0);
    im.size = 12;
    expect_error(&im, "truncated: tensor count");
}

static void test_gguf_rejects_huge_kv_count(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1ull << 62);
    expect_error(&im, "metadata pairs, more than the limit");
}

static void test_gguf_rejects_kv_count_beyond_file(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 100);
    kv_u32(&im, "a", 1);
    expect_error(&im, "metadata pairs, more than the file can hold");
}

static void test_gguf_rejects_huge_tensor_count(void **state)
{
    (void)state;
    image im;
    header(&im, 3, UINT64_MAX, 0);
    expect_error(&im, "tensors, more than the limit");
}

static void test_gguf_rejects_tensor_count_beyond_file(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 1000, 0);
    expect_error(&im, "tensors, more than the file can hold");
}

static void test_gguf_rejects_key_length_past_end(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_u64(&im, 1ull << 40);
    put(&im, "abcdefghijklmnop", 16);
    expect_error(&im, "metadata key at offset 24 claims 1099511627776 bytes");
}

static void test_gguf_rejects_empty_key(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    kv_u32(&im, "", 7);
    expect_error(&im, "empty key");
}

static void test_gguf_rejects_key_with_nul(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_u64(&im, 3);
    put(&im, "a\0b", 3);
    put_u32(&im, GGUF_TYPE_UINT8);
    put(&im, "x", 1);
    expect_error(&im, "contains a NUL byte");
}

static void test_gguf_rejects_overlong_key(void **state)
{
    (void)state;
    static image im;
    header(&im, 3, 0, 1);
    size_t len = GGUF_MAX_KEY_BYTES + 1;
    put_u64(&im, len);
    memset(im.data + im.size, 'k', len);
    im.size += len;
    put_u32(&im, GGUF_TYPE_UINT8);
    put(&im, "x", 1);
    expect_error(&im, "bytes long; the limit is 65535");
}

static void test_gguf_rejects_duplicate_key(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 2);
    kv_u32(&im, "general.x", 1);
    kv_u32(&im, "general.x", 2);
    expect_error(&im, "duplicate metadata key 'general.x'");
}

static void test_gguf_rejects_unknown_value_type(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.x");
    put_u32(&im, 13);
    put_u32(&im, 0);
    expect_error(&im, "unknown value type 13");
}

static void test_gguf_rejects_truncated_value(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.x");
    put_u32(&im, GGUF_TYPE_UINT64);
    put_u32(&im, 0);
    expect_error(&im, "key 'general.x': 1 uint64 values need 8 bytes");
}

static void test_gguf_rejects_string_value_without_end(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.name");
    put_u32(&im, GGUF_TYPE_STRING);
    put_u64(&im, 50);
    put(&im, "short", 5);
    expect_error(&im, "key 'general.name': bad.gguf: string value at offset");
}

static void test_gguf_rejects_array_of_arrays(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.nested");
    put_u32(&im, GGUF_TYPE_ARRAY);
    put_u32(&im, GGUF_TYPE_ARRAY);
    put_u64(&im, 1);
    put_u32(&im, GGUF_TYPE_UINT8);
    put_u64(&im, 0);
    expect_error(&im, "array of arrays");
}

static void test_gguf_rejects_array_of_unknown_type(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.list");
    put_u32(&im, GGUF_TYPE_ARRAY);
    put_u32(&im, 99);
    put_u64(&im, 0);
    expect_error(&im, "array of an unknown type (type 99)");
}

static void test_gguf_rejects_array_over_length_cap(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.list");
    put_u32(&im, GGUF_TYPE_ARRAY);
    put_u32(&im, GGUF_TYPE_UINT8);
    put_u64(&im, (uint64_t)GGUF_MAX_ARRAY_LEN + 1);
    expect_error(&im, "array elements; the limit is");
}

static void test_gguf_rejects_array_past_end(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.list");
    put_u32(&im, GGUF_TYPE_ARRAY);
    put_u32(&im, GGUF_TYPE_FLOAT32);
    put_u64(&im, 1000);
    put_u32(&im, 0);
    expect_error(&im, "1000 float32 values need 4000 bytes");
}

static void test_gguf_rejects_string_array_past_end(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "tokenizer.ggml.tokens");
    put_u32(&im, GGUF_TYPE_ARRAY);
    put_u32(&im, GGUF_TYPE_STRING);
    put_u64(&im, 3);
    put_str(&im, "a");
    put_u64(&im, 1000);
    put(&im, "bcdefghijklmnop", 15);
    expect_error(&im, "array string at offset");
}

static void test_gguf_rejects_alignment_of_wrong_type(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    put_str(&im, "general.alignment");
    put_u32(&im, GGUF_TYPE_UINT64);
    put_u64(&im, 32);
    expect_error(&im, "general.alignment must be a uint32, not uint64");
}

static void test_gguf_rejects_alignment_not_power_of_two(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    kv_u32(&im, "general.alignment", 48);
    expect_error(&im, "general.alignment 48 is not a power of two");
}

static void test_gguf_rejects_zero_alignment(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 1);
    kv_u32(&im, "general.alignment", 0);
    expect_error(&im, "general.alignment 0 is not a power of two");
}

static void test_gguf_rejects_overlong_tensor_name(void **state)
{
    (void)state;
    image im;
    char name[65];
    memset(name, 'n', 64);
    name[64] = '\0';
    header(&im, 3, 1, 0);
    tensor_info(&im, name, 1, ne_32, TENSOR_TYPE_F32, 0);
    pad_and_data(&im, 32, 128);
    expect_error(&im, "is 64 bytes long; the limit is 63");
}

static void test_gguf_rejects_duplicate_tensor_name(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 2, 0);
    tensor_info(&im, "w", 1, ne_32, TENSOR_TYPE_F32, 0);
    tensor_info(&im, "w", 1, ne_32, TENSOR_TYPE_F32, 128);
    pad_and_data(&im, 32, 256);
    expect_error(&im, "duplicate tensor name 'w'");
}

static void test_gguf_rejects_five_dimensions(void **state)
{
    (void)state;
    image im;
    int64_t ne[5] = {1, 1, 1, 1, 1};
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 5, ne, TENSOR_TYPE_F32, 0);
    expect_error(&im, "tensor 'w' has 5 dimensions; at most 4");
}

static void test_gguf_rejects_zero_dimension(void **state)
{
    (void)state;
    image im;
    int64_t ne[2] = {32, 0};
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 2, ne, TENSOR_TYPE_F32, 0);
    expect_error(&im, "tensor 'w' dimension 1 is 0");
}

static void test_gguf_rejects_negative_dimension(void **state)
{
    (void)state;
    image im;
    int64_t ne[2] = {-32, 2};
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 2, ne, TENSOR_TYPE_F32, 0);
    expect_error(&im, "tensor 'w' dimension 0 is -32");
}

static void test_gguf_rejects_unknown_tensor_type(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 1, ne_32, 40, 0);
    expect_error(&im, "tensor 'w' has unknown or removed type 40");
}

static void test_gguf_rejects_removed_tensor_type(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 1, ne_32, 5, 0); /* Q4_3 (4, Q4_2, is ollama's MXFP4) */
    expect_error(&im, "tensor 'w' has unknown or removed type 5");
}

static void test_gguf_rejects_row_not_whole_blocks(void **state)
{
    (void)state;
    image im;
    int64_t ne[1] = {33};
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 1, ne, TENSOR_TYPE_Q4_0, 0);
    expect_error(&im, "row length 33 is not a multiple of the q4_0 block size 32");
}

static void test_gguf_rejects_overflowing_shape(void **state)
{
    (void)state;
    image im;
    int64_t ne[4] = {1ll << 20, 1ll << 20, 1ll << 20, 1ll << 20};
    header(&im, 3, 1, 0);
    tensor_info(&im, "w", 4, ne, TENSOR_TYPE_F32, 0);
    expect_error(&im, "overflows its size");
}

static void test_gguf_rejects_offset_not_following_previous(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 2, 0);
    tensor_info(&im, "a", 1, ne_32, TENSOR_TYPE_F32, 0);
    tensor_info(&im, "b", 1, ne_32, TENSOR_TYPE_F32, 256);
    pad_and_data(&im, 32, 512);
    expect_error(&im, "tensor 'b' is at data offset 256, but the tensors before it end at 128");
}

static void test_gguf_rejects_misaligned_offset(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 1, 0);
    tensor_info(&im, "a", 1, ne_32, TENSOR_TYPE_F32, 4);
    pad_and_data(&im, 32, 256);
    expect_error(&im, "tensor 'a' is at data offset 4");
}

static void test_gguf_rejects_data_past_end(void **state)
{
    (void)state;
    image im;
    valid_file(&im);
    im.size -= 10;
    expect_error(&im, "tensor 'b': data ends at byte");
}

static void test_gguf_rejects_truncated_tensor_info(void **state)
{
    (void)state;
    image im;
    valid_file(&im);
    /* cut inside the second tensor's info: the 1-D "b" record is 8+1+4+8+4+8 bytes */
    size_t info_end = 24 + (8 + 20 + 4 + 8 + 5) + (8 + 17 + 4 + 4) + (8 + 1 + 4 + 16 + 4 + 8);
    im.size = info_end + 10;
    expect_error(&im, "truncated");
}

static void test_gguf_rejects_nonexistent_and_empty_paths(void **state)
{
    (void)state;
    corral_error err;
    assert_null(gguf_open("/nonexistent/model.gguf", &err));
    assert_non_null(strstr(err.message, "No such file"));
    assert_null(gguf_open("/tmp", &err));
    assert_non_null(strstr(err.message, "not a regular file"));
    char path[] = "/tmp/corral-empty-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_null(gguf_open(path, &err));
    assert_non_null(strstr(err.message, "file is empty"));
    unlink(path);
}

/* ---- typed accessors ---- */

static void test_gguf_accessors_report_missing_and_wrong_type(void **state)
{
    (void)state;
    image im;
    header(&im, 3, 0, 3);
    kv_str(&im, "general.name", "x");
    kv_u32(&im, "n", 7);
    put_str(&im, "neg");
    put_u32(&im, GGUF_TYPE_INT32);
    put_u32(&im, (uint32_t)-5);
    corral_error err;
    gguf_file *f = gguf_open_memory(im.data, im.size, "acc.gguf", &err);
    assert_non_null(f);
    uint32_t u = 99;
    assert_false(gguf_get_u32(f, "missing", &u, &err));
    assert_non_null(strstr(err.message, "missing key 'missing'"));
    assert_true(gguf_get_u32_opt(f, "missing", &u, &err));
    assert_int_equal(u, 99);
    assert_false(gguf_get_u32(f, "general.name", &u, &err));
    assert_non_null(strstr(err.message, "key 'general.name' is string, expected uint32"));
    assert_false(gguf_get_u32(f, "neg", &u, &err));
    assert_non_null(strstr(err.message, "value -5 does not fit uint32"));
    int32_t i = 0;
    assert_true(gguf_get_i32(f, "neg", &i, &err));
    assert_int_equal(i, -5);
    float x;
    assert_false(gguf_get_f32(f, "n", &x, &err));
    const gguf_kv *arr;
    assert_false(gguf_get_array(f, "n", GGUF_TYPE_COUNT, &arr, &err));
    assert_non_null(strstr(err.message, "expected an array"));
    gguf_close(f);
}

/* ---- writer ---- */

static char *temp_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/corral-test-%d-%s", (int)getpid(), name);
    return path;
}

static void test_gguf_writer_round_trips_every_value_type(void **state)
{
    (void)state;
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -123456;
    uint64_t u64 = 1ull << 50;
    int64_t i64 = -(1ll << 50);
    double f64 = 0.1;
    assert_true(gguf_writer_set_alignment(w, 64, &err));
    assert_true(gguf_writer_add_scalar(w, "t.u8", GGUF_TYPE_UINT8, &u8, &err));
    assert_true(gguf_writer_add_scalar(w, "t.i8", GGUF_TYPE_INT8, &i8, &err));
    assert_true(gguf_writer_add_scalar(w, "t.u16", GGUF_TYPE_UINT16, &u16, &err));
    assert_true(gguf_writer_add_scalar(w, "t.i16", GGUF_TYPE_INT16, &i16, &err));
    assert_true(gguf_writer_add_u32(w, "t.u32", 4000000000u, &err));
    assert_true(gguf_writer_add_scalar(w, "t.i32", GGUF_TYPE_INT32, &i32, &err));
    assert_true(gguf_writer_add_f32(w, "t.f32", 1.5f, &err));
    assert_true(gguf_writer_add_bool(w, "t.bool", true, &err));
    assert_true(gguf_writer_add_str(w, "t.str", "héllo", strlen("héllo"), &err));
    assert_true(gguf_writer_add_scalar(w, "t.u64", GGUF_TYPE_UINT64, &u64, &err));
    assert_true(gguf_writer_add_scalar(w, "t.i64", GGUF_TYPE_INT64, &i64, &err));
    assert_true(gguf_writer_add_scalar(w, "t.f64", GGUF_TYPE_FLOAT64, &f64, &err));
    float scores[3] = {-1.0f, 0.0f, 2.5f};
    assert_true(gguf_writer_add_array(w, "t.scores", GGUF_TYPE_FLOAT32, scores, 3, &err));
    gguf_str words[2] = {{"ab", 2}, {"", 0}};
    assert_true(gguf_writer_add_str_array(w, "t.words", words, 2, &err));
    assert_false(gguf_writer_add_u32(w, "t.u32", 1, &err));
    assert_non_null(strstr(err.message, "duplicate metadata key"));

    int64_t ne_a[2] = {32, 3}, ne_b[1] = {64};
    assert_true(gguf_writer_add_tensor(w, "a", TENSOR_TYPE_Q8_0, 2, ne_a, &err));
    assert_true(gguf_writer_add_tensor(w, "b", TENSOR_TYPE_F16, 1, ne_b, &err));
    const char *path = temp_path("roundtrip.gguf");
    assert_true(gguf_writer_begin(w, path, &err));
    uint8_t bytes_a[3 * 34], bytes_b[128];
    for (size_t i = 0; i < sizeof bytes_a; i++)
        bytes_a[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < sizeof bytes_b; i++)
        bytes_b[i] = (uint8_t)(i * 3);
    assert_true(gguf_writer_write_tensor(w, bytes_a, 50, &err)); /* in two pieces */
    assert_true(gguf_writer_write_tensor(w, bytes_a + 50, sizeof bytes_a - 50, &err));
    assert_true(gguf_writer_write_tensor(w, bytes_b, sizeof bytes_b, &err));
    assert_false(gguf_writer_write_tensor(w, bytes_b, 1, &err));
    assert_true(gguf_writer_finish(w, &err));
    gguf_writer_free(w);

    gguf_file *f = gguf_open(path, &err);
    if (!f)
        fail_msg("%s", err.message);
    assert_int_equal(gguf_alignment(f), 64);
    assert_int_equal(gguf_n_kv(f), 15);
    uint32_t u32;
    assert_true(gguf_get_u32(f, "t.u32", &u32, &err));
    assert_int_equal(u32, 4000000000u);
    assert_int_equal(gguf_kv_i64(gguf_find_kv(f, "t.i8"), 0), -100);
    assert_int_equal(gguf_kv_i64(gguf_find_kv(f, "t.i16"), 0), -30000);
    assert_int_equal(gguf_kv_u64(gguf_find_kv(f, "t.u16"), 0), 60000);
    assert_int_equal(gguf_kv_u64(gguf_find_kv(f, "t.u8"), 0), 200);
    assert_int_equal(gguf_kv_i64(gguf_find_kv(f, "t.i32"), 0), -123456);
    assert_int_equal(gguf_kv_u64(gguf_find_kv(f, "t.u64"), 0), 1ull << 50);
    assert_int_equal(gguf_kv_i64(gguf_find_kv(f, "t.i64"), 0), -(1ll << 50));
    assert_true(gguf_kv_f64(gguf_find_kv(f, "t.f64"), 0) == 0.1);
    float x;
    assert_true(gguf_get_f32(f, "t.f32", &x, &err));
    assert_true(x == 1.5f);
    bool b;
    assert_true(gguf_get_bool(f, "t.bool", &b, &err) && b);
    gguf_str s;
    assert_true(gguf_get_str(f, "t.str", &s, &err));
    assert_int_equal(s.size, strlen("héllo"));
    assert_memory_equal(s.data, "héllo", s.size);
    const gguf_kv *arr;
    assert_true(gguf_get_array(f, "t.scores", GGUF_TYPE_FLOAT32, &arr, &err));
    assert_int_equal(arr->n, 3);
    assert_true(gguf_kv_f32(arr, 2) == 2.5f);
    assert_true(gguf_get_array(f, "t.words", GGUF_TYPE_STRING, &arr, &err));
    assert_int_equal(gguf_kv_str(arr, 0).size, 2);
    assert_int_equal(gguf_kv_str(arr, 1).size, 0);
    const gguf_tensor *ta = gguf_find_tensor(f, "a"), *tb = gguf_find_tensor(f, "b");
    assert_non_null(ta);
    assert_non_null(tb);
    assert_int_equal(((uintptr_t)ta->data - (uintptr_t)gguf_tensor_at(f, 0)->data) % 64, 0);
    assert_memory_equal(ta->data, bytes_a, sizeof bytes_a);
    assert_memory_equal(tb->data, bytes_b, sizeof bytes_b);
    assert_int_equal(tb->offset, 128);
    gguf_close(f);
    unlink(path);
}

static void test_gguf_writer_unfinished_leaves_no_file(void **state)
{
    (void)state;
    corral_error err;
    const char *path = temp_path("unfinished.gguf");
    gguf_writer *w = gguf_writer_create();
    int64_t ne[1] = {32};
    assert_true(gguf_writer_add_tensor(w, "a", TENSOR_TYPE_F32, 1, ne, &err));
    assert_true(gguf_writer_begin(w, path, &err));
    float data[16] = {0};
    assert_true(gguf_writer_write_tensor(w, data, sizeof data, &err));
    assert_false(gguf_writer_finish(w, &err));
    assert_non_null(strstr(err.message, "0 of 1 tensors written"));
    gguf_writer_free(w);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    /* and no temporary file is left beside it */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s.tmp.* >/dev/null 2>&1", path);
    assert_int_not_equal(system(cmd), 0);
}

static void test_gguf_writer_rejects_bad_declarations(void **state)
{
    (void)state;
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    int64_t ne_bad[1] = {33}, ne_zero[2] = {32, 0};
    assert_false(gguf_writer_add_tensor(w, "a", TENSOR_TYPE_Q4_0, 1, ne_bad, &err));
    assert_false(gguf_writer_add_tensor(w, "b", TENSOR_TYPE_F32, 2, ne_zero, &err));
    assert_false(gguf_writer_set_alignment(w, 24, &err));
    assert_false(gguf_writer_add_u32(w, "", 1, &err));
    gguf_writer_free(w);
}

/* ---- fixtures ---- */

static const char *fixtures(void)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    return dir ? dir : "tests/fixtures";
}

static gguf_file *open_fixture(const char *name)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", fixtures(), name);
    corral_error err;
    gguf_file *f = gguf_open(path, &err);
    if (!f)
        fail_msg("%s", err.message);
    return f;
}

/* Key and tensor counts stated in the fixtures' READMEs. */
static void test_gguf_fixtures_have_readme_counts(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        size_t n_kv, n_tensors;
    } expected[] = {
        {"stories260K.gguf", 24, 47},
        {"tiny-tolstoy-f32.gguf", 27, 48},
        {"tiny-tolstoy-f16.gguf", 27, 48},
        {"vocab-llama-spm.gguf", 24, 0},
        {"vocab-llama3-bpe.gguf", 24, 0},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        gguf_file *f = open_fixture(expected[i].file);
        assert_int_equal(gguf_n_kv(f), expected[i].n_kv);
        assert_int_equal(gguf_n_tensors(f), expected[i].n_tensors);
        gguf_close(f);
    }
    gguf_file *f = open_fixture("vocab-llama3-bpe.gguf");
    const gguf_kv *merges;
    corral_error err;
    assert_true(gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, &err));
    assert_int_equal(merges->n, 280147);
    const gguf_kv *tokens;
    assert_true(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, &err));
    assert_int_equal(tokens->n, 128256);
    gguf_str eot = gguf_kv_str(tokens, 128009);
    assert_int_equal(eot.size, strlen("<|eot_id|>"));
    assert_memory_equal(eot.data, "<|eot_id|>", eot.size);
    gguf_close(f);
}

/* Every quant model: 16 2-D tensors of its type (Q4_K_M: 13 + 3 Q6_K) and 5 1-D F32. */
static void test_gguf_quant_fixtures_have_their_types(void **state)
{
    (void)state;
    static const char *const types[] = {"F16",  "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                                        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "quant/rand-e256-%s.gguf", types[i]);
        gguf_file *f = open_fixture(name);
        int type = tensor_type_from_name(types[i]);
        assert_true(type >= 0);
        size_t n_type = 0, n_f32 = 0;
        for (size_t t = 0; t < gguf_n_tensors(f); t++) {
            const gguf_tensor *tensor = gguf_tensor_at(f, t);
            n_type += tensor->type == (uint32_t)type;
            n_f32 += tensor->type == TENSOR_TYPE_F32;
        }
        assert_int_equal(n_type, 16);
        assert_int_equal(n_f32, 5);
        gguf_close(f);
    }
}

/* arch/NAME.json lists every key (arrays as "array[n]") and every tensor's ne. */
static void check_arch_fixture(const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/arch/%s.json", fixtures(), name);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        fail_msg("%s: %s", path, jerr.text);
    snprintf(path, sizeof path, "arch/%s.gguf", name);
    gguf_file *f = open_fixture(path);
    json_t *meta = json_object_get(root, "metadata");
    const char *key;
    json_t *value;
    size_t n_keys = 0;
    json_object_foreach(meta, key, value) {
        if (strcmp(key, "tensors") == 0)
            continue;
        n_keys++;
        const gguf_kv *kv = gguf_find_kv(f, key);
        if (!kv)
            fail_msg("%s: key %s missing", name, key);
        if (json_is_string(value) && kv->type == GGUF_TYPE_ARRAY) {
            char want[64];
            snprintf(want, sizeof want, "array[%llu]", (unsigned long long)kv->n);
            assert_string_equal(json_string_value(value), want);
        } else if (json_is_string(value)) {
            gguf_str s = gguf_kv_str(kv, 0);
            assert_int_equal(s.size, strlen(json_string_value(value)));
            assert_memory_equal(s.data, json_string_value(value), s.size);
        } else if (json_is_boolean(value)) {
            assert_int_equal(gguf_kv_bool(kv, 0), json_is_true(value));
        } else if (json_is_integer(value)) {
            assert_int_equal(gguf_kv_i64(kv, 0), json_integer_value(value));
        } else if (json_is_real(value)) {
            assert_true((float)gguf_kv_f64(kv, 0) == (float)json_real_value(value));
        }
    }
    assert_int_equal(gguf_n_kv(f), n_keys);
    json_t *tensors = json_object_get(meta, "tensors");
    assert_int_equal(gguf_n_tensors(f), json_object_size(tensors));
    json_object_foreach(tensors, key, value) {
        const gguf_tensor *t = gguf_find_tensor(f, key);
        if (!t)
            fail_msg("%s: tensor %s missing", name, key);
        for (size_t d = 0; d < json_array_size(value); d++)
            assert_int_equal(t->ne[d], json_integer_value(json_array_get(value, d)));
    }
    gguf_close(f);
    json_decref(root);
}

static void test_gguf_arch_fixtures_match_their_json(void **state)
{
    (void)state;
    static const char *const names[] = {"llama-gqa", "llama-tied", "qwen2", "qwen3", "gemma2",
                                        "gemma3",    "phi3",       "bert",  "nomic-bert",
                                        "starcoder2", "cohere2", "exaone4", "glm4"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        check_arch_fixture(names[i]);
}

/* The CLI prints the counts too. */
static void test_gguf_info_prints_keys_and_tensor_counts(void **state)
{
    (void)state;
    const char *bin = getenv("CORRAL_BIN");
    if (!bin)
        skip();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s gguf-info --tensors %s/tiny-tolstoy-f16.gguf", bin, fixtures());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[4096];
    bool saw_keys = false, saw_tensors = false, saw_arch = false, saw_row = false;
    while (fgets(line, sizeof line, p)) {
        saw_keys |= strcmp(line, "metadata: 27 keys\n") == 0;
        saw_tensors |= strncmp(line, "tensors: 48 (4492032 parameters; f32: 11 f16: 37)", 49) == 0;
        saw_arch |= strstr(line, "general.architecture: string = \"llama\"") != NULL;
        saw_row |= strstr(line, "output.weight") != NULL && strstr(line, "f16") != NULL;
    }
    assert_int_equal(pclose(p), 0);
    assert_true(saw_keys && saw_tensors && saw_arch && saw_row);

    snprintf(cmd, sizeof cmd, "%s gguf-info %s/tokenizer-cases.txt 2>&1", bin, fixtures());
    p = popen(cmd, "r");
    assert_non_null(fgets(line, sizeof line, p));
    assert_non_null(strstr(line, "not a GGUF file"));
    assert_int_not_equal(pclose(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_accepts_minimal_valid_file),
        cmocka_unit_test(test_gguf_rejects_empty_input),
        cmocka_unit_test(test_gguf_rejects_bad_magic),
        cmocka_unit_test(test_gguf_rejects_version_1),
        cmocka_unit_test(test_gguf_rejects_version_4),
        cmocka_unit_test(test_gguf_rejects_byte_swapped_version),
        cmocka_unit_test(test_gguf_rejects_truncated_header),
        cmocka_unit_test(test_gguf_rejects_huge_kv_count),
        cmocka_unit_test(test_gguf_rejects_kv_count_beyond_file),
        cmocka_unit_test(test_gguf_rejects_huge_tensor_count),
        cmocka_unit_test(test_gguf_rejects_tensor_count_beyond_file),
        cmocka_unit_test(test_gguf_rejects_key_length_past_end),
        cmocka_unit_test(test_gguf_rejects_empty_key),
        cmocka_unit_test(test_gguf_rejects_key_with_nul),
        cmocka_unit_test(test_gguf_rejects_overlong_key),
        cmocka_unit_test(test_gguf_rejects_duplicate_key),
        cmocka_unit_test(test_gguf_rejects_unknown_value_type),
        cmocka_unit_test(test_gguf_rejects_truncated_value),
        cmocka_unit_test(test_gguf_rejects_string_value_without_end),
        cmocka_unit_test(test_gguf_rejects_array_of_arrays),
        cmocka_unit_test(test_gguf_rejects_array_of_unknown_type),
        cmocka_unit_test(test_gguf_rejects_array_over_length_cap),
        cmocka_unit_test(test_gguf_rejects_array_past_end),
        cmocka_unit_test(test_gguf_rejects_string_array_past_end),
        cmocka_unit_test(test_gguf_rejects_alignment_of_wrong_type),
        cmocka_unit_test(test_gguf_rejects_alignment_not_power_of_two),
        cmocka_unit_test(test_gguf_rejects_zero_alignment),
        cmocka_unit_test(test_gguf_rejects_overlong_tensor_name),
        cmocka_unit_test(test_gguf_rejects_duplicate_tensor_name),
        cmocka_unit_test(test_gguf_rejects_five_dimensions),
        cmocka_unit_test(test_gguf_rejects_zero_dimension),
        cmocka_unit_test(test_gguf_rejects_negative_dimension),
        cmocka_unit_test(test_gguf_rejects_unknown_tensor_type),
        cmocka_unit_test(test_gguf_rejects_removed_tensor_type),
        cmocka_unit_test(test_gguf_rejects_row_not_whole_blocks),
        cmocka_unit_test(test_gguf_rejects_overflowing_shape),
        cmocka_unit_test(test_gguf_rejects_offset_not_following_previous),
        cmocka_unit_test(test_gguf_rejects_misaligned_offset),
        cmocka_unit_test(test_gguf_rejects_data_past_end),
        cmocka_unit_test(test_gguf_rejects_truncated_tensor_info),
        cmocka_unit_test(test_gguf_rejects_nonexistent_and_empty_paths),
        cmocka_unit_test(test_gguf_accessors_report_missing_and_wrong_type),
        cmocka_unit_test(test_gguf_writer_round_trips_every_value_type),
        cmocka_unit_test(test_gguf_writer_unfinished_leaves_no_file),
        cmocka_unit_test(test_gguf_writer_rejects_bad_declarations),
        cmocka_unit_test(test_gguf_fixtures_have_readme_counts),
        cmocka_unit_test(test_gguf_quant_fixtures_have_their_types),
        cmocka_unit_test(test_gguf_arch_fixtures_match_their_json),
        cmocka_unit_test(test_gguf_info_prints_keys_and_tensor_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
