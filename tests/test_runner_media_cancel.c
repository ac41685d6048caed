/*
 * A request's media encoding and its cancel (src/runner/prompt_images.h), with the tiny
 * Gemma 4 model that carries an audio tower (tests/fixtures/audio/gemma4a-model.gguf: two
 * blocks): a clip of three 30-second segments asks its cancel once when its turn to encode
 * comes and then before each segment and each block; cancelled at the second segment, it
 * stops there with "cancelled", keeps nothing in the cache, and the next request encodes it
 * whole and caches it. While one request encodes, another's cached clip and a count do not
 * wait for it.
 */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "audio_model_fixture.h"
#include "corral/engine.h"
#include "counting_cancel.h"
#include "runner/prompt_images.h"
#include "util/base64.h"

#define USER "<start_of_turn>user\n"
#define PROMPT USER " What is said?<end_of_turn>\n<start_of_turn>model\n"
/* the fixture tower's blocks: a clip's segment asks its cancel 1 + BLOCKS times */
#define BLOCKS 2

typedef struct fixture {
    corral_model *model;
    prompt_vision *vision;
} fixture;

static int setup(void **state)
{
    const char *fixtures = getenv("CORRAL_FIXTURES");
    if (!fixtures)
        return -1;
    char path[2048];
    snprintf(path, sizeof path, "%s/audio/gemma4a-model.gguf", fixtures);
    static fixture f;
    corral_error err = {{0}};
    f.model = corral_model_load(path, &err);
    f.vision = f.model ? prompt_vision_create(NULL, path, f.model, 1, &err) : NULL;
    if (!f.vision || !prompt_vision_takes_audio(f.vision)) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    prompt_vision_free(f->vision);
    corral_model_free(f->model);
    return 0;
}

/* [{"data": a 16 kHz WAV tone of `seconds` in base64, "at": where the prompt's user text
 * starts}] */
static json_t *clip_items(double seconds)
{
    size_t size;
    uint8_t *wav = audio_model_fixture_tone(seconds, &size);
    char *text = util_base64_encode(wav, size);
    free(wav);
    json_t *items = json_pack("[{s:s, s:I}]", "data", text, "at", (json_int_t)strlen(USER));
    free(text);
    assert_non_null(items);
    return items;
}

/* prompt_vision_tokens of PROMPT with items under cancel; NULL (err set) when it failed. */
static corral_token *tokens_of(fixture *f, const json_t *items, const corral_cancel *cancel,
                               prompt_image **images, size_t *n_images, bool *refused,
                               corral_error *err)
{
    size_t n = 0;
    return prompt_vision_tokens(f->vision, corral_model_vocab(f->model), PROMPT, items, true, 0,
                                cancel, &n, images, n_images, refused, err);
}

static void test_cancel_stops_a_clip_between_segments(void **state)
{
    fixture *f = *state;
    json_t *items = clip_items(61); /* segments of 30, 30 and 1 seconds */
    prompt_image *images = NULL;
    size_t n_images = 0;
    bool refused = true;
    corral_error err = {{0}};
    /* checks: its turn (1), segment 0 (2), its blocks (3, 4), segment 1 (5) */
    counting_cancel count = {.stop_at = 3 + BLOCKS};
    corral_cancel cancel = {.requested = count_check, .user = &count};
    assert_null(tokens_of(f, items, &cancel, &images, &n_images, &refused, &err));
    assert_string_equal(err.message, CORRAL_CANCELLED);
    assert_false(refused);
    assert_int_equal(count.checks, 3 + BLOCKS); /* no step after the one that asked */
    /* nothing kept: the next request encodes the clip whole, every check made */
    count = (counting_cancel){0};
    corral_token *ids = tokens_of(f, items, &cancel, &images, &n_images, &refused, &err);
    if (!ids)
        fail_msg("%s", err.message);
    assert_int_equal(count.checks, 1 + 3 * (1 + BLOCKS));
    assert_int_equal(n_images, 1);
    assert_true(images[0].encoded);
    assert_int_equal(images[0].embd.n_tokens, 750 + 750 + 25);
    free(ids);
    prompt_images_free(images, n_images);
    /* ... and caches it: a third takes it from there without a check */
    count = (counting_cancel){0};
    ids = tokens_of(f, items, &cancel, &images, &n_images, &refused, &err);
    assert_non_null(ids);
    assert_int_equal(count.checks, 0);
    assert_false(images[0].encoded);
    free(ids);
    prompt_images_free(images, n_images);
    json_decref(items);
}

/* An encoding that holds its turn until the main thread's requests are done or a few seconds
 * pass: its first check (its turn come) says whether they got through meanwhile. */
typedef struct held_encoding {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool encoding, others_done, others_done_meanwhile, first_check_done;
    fixture *f;
    const json_t *items;
    bool ok;
} held_encoding;

static bool hold_first_check(void *user)
{
    held_encoding *h = user;
    pthread_mutex_lock(&h->lock);
    if (!h->first_check_done) {
        h->first_check_done = true;
        h->encoding = true;
        pthread_cond_broadcast(&h->changed);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 5;
        while (!h->others_done &&
               pthread_cond_timedwait(&h->changed, &h->lock, &deadline) == 0) {
        }
        h->others_done_meanwhile = h->others_done;
    }
    pthread_mutex_unlock(&h->lock);
    return false;
}

static void *encode_held(void *arg)
{
    held_encoding *h = arg;
    corral_cancel cancel = {.requested = hold_first_check, .user = h};
    prompt_image *images = NULL;
    size_t n_images = 0;
    bool refused;
    corral_error err = {{0}};
    corral_token *ids = tokens_of(h->f, h->items, &cancel, &images, &n_images, &refused, &err);
    h->ok = ids != NULL && n_images == 1 && images[0].encoded;
    free(ids);
    prompt_images_free(images, n_images);
    return NULL;
}

static void test_cached_media_does_not_wait_for_an_encoding(void **state)
{
    fixture *f = *state;
    json_t *cached = clip_items(0.5), *other = clip_items(0.7);
    json_t *encoding = clip_items(0.6);
    prompt_image *images = NULL;
    size_t n_images = 0;
    bool refused;
    corral_error err = {{0}};
    corral_token *ids = tokens_of(f, cached, NULL, &images, &n_images, &refused, &err);
    assert_non_null(ids);
    free(ids);
    prompt_images_free(images, n_images);

    held_encoding h = {.f = f, .items = encoding};
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.changed, NULL);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, encode_held, &h), 0);
    pthread_mutex_lock(&h.lock);
    while (!h.encoding)
        pthread_cond_wait(&h.changed, &h.lock);
    pthread_mutex_unlock(&h.lock);
    /* while it holds its turn: a cached clip, and a count of one not yet encoded */
    ids = tokens_of(f, cached, NULL, &images, &n_images, &refused, &err);
    assert_non_null(ids);
    assert_false(images[0].encoded);
    free(ids);
    prompt_images_free(images, n_images);
    prompt_count counted;
    assert_true(prompt_vision_count(f->vision, corral_model_vocab(f->model), PROMPT, other, true,
                                    &counted, &refused, &err));
    assert_int_equal(counted.n_image_tokens, 18);
    pthread_mutex_lock(&h.lock);
    h.others_done = true;
    pthread_cond_broadcast(&h.changed);
    pthread_mutex_unlock(&h.lock);
    pthread_join(thread, NULL);
    assert_true(h.others_done_meanwhile);
    assert_true(h.ok);
    pthread_cond_destroy(&h.changed);
    pthread_mutex_destroy(&h.lock);
    json_decref(cached);
    json_decref(other);
    json_decref(encoding);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancel_stops_a_clip_between_segments),
        cmocka_unit_test(test_cached_media_does_not_wait_for_an_encoding),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
