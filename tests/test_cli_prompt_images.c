/*
 * Media paths in `corral run` prompts (src/cli/prompt_images.c): relative, absolute, "~/",
 * quoted and space-holding paths are attached as base64 and leave the prompt, .wav clips as
 * images are; a path naming no file stays; a file that is no image or WAV clip, or one too
 * many, is an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/prompt_images.h"

static char dir[] = "/tmp/corral-prompt-images-XXXXXX";
static const char png[] = "\x89PNG\r\n\x1a\nrest of a png";
static const char jpeg[] = "\xff\xd8\xff\xe0 a jpeg";
static const char webp[] = "RIFF\x10\0\0\0WEBPVP8 ";
static const char wav[] = "RIFF\x04\0\0\0WAVE";

static void write_file(const char *name, const char *bytes, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir) || chdir(dir) != 0)
        return -1;
    write_file("cat.png", png, sizeof png - 1);
    write_file("my photo.JPG", jpeg, sizeof jpeg - 1);
    write_file("b.webp", webp, sizeof webp - 1);
    write_file("notes.png", "just text", 9);
    write_file("clip.WAV", wav, sizeof wav - 1);
    write_file("fake.wav", "RIFF\x04\0\0\0AVI ", 12);
    setenv("HOME", dir, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {"cat.png", "my photo.JPG", "b.webp", "notes.png",
                                        "clip.WAV", "fake.wav"};
    char path[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    return rmdir(dir);
}

/* prompt → want_text with n_images images, the first of which is first (base64) */
static void expect(const char *prompt, const char *want_text, size_t n_images, const char *first)
{
    json_t *images = json_array();
    char *text = NULL;
    corral_error err = {{0}};
    if (!prompt_images_extract(prompt, &text, images, NULL, &err))
        fail_msg("\"%s\": %s", prompt, err.message);
    assert_string_equal(text, want_text);
    assert_int_equal(json_array_size(images), n_images);
    if (first)
        assert_string_equal(json_string_value(json_array_get(images, 0)), first);
    free(text);
    json_decref(images);
}

static void test_paths_are_attached_and_leave_the_prompt(void **state)
{
    (void)state;
    char prompt[512], want[512];
    expect("what is in ./cat.png?", "what is in ?", 1, "iVBORw0KGgpyZXN0IG9mIGEgcG5n");
    snprintf(prompt, sizeof prompt, "describe %s/my photo.JPG please", dir);
    expect(prompt, "describe  please", 1, NULL);
    snprintf(prompt, sizeof prompt, "describe %s/my\\ photo.JPG", dir);
    expect(prompt, "describe", 1, NULL);
    snprintf(prompt, sizeof prompt, "'%s/my photo.JPG' what is this", dir);
    expect(prompt, "what is this", 1, NULL);
    expect("compare ~/cat.png and ./b.webp", "compare  and", 2, NULL);
    expect("what is said in ./clip.WAV", "what is said in", 1, "UklGRgQAAABXQVZF");
    expect("\"./cat.png\"", "", 1, NULL);
    snprintf(want, sizeof want, "%s", "look at ./missing.png and ./cat.pngx or abc./cat.png");
    expect(want, want, 0, NULL); /* no file, no extension at a word's end, not a word's start */
    expect("no paths at all", "no paths at all", 0, NULL);
}

static void test_bad_images_are_errors(void **state)
{
    (void)state;
    json_t *images = json_array();
    char *text = NULL;
    corral_error err = {{0}};
    assert_false(prompt_images_extract("see ./notes.png", &text, images, NULL, &err));
    assert_non_null(strstr(err.message, "not a JPEG, PNG, WebP or WAV file"));
    /* a RIFF file that holds no WAVE is neither */
    assert_false(prompt_images_extract("hear ./fake.wav", &text, images, NULL, &err));
    assert_non_null(strstr(err.message, "couldn't process file"));
    char many[2048] = "";
    for (int i = 0; i <= PROMPT_IMAGE_MAX_COUNT; i++)
        strcat(many, "./cat.png ");
    assert_false(prompt_images_extract(many, &text, images, NULL, &err));
    assert_non_null(strstr(err.message, "at most 16 images"));
    json_decref(images);
}

/* The REPL's question for a line starting with "/": a path to an existing image, or not. */
static void test_a_line_may_start_with_an_image(void **state)
{
    (void)state;
    char line[512];
    snprintf(line, sizeof line, "%s/cat.png what is this?", dir);
    assert_true(prompt_images_starts_with_file(line));
    snprintf(line, sizeof line, "%s/my\\ photo.JPG", dir);
    assert_true(prompt_images_starts_with_file(line));
    snprintf(line, sizeof line, "%s/missing.png what is this?", dir);
    assert_false(prompt_images_starts_with_file(line));
    snprintf(line, sizeof line, "look at %s/cat.png", dir);
    assert_false(prompt_images_starts_with_file(line)); /* not the first word */
    assert_false(prompt_images_starts_with_file("/set system hi"));
    assert_false(prompt_images_starts_with_file("/tmp")); /* a directory, no extension */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_are_attached_and_leave_the_prompt),
        cmocka_unit_test(test_bad_images_are_errors),
        cmocka_unit_test(test_a_line_may_start_with_an_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
