/*
 * multipart/form-data bodies (server/http/multipart.c): a form as the OpenAI and ollama
 * clients write it reads into its fields, a file's bytes intact (CRLFs and a near-boundary
 * inside it included); the boundary comes plain or quoted; preamble and epilogue are
 * skipped; every malformed or oversized body is refused with a message saying why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/multipart.h"

#define TYPE "multipart/form-data; boundary=XyZ"

static multipart_form form;

static bool parse(const char *content_type, const char *body, size_t len, char *message)
{
    return multipart_parse(content_type, body, len, &form, message, 256);
}

static void test_reads_a_form(void **state)
{
    (void)state;
    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"model\"\r\n"
        "\r\n"
        "gemma4:e2b\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"clip \\\"one\\\".wav\"\r\n"
        "Content-Type: audio/wav\r\n"
        "\r\n"
        "RIFF\r\n--XyZx\0\r\n\r\n"
        "--XyZ\r\n"
        "content-disposition:form-data;name=empty\r\n"
        "\r\n"
        "\r\n"
        "--XyZ--\r\n";
    char message[256] = "";
    assert_true(parse(TYPE, body, sizeof body - 1, message));
    assert_int_equal(form.n_parts, 3);
    const multipart_part *model = multipart_field(&form, "model");
    assert_non_null(model);
    assert_false(model->is_file);
    assert_int_equal(model->len, 10);
    assert_memory_equal(model->data, "gemma4:e2b", 10);
    const multipart_part *file = multipart_field(&form, "file");
    assert_non_null(file);
    assert_true(file->is_file);
    assert_string_equal(file->filename, "clip \"one\".wav");
    assert_string_equal(file->content_type, "audio/wav");
    assert_int_equal(file->len, 15);
    assert_memory_equal(file->data, "RIFF\r\n--XyZx\0\r\n", 15);
    const multipart_part *empty = multipart_field(&form, "empty");
    assert_non_null(empty);
    assert_int_equal(empty->len, 0);
    assert_null(multipart_field(&form, "prompt"));
}

/* A quoted boundary (with characters a token may not hold), a preamble, spaces after a
 * boundary, and an epilogue. */
static void test_quoted_boundary_and_preamble(void **state)
{
    (void)state;
    static const char body[] =
        "a preamble\r\n"
        "--a b:c \t\r\n"
        "Content-Disposition: form-data; name=\"x\"\r\n"
        "\r\n"
        "1\r\n"
        "--a b:c--\r\n"
        "an epilogue";
    char message[256] = "";
    assert_true(parse("Multipart/Form-Data ; charset=utf-8; boundary=\"a b:c\"", body,
                      sizeof body - 1, message));
    assert_int_equal(form.n_parts, 1);
    assert_int_equal(form.parts[0].len, 1);
    assert_memory_equal(form.parts[0].data, "1", 1);
}

static void test_refusals(void **state)
{
    (void)state;
    static const char one_part[] = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"
                                   "1\r\n--XyZ--\r\n";
    char long_boundary[160];
    snprintf(long_boundary, sizeof long_boundary, "multipart/form-data; boundary=%071d", 0);
    static const struct {
        const char *content_type; /* NULL: none sent */
        const char *body;
        const char *why;
    } cases[] = {
        {NULL, one_part, "Content-Type isn't multipart/form-data"},
        {"application/json", one_part, "Content-Type isn't multipart/form-data"},
        {"multipart/form-data", one_part, "no multipart boundary"},
        {"multipart/form-data; boundary=", one_part, "1 to 70 characters"},
        {"multipart/form-data; boundary=\"XyZ", one_part, "not closed"},
        {"multipart/form-data; boundary", one_part, "not name=value"},
        {"multipart/form-data, boundary=XyZ", one_part, "isn't multipart/form-data"},
        {TYPE, "no boundary here", "no boundary line"},
        {TYPE, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n",
         "ends before its closing boundary"},
        {TYPE, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--XyZ-",
         "ends before its closing boundary"},
        {TYPE, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n1\r\n--XyZ--",
         "not ended by a blank line"},
        {TYPE, "--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\n1\r\n--XyZ--",
         "not form-data"},
        {TYPE, "--XyZ\r\nContent-Type: text/plain\r\n\r\n1\r\n--XyZ--",
         "part 0 has no Content-Disposition"},
        {TYPE, "--XyZ\r\n\r\n1\r\n--XyZ--", "part 0 has no Content-Disposition"},
        {TYPE, "--XyZ\r\nno colon\r\n\r\n1\r\n--XyZ--", "not Name: value"},
        {TYPE, "--XyZ\r\nX-A\x01: b\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n"
               "--XyZ--", "control character"},
        {TYPE, "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\n1\r\n--XyZ--",
         "not closed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char message[256] = "";
        assert_false(parse(cases[i].content_type, cases[i].body, strlen(cases[i].body),
                           message));
        if (!strstr(message, cases[i].why) ||
            strncmp(message, "failed to parse multipart form: ", 32) != 0)
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, message, cases[i].why);
    }
    char message[256] = "";
    assert_false(parse(long_boundary, one_part, strlen(one_part), message));
    assert_non_null(strstr(message, "1 to 70 characters"));
    assert_false(parse(TYPE, NULL, 0, message));
    assert_non_null(strstr(message, "missing request body"));
}

/* More parts than the cap, a header block past its cap, a name past its cap. */
static void test_bounds(void **state)
{
    (void)state;
    static const char part[] = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n";
    size_t cap = (MULTIPART_MAX_PARTS + 2) * sizeof part + MULTIPART_MAX_HEADER_BYTES + 512;
    char *body = malloc(cap);
    assert_non_null(body);
    char message[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < MULTIPART_MAX_PARTS; i++)
        len += (size_t)sprintf(body + len, "%s", part);
    strcpy(body + len, "--XyZ--");
    assert_true(parse(TYPE, body, strlen(body), message));
    assert_int_equal(form.n_parts, MULTIPART_MAX_PARTS);
    len += (size_t)sprintf(body + len, "%s--XyZ--", part);
    assert_false(parse(TYPE, body, len, message));
    assert_non_null(strstr(message, "more than 32 parts"));

    len = (size_t)sprintf(body, "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nX-Pad: ");
    memset(body + len, 'p', MULTIPART_MAX_HEADER_BYTES);
    len += MULTIPART_MAX_HEADER_BYTES;
    len += (size_t)sprintf(body + len, "\r\n\r\n1\r\n--XyZ--");
    assert_false(parse(TYPE, body, len, message));
    assert_non_null(strstr(message, "within 8192 bytes"));

    len = (size_t)sprintf(body, "--XyZ\r\nContent-Disposition: form-data; name=\"");
    memset(body + len, 'n', MULTIPART_MAX_NAME);
    len += MULTIPART_MAX_NAME;
    len += (size_t)sprintf(body + len, "\"\r\n\r\n1\r\n--XyZ--");
    assert_false(parse(TYPE, body, len, message));
    assert_non_null(strstr(message, "longer than 255 bytes"));
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_a_form),
        cmocka_unit_test(test_quoted_boundary_and_preamble),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
