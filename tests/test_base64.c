/*
 * Base64 encoding and data: URL decoding: the RFC 4648 test vectors, line breaks skipped, every kind
 * of malformed input refused with a message (bad letters, URL-safe letters, spaces, missing
 * or misplaced padding), the size cap applied before allocating, and data: URLs split into
 * media type and payload, remote URLs refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/base64.h"

static void expect_decodes(const char *text, const char *want)
{
    size_t len = 12345;
    corral_error err = {{0}};
    uint8_t *out = util_base64_decode(text, strlen(text), 1024, &len, &err);
    if (!out)
        fail_msg("\"%s\": %s", text, err.message);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);
    free(out);
}

static void expect_refused(const char *text, size_t max_bytes, const char *needle)
{
    size_t len;
    corral_error err = {{0}};
    uint8_t *out = util_base64_decode(text, strlen(text), max_bytes, &len, &err);
    if (out)
        fail_msg("\"%s\" decoded, expected \"%s\"", text, needle);
    if (!strstr(err.message, needle))
        fail_msg("\"%s\": error \"%s\" does not say \"%s\"", text, err.message, needle);
}

static void test_rfc4648_vectors(void **state)
{
    (void)state;
    expect_decodes("", "");
    expect_decodes("Zg==", "f");
    expect_decodes("Zm8=", "fo");
    expect_decodes("Zm9v", "foo");
    expect_decodes("Zm9vYg==", "foob");
    expect_decodes("Zm9vYmE=", "fooba");
    expect_decodes("Zm9vYmFy", "foobar");
    expect_decodes("Zm9v\r\nYmFy\n", "foobar"); /* MIME line breaks */
    expect_decodes("+/+/", "\xfb\xff\xbf");
    /* every byte value survives */
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    static const char *alphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char text[400];
    size_t t = 0;
    for (int i = 0; i < 256; i += 3) {
        uint32_t v = (uint32_t)all[i] << 16 | (i + 1 < 256 ? (uint32_t)all[i + 1] << 8 : 0) |
                     (i + 2 < 256 ? all[i + 2] : 0);
        text[t++] = alphabet[v >> 18 & 63];
        text[t++] = alphabet[v >> 12 & 63];
        text[t++] = i + 1 < 256 ? alphabet[v >> 6 & 63] : '=';
        text[t++] = i + 2 < 256 ? alphabet[v & 63] : '=';
    }
    size_t len;
    corral_error err;
    uint8_t *out = util_base64_decode(text, t, 256, &len, &err);
    assert_non_null(out);
    assert_int_equal(len, 256);
    assert_memory_equal(out, all, 256);
    free(out);
}

/* Encoding: the RFC 4648 vectors, and every byte value back through the decoder. */
static void test_encode_round_trips(void **state)
{
    (void)state;
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        char *text = util_base64_encode((const uint8_t *)plain[i], strlen(plain[i]));
        assert_non_null(text);
        assert_string_equal(text, coded[i]);
        free(text);
    }
    uint8_t all[257];
    for (int i = 0; i < 257; i++)
        all[i] = (uint8_t)(i * 7);
    for (size_t n = 254; n <= 257; n++) {
        char *text = util_base64_encode(all, n);
        size_t len;
        corral_error err;
        uint8_t *back = util_base64_decode(text, strlen(text), 1024, &len, &err);
        assert_non_null(back);
        assert_int_equal(len, n);
        assert_memory_equal(back, all, n);
        free(back);
        free(text);
    }
}

static void test_malformed_refused(void **state)
{
    (void)state;
    expect_refused("Zm9", 1024, "not a padded multiple of 4");
    expect_refused("Zg", 1024, "not a padded multiple of 4"); /* padding left out */
    expect_refused("Zm9v YmFy", 1024, "character 0x20 at offset 4");
    expect_refused("Zm9v\tYmFy", 1024, "character 0x09");
    expect_refused("Zm-_", 1024, "character 0x2d"); /* URL-safe alphabet */
    expect_refused("Zg==Zm9v", 1024, "data after '=' padding");
    expect_refused("Z=g=", 1024, "data after '=' padding");
    expect_refused("Z===", 1024, "too much padding");
    expect_refused("====", 1024, "too much padding");
    expect_refused("Zm9v\xc3\xa9", 1024, "character 0xc3");
    expect_refused("Zm9v", 2, "decoded data larger than 2 bytes");
    /* a huge claimed size is refused from the count, not by allocating it */
    size_t n = 64u << 20;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'A', n);
    size_t len;
    corral_error err = {{0}};
    assert_null(util_base64_decode(big, n, 1u << 20, &len, &err));
    assert_non_null(strstr(err.message, "larger than 1048576 bytes"));
    free(big);
}

static void test_data_urls(void **state)
{
    (void)state;
    char mime[64];
    size_t len;
    corral_error err = {{0}};
    const char *url = "data:image/PNG;base64,Zm9vYmFy";
    uint8_t *out = util_data_url_decode(url, strlen(url), 1024, mime, sizeof mime, &len, &err);
    assert_non_null(out);
    assert_string_equal(mime, "image/png");
    assert_int_equal(len, 6);
    assert_memory_equal(out, "foobar", 6);
    free(out);
    url = "DATA:image/jpeg;name=x.jpg;base64,Zg==";
    out = util_data_url_decode(url, strlen(url), 1024, mime, sizeof mime, &len, &err);
    assert_non_null(out);
    assert_string_equal(mime, "image/jpeg");
    free(out);
    url = "data:;base64,";
    out = util_data_url_decode(url, strlen(url), 1024, mime, sizeof mime, &len, &err);
    assert_non_null(out);
    assert_string_equal(mime, "");
    assert_int_equal(len, 0);
    free(out);

    static const struct {
        const char *url;
        const char *needle;
    } bad[] = {
        {"https://example.com/cat.png", "only data: URLs are accepted"},
        {"file:///etc/passwd", "only data: URLs are accepted"},
        {"data:image/png,rawbytes", "not base64-encoded"},
        {"data:image/png;base64", "no ','"},
        {"data:image/png;base64,Zm9v!", "character 0x21"},
        {"data:image/p\"ng;base64,Zm9v", "invalid character"},
        {"data:", "no ','"},
        {"", "only data: URLs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err.message[0] = '\0';
        out = util_data_url_decode(bad[i].url, strlen(bad[i].url), 1024, mime, sizeof mime,
                                   &len, &err);
        if (out)
            fail_msg("%s decoded", bad[i].url);
        if (!strstr(err.message, bad[i].needle))
            fail_msg("%s: \"%s\" does not say \"%s\"", bad[i].url, err.message, bad[i].needle);
    }
    char tiny[4];
    url = "data:image/png;base64,Zm9v";
    assert_null(util_data_url_decode(url, strlen(url), 1024, tiny, sizeof tiny, &len, &err));
    assert_non_null(strstr(err.message, "media type is too long"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc4648_vectors),
        cmocka_unit_test(test_encode_round_trips),
        cmocka_unit_test(test_malformed_refused),
        cmocka_unit_test(test_data_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
