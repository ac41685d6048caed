/*
 * Images placed in a prompt (server/core/image_input.c) and kept whole by the runner's prefix
 * reuse (runner/prompt_images.c): [img] places an image, the rest go in front; markers from
 * a client's text (another nonce, a number out of range) stay text; a marker a template
 * renders twice places its image once; one a template drops leaves its image out; bad base64
 * and non-images are refused with a message naming the image; audio (WAV, MP3, FLAC, Ogg
 * signatures) travels with the images and is counted; an image in a system or
 * developer message is found for the renderers that refuse one; a reused prefix never ends
 * inside an image's tokens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/prompt_images.h"
#include "server/core/image_input.h"
#include "audio/audio.h"
#include "util/base64.h"

/* A 1 x 1 RGB PNG. */
#define PIXEL "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

static chat_request *request_with_images(const char *content, size_t n)
{
    chat_request *req = chat_request_create(true);
    assert_non_null(req);
    assert_true(chat_request_add_text(req, "user", content, strlen(content)));
    for (size_t i = 0; i < n; i++)
        assert_true(chat_message_add_image(&req->messages[0], PIXEL, strlen(PIXEL)));
    return req;
}

/* The template input's first message content after marking, with its markers as <N>. */
static void marked_content(const image_input *in, const chat_request *req, bool spaced,
                           char *out, size_t size)
{
    json_t *input = chat_request_template_input(req);
    assert_non_null(input);
    assert_true(image_input_mark(in, req, input, spaced));
    json_t *m = json_array_get(json_object_get(input, "messages"), 0);
    assert_null(json_object_get(m, "images")); /* the templates must not tag them again */
    const char *text = json_string_value(json_object_get(m, "content"));
    char prefix[40];
    snprintf(prefix, sizeof prefix, "<corral-image-%s-", in->nonce);
    size_t len = 0;
    for (const char *p = text; *p && len + 1 < size;) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            p += strlen(prefix);
            out[len++] = '<';
            while (*p != '>')
                out[len++] = *p++;
        }
        out[len++] = *p++;
    }
    out[len] = '\0';
    json_decref(input);
}

static void test_placement(void **state)
{
    (void)state;
    char message[256], text[256];
    image_input in;
    chat_request *req = request_with_images("see [img] and", 3);
    assert_true(image_input_prepare(&in, req, true, message, sizeof message));
    assert_int_equal(in.n_images, 3);
    assert_int_equal(strlen(in.nonce), 16);
    marked_content(&in, req, false, text, sizeof text);
    assert_string_equal(text, "<1><2>see <0> and");
    image_input_clear(&in);
    chat_request_free(req);
}

/* For a renderer that sets media apart (corral_renderer.spaced_media), markers in front of
 * text that starts with a character other than white space are followed by a space, as
 * ollama's renderers write their image tags; placed markers, empty text and text that
 * starts with white space (Unicode's, as Go reads it) get none. */
static void test_spaced_placement(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"see [img] and", "<1><2> see <0> and"},
        {"describe this", "<0><1><2> describe this"},
        {"\u00e9t\u00e9", "<0><1><2> \u00e9t\u00e9"},
        {"[img][img][img] x", "<0><1><2> x"},
        {"", "<0><1><2>"},
        {" hi", "<0><1><2> hi"},
        {"\nhi", "<0><1><2>\nhi"},
        {"\u00a0hi", "<0><1><2>\u00a0hi"},
        {"\u3000hi", "<0><1><2>\u3000hi"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char message[256], text[256];
        image_input in;
        chat_request *req = request_with_images(cases[i][0], 3);
        assert_true(image_input_prepare(&in, req, true, message, sizeof message));
        marked_content(&in, req, true, text, sizeof text);
        assert_string_equal(text, cases[i][1]);
        image_input_clear(&in);
        chat_request_free(req);
    }
}

static void test_extract(void **state)
{
    (void)state;
    char message[256];
    image_input in;
    chat_request *req = request_with_images("x", 2);
    assert_true(image_input_prepare(&in, req, true, message, sizeof message));
    char prompt[512];
    /* image 1 first, image 0 twice, a forged marker of another nonce and one out of range */
    snprintf(prompt, sizeof prompt,
             "A<corral-image-%s-1>B<corral-image-0123456789abcdef-0>C<corral-image-%s-0>D"
             "<corral-image-%s-0>E<corral-image-%s-7>F",
             in.nonce, in.nonce, in.nonce, in.nonce);
    json_t *images = image_input_extract(&in, prompt);
    assert_non_null(images);
    char want[256];
    snprintf(want, sizeof want, "AB<corral-image-0123456789abcdef-0>CDE<corral-image-%s-7>F",
             in.nonce);
    assert_string_equal(prompt, want);
    assert_int_equal(json_array_size(images), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(images, 0), "at")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(images, 1), "at")),
                     strlen("AB<corral-image-0123456789abcdef-0>C"));
    assert_string_equal(json_string_value(json_object_get(json_array_get(images, 0), "data")),
                        PIXEL);
    json_decref(images);
    /* a template that renders none of them: no image goes */
    strcpy(prompt, "plain");
    images = image_input_extract(&in, prompt);
    assert_int_equal(json_array_size(images), 0);
    json_decref(images);
    image_input_clear(&in);
    chat_request_free(req);
}

static void test_refusals(void **state)
{
    (void)state;
    char message[256];
    image_input in;
    chat_request *req = request_with_images("x", 1);
    assert_true(chat_message_add_image(&req->messages[0], "%%%", 3));
    assert_false(image_input_prepare(&in, req, true, message, sizeof message));
    assert_non_null(strstr(message, "image 1: invalid image data"));
    chat_request_free(req);
    req = request_with_images("x", 0);
    assert_true(chat_message_add_image(&req->messages[0], "aGVsbG8=", 8)); /* "hello" */
    assert_false(image_input_prepare(&in, req, true, message, sizeof message));
    assert_non_null(strstr(message, "image 0: "));
    chat_request_free(req);
}

/* The base64 of len bytes starting with head (the rest zeros). */
static char *media_base64(const char *head, size_t head_len, size_t len)
{
    uint8_t *bytes = calloc(1, len);
    assert_non_null(bytes);
    memcpy(bytes, head, head_len);
    char *text = util_base64_encode(bytes, len);
    assert_non_null(text);
    free(bytes);
    return text;
}

/* Audio travels with the images: each container's signature counts as audio and is not
 * decoded as a picture; bytes that merely start with an MPEG sync pattern whose fields are
 * reserved are no audio (and no image either); audio past the audio cap is refused. */
static void test_audio_items(void **state)
{
    (void)state;
    static const struct {
        const char *head;
        size_t head_len;
        audio_container format;
    } cases[] = {
        {"RIFF\x24\0\0\0WAVEfmt ", 16, AUDIO_WAV},
        {"ID3\x04\0\0\0\0\0\0", 10, AUDIO_MP3},
        {"\xff\xfb\x90\x64", 4, AUDIO_MP3},  /* MPEG-1 layer III, 128 kbit/s, 44.1 kHz */
        {"fLaC\0\0\0\x22", 8, AUDIO_FLAC},
        {"OggS\0\x02", 6, AUDIO_OGG},
        {"\xff\xe9\x90\x64", 4, AUDIO_NOT_AUDIO}, /* version bits 01: reserved */
        {"\xff\xf9\x90\x64", 4, AUDIO_NOT_AUDIO}, /* layer bits 00: reserved */
        {"\xff\xfb\xf0\x64", 4, AUDIO_NOT_AUDIO}, /* bitrate index 15: invalid */
        {"\xff\xd8\xff\xe0", 4, AUDIO_NOT_AUDIO}, /* a JPEG's start */
        {"RIFF\0\0\0\0WEBP", 12, AUDIO_NOT_AUDIO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t bytes[64] = {0};
        memcpy(bytes, cases[i].head, cases[i].head_len);
        assert_int_equal(audio_sniff(bytes, sizeof bytes), cases[i].format);
    }
    assert_int_equal(audio_sniff((const uint8_t *)"RIFF", 4), AUDIO_NOT_AUDIO); /* no WAVE */

    char message[256];
    image_input in;
    chat_request *req = request_with_images("x", 1);
    char *wav = media_base64("RIFF\x24\0\0\0WAVE", 12, 64);
    char *mp3 = media_base64("ID3\x04", 4, 64);
    assert_true(chat_message_add_image(&req->messages[0], wav, strlen(wav)));
    assert_true(chat_message_add_image(&req->messages[0], mp3, strlen(mp3)));
    assert_true(image_input_prepare(&in, req, true, message, sizeof message));
    assert_int_equal(in.n_images, 3);
    assert_int_equal(in.n_audio, 2);
    image_input_clear(&in);
    chat_request_free(req);
    free(wav);
    free(mp3);

    /* Ogg is audio the runner would refuse: refused here, before a runner is asked */
    req = request_with_images("x", 0);
    char *ogg = media_base64("OggS\0\x02", 6, 64);
    assert_true(chat_message_add_image(&req->messages[0], ogg, strlen(ogg)));
    assert_false(image_input_prepare(&in, req, true, message, sizeof message));
    assert_non_null(strstr(message, "image 0: Ogg audio is not supported"));
    chat_request_free(req);
    free(ogg);

    req = request_with_images("x", 0);
    char *fake = media_base64("\xff\xe9\x90\x64", 4, 64);
    assert_true(chat_message_add_image(&req->messages[0], fake, strlen(fake)));
    assert_false(image_input_prepare(&in, req, true, message, sizeof message));
    assert_non_null(strstr(message, "image 0: unsupported image format"));
    /* for a model without a projector the bytes are not decoded: it refuses every image,
     * in ollama's words, whatever they hold */
    assert_true(image_input_prepare(&in, req, false, message, sizeof message));
    assert_int_equal(in.n_images, 1);
    assert_int_equal(in.n_audio, 0);
    image_input_clear(&in);
    chat_request_free(req);
    free(fake);

    /* an image is held to the image cap, under the larger audio one: "\x89PNG\0\0" then
     * zeros, written as base64 at once */
    req = request_with_images("x", 0);
    size_t groups = IMAGE_INPUT_MAX_BYTES / 3 + 1;
    char *big = malloc(4 * groups + 1);
    assert_non_null(big);
    memcpy(big, "iVBORwAA", 8);
    memset(big + 8, 'A', 4 * groups - 8);
    big[4 * groups] = '\0';
    assert_true(chat_message_add_image(&req->messages[0], big, 4 * groups));
    assert_false(image_input_prepare(&in, req, true, message, sizeof message));
    assert_non_null(strstr(message, "image 0: invalid image data: decoded data larger than"));
    chat_request_free(req);
    free(big);
}

/* A system or developer message with an image is named, for the renderers that refuse one
 * (ollama's words); a user's image is not. */
static void test_system_images(void **state)
{
    (void)state;
    char message[256] = "";
    static const char *const roles[] = {"system", "developer"};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        chat_request *req = request_with_images("look", 1);
        assert_true(chat_request_add_text(req, roles[i], "s", 1));
        assert_false(image_input_in_system(req, message, sizeof message));
        chat_message *m = &req->messages[req->n_messages - 1];
        assert_true(chat_message_add_image(m, PIXEL, strlen(PIXEL)));
        assert_true(image_input_in_system(req, message, sizeof message));
        char want[64];
        snprintf(want, sizeof want, "%s message cannot contain images", roles[i]);
        assert_string_equal(message, want);
        chat_request_free(req);
    }
}

static void test_safe_prefix(void **state)
{
    (void)state;
    prompt_image images[2] = {{.at = 4, .embd = {.n_tokens = 16}}, {.at = 30, .embd = {.n_tokens = 9}}};
    assert_int_equal(prompt_images_safe_prefix(images, 2, 3), 3);
    assert_int_equal(prompt_images_safe_prefix(images, 2, 4), 4);   /* before the image */
    assert_int_equal(prompt_images_safe_prefix(images, 2, 5), 4);   /* inside: cut back */
    assert_int_equal(prompt_images_safe_prefix(images, 2, 19), 4);
    assert_int_equal(prompt_images_safe_prefix(images, 2, 20), 20); /* right after it */
    assert_int_equal(prompt_images_safe_prefix(images, 2, 38), 30);
    assert_int_equal(prompt_images_safe_prefix(images, 2, 39), 39);
    assert_true(prompt_is_image_id(-1) && !prompt_is_image_id(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement), cmocka_unit_test(test_spaced_placement),
        cmocka_unit_test(test_extract),
        cmocka_unit_test(test_refusals), cmocka_unit_test(test_audio_items),
        cmocka_unit_test(test_system_images),
        cmocka_unit_test(test_safe_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
