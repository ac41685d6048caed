/*
 * `corral runner --mmproj` over its socket with the tiny qwen2.5-vl fixture: an image at a
 * byte offset of the prompt gives the reference's prompt tokens and 16 greedy ids; the same
 * image again is neither encoded nor evaluated again (the slot's cache holds its pseudo-ids),
 * a next turn evaluates only its new text, another image at the same place is evaluated from
 * the image on; bad images and offsets are errors with a 400 status (the request's fault),
 * and a runner without a projector refuses images; `count` gives a completion's numbers without encoding; an image longer than the
 * batch answers as with a large one; two images are never taken for each other. Audio clips
 * (WAV here) are refused by a model without an audio tower; a gemma4 file carrying one (the
 * tiny text model and tests/fixtures/audio's tower joined into ollama's single-file layout)
 * answers with the clip's tokens where it stands, takes the same clip again from its cache
 * and KV cells, counts it without encoding, and refuses images, which it has no tower for;
 * a clip over 30 seconds counts and answers in 30-second segments, one over ten minutes is
 * refused, and the cache keeps no more than its room; a request whose connection closes while
 * its clip encodes leaves nothing in the cache, and the next request encodes it; with a tower
 * that does not load, text still answers and a clip's refusal says why.
 */
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "audio_model_fixture.h"
#include "runner_fixture.h"
#include "util/base64.h"
#include "util/file.h"

static char socket_path[108];
static pid_t runner_pid;

/* Send request (consumed) on a new connection; the connection. */
static int send_request(json_t *req)
{
    char *line = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    int fd = runner_fixture_connect(socket_path);
    assert_true(fd >= 0);
    size_t n = strlen(line);
    for (size_t sent = 0; sent < n;) {
        ssize_t w = send(fd, line + sent, n - sent, MSG_NOSIGNAL);
        assert_true(w > 0);
        sent += (size_t)w;
    }
    assert_int_equal(send(fd, "\n", 1, MSG_NOSIGNAL), 1);
    free(line);
    return fd;
}

/* Send request (consumed) and answer its last line. */
static json_t *request(json_t *req)
{
    int fd = send_request(req);
    static char buf[1 << 20];
    size_t got = 0;
    ssize_t r;
    while ((r = recv(fd, buf + got, sizeof buf - got - 1, 0)) > 0)
        got += (size_t)r;
    close(fd);
    buf[got] = '\0';
    assert_true(got > 0 && buf[got - 1] == '\n');
    buf[got - 1] = '\0';
    char *last = strrchr(buf, '\n');
    json_t *answer = json_loads(last ? last + 1 : buf, 0, NULL);
    assert_non_null(answer);
    return answer;
}

static char *fixture_base64(const char *name)
{
    char path[2048];
    corral_error err;
    size_t len;
    snprintf(path, sizeof path, "%s/vision/%s", getenv("CORRAL_FIXTURES"), name);
    char *data = util_read_file(path, 1 << 20, &len, &err);
    assert_non_null(data);
    char *text = util_base64_encode((const uint8_t *)data, len);
    free(data);
    return text;
}

/* A runner of the fixture family ("qwen25vl", "gemma3") with batch (text) tokens per batch. */
static int spawn_family(const char *family, bool mmproj, const char *batch)
{
    static int n_started;
    const char *bin = getenv("CORRAL_BIN"), *fixtures = getenv("CORRAL_FIXTURES");
    if (!bin || !fixtures)
        return -1;
    snprintf(socket_path, sizeof socket_path, "/tmp/corral-test-runner-vision-%d-%d.sock",
             (int)getpid(), n_started++);
    char model[2048], projector[2048];
    snprintf(model, sizeof model, "%s/vision/%s-text.gguf", fixtures, family);
    snprintf(projector, sizeof projector, "%s/vision/%s-mmproj.gguf", fixtures, family);
    const char *const argv[] = {bin, "runner", "--model", model, "--socket", socket_path,
                                "--ctx", "512", "--parallel", "2", "--threads", "1",
                                "--batch", batch, mmproj ? "--mmproj" : NULL, projector, NULL};
    return runner_fixture_start(argv, socket_path, &runner_pid) ? 0 : -1;
}

static int spawn(bool mmproj)
{
    return spawn_family("qwen25vl", mmproj, "512");
}

static int stop(void)
{
    return runner_fixture_stop(runner_pid);
}

static int start_with_projector(void **state)
{
    (void)state;
    return spawn(true);
}

static int stop_runner(void **state)
{
    (void)state;
    return stop();
}

#define USER "<|im_start|>user\n"
#define QWEN_PROMPT USER "Describe.<|im_end|>\n<|im_start|>assistant\n"

/* A greedy completion of prompt with image (base64) at byte offset at. */
static json_t *complete(const char *prompt, const char *image, size_t at, int num_predict)
{
    return request(json_pack("{s:s, s:s, s:[{s:s, s:I}], s:{s:i, s:i}}", "op", "completion",
                             "prompt", prompt, "images", "data", image, "at", (json_int_t)at,
                             "options", "temperature", 0, "num_predict", num_predict));
}

static json_int_t field(const json_t *answer, const char *key)
{
    const json_t *v = json_object_get(answer, key);
    if (!json_is_integer(v))
        fail_msg("no %s in %s", key, json_dumps(answer, 0));
    return json_integer_value(v);
}

static void test_reference_ids_then_the_cache(void **state)
{
    (void)state;
    static const json_int_t greedy[16] = {58, 19, 230, 175, 46, 167, 137, 199,
                                          268, 191, 65, 214, 76, 27, 161, 191};
    char *square = fixture_base64("square.png"), *wide = fixture_base64("wide.png");
    json_t *a = complete(QWEN_PROMPT, square, strlen(USER), 16);
    assert_int_equal(field(a, "prompt_eval_count"), 34);
    assert_int_equal(field(a, "image_tokens"), 9);
    assert_int_equal(field(a, "images_encoded"), 1);
    json_t *tokens = json_object_get(a, "tokens");
    assert_int_equal(json_array_size(tokens), 25 + 16); /* the image's ids left out */
    for (size_t i = 0; i < 16; i++)
        assert_int_equal(json_integer_value(json_array_get(tokens, 25 + i)), greedy[i]);
    json_decref(a);

    /* the same again: the image from the cache, its cells reused, only the last token */
    a = complete(QWEN_PROMPT, square, strlen(USER), 4);
    assert_int_equal(field(a, "prompt_eval_count"), 1);
    assert_int_equal(field(a, "images_encoded"), 0);
    json_decref(a);

    /* a next turn: only what follows the first prompt is evaluated */
    const char *next = QWEN_PROMPT "Sure.<|im_end|>\n" USER "More.<|im_end|>\n<|im_start|>assistant\n";
    a = complete(next, square, strlen(USER), 4);
    json_int_t n_next = field(a, "prompt_eval_count");
    assert_true(n_next > 1 && n_next < 30);
    assert_int_equal(field(a, "images_encoded"), 0);
    json_decref(a);

    /* another image in the same place: from the image on (6 text tokens before it kept) */
    a = complete(QWEN_PROMPT, wide, strlen(USER), 4);
    assert_int_equal(field(a, "prompt_eval_count"), 34 - 9 + 18 - 6);
    assert_int_equal(field(a, "image_tokens"), 18);
    assert_int_equal(field(a, "images_encoded"), 1);
    json_decref(a);
    free(square);
    free(wide);
}

/* A refusal of the request's own (protocol.h): an error naming why, with the 400 status. */
static void assert_refused(json_t *answer, const char *why)
{
    const char *error = json_string_value(json_object_get(answer, "error"));
    if (!error || !strstr(error, why) || field(answer, "status") != 400)
        fail_msg("not a 400 naming %s: %s", why, json_dumps(answer, 0));
    json_decref(answer);
}

/* Each bad image is refused as the request's fault, by count as by completion. */
static void test_bad_images(void **state)
{
    (void)state;
    char *square = fixture_base64("square.png");
    static const struct {
        const char *data; /* NULL: the square image */
        size_t at;
        const char *why;
    } cases[] = {
        {"!!!", 0, "base64"},
        {"aGVsbG8=", 0, "image format"}, /* "hello" */
        {NULL, sizeof QWEN_PROMPT, "offset"}, /* past the end */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *data = cases[i].data ? cases[i].data : square;
        assert_refused(complete(QWEN_PROMPT, data, cases[i].at, 4), cases[i].why);
        assert_refused(request(json_pack("{s:s, s:s, s:[{s:s, s:I}]}", "op", "count", "prompt",
                                         QWEN_PROMPT, "images", "data", data, "at",
                                         (json_int_t)cases[i].at)),
                       cases[i].why);
    }
    free(square);
}

static void test_no_projector_refuses_images(void **state)
{
    (void)state;
    assert_int_equal(spawn(false), 0);
    char *square = fixture_base64("square.png");
    assert_refused(complete(QWEN_PROMPT, square, 0, 4), "model does not support images");
    free(square);
    assert_int_equal(stop(), 0);
}

/* count: a completion's numbers without encoding; an image not seen yet is not encoded by
 * it (the completion after it still encodes it). */
static void test_count(void **state)
{
    (void)state;
    char *wide = fixture_base64("wide.png");
    json_t *a = request(json_pack("{s:s, s:s, s:[{s:s, s:I}]}", "op", "count", "prompt",
                                  QWEN_PROMPT, "images", "data", wide, "at",
                                  (json_int_t)strlen(USER)));
    assert_int_equal(field(a, "n_tokens"), 25 + 18);
    assert_int_equal(field(a, "image_tokens"), 18);
    assert_int_equal(field(a, "largest_image"), 18);
    json_decref(a);
    /* text only, after a context: the context's ids and the prompt's */
    a = request(json_pack("{s:s, s:s}", "op", "tokenize", "content", "Describe."));
    size_t n_text = json_array_size(json_object_get(a, "tokens"));
    json_decref(a);
    a = request(json_pack("{s:s, s:s, s:[i,i]}", "op", "count", "prompt", "Describe.",
                          "context", 5, 6));
    assert_int_equal(field(a, "n_tokens"), 2 + n_text);
    assert_int_equal(field(a, "image_tokens"), 0);
    json_decref(a);
    char *jpeg = fixture_base64("square-jpeg.jpg");
    a = request(json_pack("{s:s, s:s, s:[{s:s, s:I}]}", "op", "count", "prompt", QWEN_PROMPT,
                          "images", "data", jpeg, "at", (json_int_t)strlen(USER)));
    assert_int_equal(field(a, "image_tokens"), 9);
    json_decref(a);
    a = complete(QWEN_PROMPT, jpeg, strlen(USER), 1);
    assert_int_equal(field(a, "image_tokens"), 9);
    assert_int_equal(field(a, "images_encoded"), 1);
    json_decref(a);
    free(jpeg);
    free(wide);
}

/* square-jpeg.jpg with the first 8 entries of its quantization table (file offset 25) made
 * block, in base64: a JPEG has no checksum, so any block decodes, to other pixels. */
static char *jpeg_with_table_block(const uint8_t block[8])
{
    char path[2048];
    corral_error err;
    size_t len;
    snprintf(path, sizeof path, "%s/vision/square-jpeg.jpg", getenv("CORRAL_FIXTURES"));
    char *data = util_read_file(path, 1 << 20, &len, &err);
    assert_non_null(data);
    assert_true(len > 33 && (uint8_t)data[20] == 0xff && (uint8_t)data[21] == 0xdb);
    memcpy(data + 25, block, 8);
    char *text = util_base64_encode((const uint8_t *)data, len);
    free(data);
    return text;
}

/* Two images that differ only in 8 bytes chosen so that a 64-bit FNV-1a hash of the files
 * is the same for both (found by a collision search; any hash a client can steer allows
 * this): the second is encoded, not taken from the first's cache entry, and is not the
 * first's prefix in the slot's KV cache either. */
static void test_colliding_images_stay_apart(void **state)
{
    (void)state;
    static const uint8_t block_a[8] = {0x15, 0x32, 0x78, 0xb5, 0x26, 0xb6, 0xc1, 0x5a};
    static const uint8_t block_b[8] = {0x68, 0x86, 0x4d, 0x03, 0x44, 0x7f, 0x37, 0xa5};
    char *a64 = jpeg_with_table_block(block_a), *b64 = jpeg_with_table_block(block_b);
    json_t *a = complete(QWEN_PROMPT, a64, strlen(USER), 1);
    assert_int_equal(field(a, "images_encoded"), 1);
    json_decref(a);
    a = complete(QWEN_PROMPT, b64, strlen(USER), 1);
    assert_int_equal(field(a, "images_encoded"), 1);
    assert_true(field(a, "prompt_eval_count") >= 34 - 6); /* the text before it may be kept */
    json_decref(a);
    free(a64);
    free(b64);
}

/* The greedy ids of the square image's prompt with a runner of family and batch. */
static void greedy_ids(const char *family, const char *batch, const char *prompt, size_t at,
                       json_int_t ids[16])
{
    assert_int_equal(spawn_family(family, true, batch), 0);
    char *square = fixture_base64("square.png");
    json_t *a = complete(prompt, square, at, 16);
    json_t *tokens = json_object_get(a, "tokens");
    if (json_array_size(tokens) < 16)
        fail_msg("%s", json_dumps(a, 0));
    for (size_t i = 0; i < 16; i++)
        ids[i] = json_integer_value(json_array_get(tokens, json_array_size(tokens) - 16 + i));
    json_decref(a);
    free(square);
    assert_int_equal(stop(), 0);
}

/* An image longer than num_batch answers as with a large batch: gemma3's (16 tokens that
 * see each other) in a batch grown for it, qwen2.5-vl's (9 causal ones) over three batches. */
static void test_small_batch(void **state)
{
    (void)state;
    json_int_t small[16], large[16];
    greedy_ids("gemma3", "4", "Describe the picture.", 0, small);
    greedy_ids("gemma3", "512", "Describe the picture.", 0, large);
    assert_memory_equal(small, large, sizeof small);
    greedy_ids("qwen25vl", "4", QWEN_PROMPT, strlen(USER), small);
    greedy_ids("qwen25vl", "512", QWEN_PROMPT, strlen(USER), large);
    assert_memory_equal(small, large, sizeof small);
}

/* A mono 16-bit WAV of a 440 Hz tone, seconds long at rate samples a second, in base64. */
static char *tone_wav_at(uint32_t rate, double seconds)
{
    size_t size;
    uint8_t *wav = audio_model_fixture_tone_at(rate, seconds, &size);
    char *text = util_base64_encode(wav, size);
    free(wav);
    return text;
}

static char *tone_wav(double seconds)
{
    return tone_wav_at(16000, seconds);
}

static void test_no_tower_refuses_audio(void **state)
{
    (void)state;
    char *wav = tone_wav(0.5);
    assert_refused(complete(QWEN_PROMPT, wav, strlen(USER), 4), "model does not support audio");
    assert_refused(request(json_pack("{s:s, s:s, s:[{s:s, s:I}]}", "op", "count", "prompt",
                                     QWEN_PROMPT, "images", "data", wav, "at",
                                     (json_int_t)strlen(USER))),
                   "model does not support audio");
    free(wav);
}

static void test_no_projector_refuses_audio(void **state)
{
    (void)state;
    assert_int_equal(spawn(false), 0);
    char *wav = tone_wav(0.5);
    assert_refused(complete(QWEN_PROMPT, wav, 0, 4), "model does not support audio");
    free(wav);
    assert_int_equal(stop(), 0);
}

static char audio_model[2048];

/* A runner of the audio model (its tower without tensor `drop`: NULL, none left out). */
static int spawn_audio(const char *drop)
{
    const char *bin = getenv("CORRAL_BIN");
    if (!bin || !getenv("CORRAL_FIXTURES"))
        return -1;
    snprintf(audio_model, sizeof audio_model, "/tmp/corral-test-runner-audio-%d.gguf",
             (int)getpid());
    audio_model_fixture_write(audio_model, drop);
    snprintf(socket_path, sizeof socket_path, "/tmp/corral-test-runner-audio-%d.sock",
             (int)getpid());
    const char *const argv[] = {bin, "runner", "--model", audio_model, "--socket", socket_path,
                                "--ctx", "4096", "--parallel", "1", "--threads", "1",
                                "--batch", "8", NULL};
    return runner_fixture_start(argv, socket_path, &runner_pid) ? 0 : -1;
}

static int start_with_audio(void **state)
{
    (void)state;
    return spawn_audio(NULL);
}

static int stop_audio(void **state)
{
    (void)state;
    remove(audio_model);
    return stop();
}

#define GEMMA_USER "<start_of_turn>user\n"
#define GEMMA_PROMPT GEMMA_USER " What is said?<end_of_turn>\n<start_of_turn>model\n"

/* 0.5 s of audio: 49 log-mel frames, 13 tokens after the two halvings. */
static void test_audio_clip_answers_then_the_cache(void **state)
{
    (void)state;
    char *wav = tone_wav(0.5);
    json_t *a = request(json_pack("{s:s, s:s, s:[{s:s, s:I}]}", "op", "count", "prompt",
                                  GEMMA_PROMPT, "images", "data", wav, "at",
                                  (json_int_t)strlen(GEMMA_USER)));
    assert_int_equal(field(a, "image_tokens"), 13);
    json_int_t n_tokens = field(a, "n_tokens");
    json_decref(a);
    a = complete(GEMMA_PROMPT, wav, strlen(GEMMA_USER), 4);
    assert_int_equal(field(a, "image_tokens"), 13);
    assert_int_equal(field(a, "images_encoded"), 1);
    assert_int_equal(field(a, "prompt_eval_count"), n_tokens);
    assert_int_equal(json_array_size(json_object_get(a, "tokens")), n_tokens - 13 + 4);
    json_decref(a);
    /* the same clip again: from the cache, its cells reused, only the last token */
    a = complete(GEMMA_PROMPT, wav, strlen(GEMMA_USER), 4);
    assert_int_equal(field(a, "images_encoded"), 0);
    assert_int_equal(field(a, "prompt_eval_count"), 1);
    json_decref(a);
    /* another clip in the same place: evaluated from the clip on */
    char *longer = tone_wav(0.6);
    a = complete(GEMMA_PROMPT, longer, strlen(GEMMA_USER), 4);
    assert_int_equal(field(a, "images_encoded"), 1);
    assert_int_equal(field(a, "image_tokens"), 15);
    assert_true(field(a, "prompt_eval_count") < n_tokens - 13 + 15);
    json_decref(a);
    free(longer);
    /* no vision tower: an image is refused */
    char *square = fixture_base64("square.png");
    assert_refused(complete(GEMMA_PROMPT, square, 0, 4), "model does not support images");
    free(square);
    /* a clip over ten minutes is the request's fault (at 1 kHz: the cap is on seconds) */
    char *too_long = tone_wav_at(1000, 600.5);
    assert_refused(complete(GEMMA_PROMPT, too_long, 0, 4), "longer than 600 seconds");
    free(too_long);
    free(wav);
}

/* A clip over 30 seconds counts and answers in 30-second segments: 65 s is 750 + 750 + 125
 * tokens, 121 s 4 x 750 + 25. The cache holds the room of four 30-second clips (3000 tokens):
 * a clip larger than all of it is encoded again for each request, and the clips it would
 * have pushed out are still kept. */
static void test_long_clip_in_segments_and_the_cache_room(void **state)
{
    (void)state;
    char *wav = tone_wav(65);
    json_t *a = request(json_pack("{s:s, s:s, s:[{s:s, s:I}]}", "op", "count", "prompt",
                                  GEMMA_PROMPT, "images", "data", wav, "at",
                                  (json_int_t)strlen(GEMMA_USER)));
    assert_int_equal(field(a, "image_tokens"), 1625);
    json_decref(a);
    free(wav);
    char *kept = tone_wav(0.7);
    a = complete(GEMMA_PROMPT, kept, strlen(GEMMA_USER), 4);
    assert_int_equal(field(a, "images_encoded"), 1);
    json_decref(a);
    char *longest = tone_wav(121);
    for (int i = 0; i < 2; i++) {
        a = complete(GEMMA_PROMPT, longest, strlen(GEMMA_USER), 4);
        assert_int_equal(field(a, "image_tokens"), 3025);
        assert_int_equal(field(a, "images_encoded"), 1);
        json_decref(a);
    }
    a = complete(GEMMA_PROMPT, kept, strlen(GEMMA_USER), 4);
    assert_int_equal(field(a, "images_encoded"), 0);
    json_decref(a);
    free(longest);
    free(kept);
}

/* A client that leaves while its clip of two segments encodes (it closes the connection
 * right after sending, the runner reading the request all the same) stops the encoding: the
 * clip is not cached, and the next request with it encodes it and answers. */
static void test_closed_connection_stops_the_encoding(void **state)
{
    (void)state;
    char *wav = tone_wav(31);
    close(send_request(json_pack("{s:s, s:s, s:[{s:s, s:I}], s:{s:i, s:i}}", "op",
                                 "completion", "prompt", GEMMA_PROMPT, "images", "data", wav,
                                 "at", (json_int_t)strlen(GEMMA_USER), "options", "temperature",
                                 0, "num_predict", 1)));
    json_t *a = complete(GEMMA_PROMPT, wav, strlen(GEMMA_USER), 1);
    assert_int_equal(field(a, "image_tokens"), 750 + 25);
    assert_int_equal(field(a, "images_encoded"), 1);
    json_decref(a);
    free(wav);
}

/* A tower that does not load costs the model its audio only: text still answers, and a
 * clip's refusal says why. */
static void test_broken_tower_refuses_audio_only(void **state)
{
    (void)state;
    assert_int_equal(spawn_audio("a.blk.1.conv_pw2.weight"), 0);
    json_t *a = request(json_pack("{s:s, s:s, s:{s:i, s:i}}", "op", "completion", "prompt",
                                  GEMMA_PROMPT, "options", "temperature", 0, "num_predict", 2));
    assert_int_equal(json_array_size(json_object_get(a, "tokens")),
                     (size_t)field(a, "prompt_eval_count") + 2);
    json_decref(a);
    char *wav = tone_wav(0.5);
    assert_refused(complete(GEMMA_PROMPT, wav, 0, 4),
                   "the model's audio tower cannot be used: ");
    assert_refused(complete(GEMMA_PROMPT, wav, 0, 4), "'a.blk.1.conv_pw2.weight'");
    free(wav);
    remove(audio_model);
    assert_int_equal(stop(), 0);
}

int main(void)
{
    const struct CMUnitTest with_projector[] = {
        cmocka_unit_test(test_reference_ids_then_the_cache),
        cmocka_unit_test(test_bad_images),
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_colliding_images_stay_apart),
        cmocka_unit_test(test_no_tower_refuses_audio),
    };
    const struct CMUnitTest with_audio[] = {
        cmocka_unit_test(test_audio_clip_answers_then_the_cache),
        cmocka_unit_test(test_long_clip_in_segments_and_the_cache_room),
        cmocka_unit_test(test_closed_connection_stops_the_encoding),
    };
    const struct CMUnitTest without[] = {
        cmocka_unit_test(test_no_projector_refuses_images),
        cmocka_unit_test(test_no_projector_refuses_audio),
        cmocka_unit_test(test_broken_tower_refuses_audio_only),
        cmocka_unit_test(test_small_batch),
    };
    return cmocka_run_group_tests(with_projector, start_with_projector, stop_runner) +
           cmocka_run_group_tests(with_audio, start_with_audio, stop_audio) +
           cmocka_run_group_tests(without, NULL, NULL);
}
