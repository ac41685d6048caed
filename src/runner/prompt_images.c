/*
 * Images in a completion prompt (prompt_images.h): decoding, preprocessing and encoding with
 * a small cache of recent embeddings, and the prompt's ids around each image.
 */
#include "runner/prompt_images.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "util/base64.h"

/* Recent images' embeddings kept: a conversation's turns each send all its images again. */
#define CACHED_IMAGES 4

typedef struct cached_image {
    uint64_t hash;
    corral_image_embd embd; /* n_tokens 0: unused */
    uint64_t used;
} cached_image;

struct prompt_vision {
    corral_mmproj *mm;
    int n_threads;
    pthread_mutex_t lock; /* one encoding at a time; guards the cache */
    cached_image cache[CACHED_IMAGES];
    uint64_t clock;
};

prompt_vision *prompt_vision_create(const char *path, const corral_model *model, int n_threads,
                                    corral_error *err)
{
    prompt_vision *v = calloc(1, sizeof *v);
    if (!v) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    v->mm = corral_mmproj_load(path, err);
    if (!v->mm || !corral_mmproj_fits(v->mm, model, err)) {
        corral_mmproj_free(v->mm);
        free(v);
        return NULL;
    }
    v->n_threads = n_threads;
    pthread_mutex_init(&v->lock, NULL);
    return v;
}

void prompt_vision_free(prompt_vision *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < CACHED_IMAGES; i++)
        corral_image_embd_free(&v->cache[i].embd);
    pthread_mutex_destroy(&v->lock);
    corral_mmproj_free(v->mm);
    free(v);
}

void prompt_images_free(prompt_image *images, size_t n)
{
    for (size_t i = 0; i < n; i++)
        corral_image_embd_free(&images[i].embd);
    free(images);
}

size_t prompt_images_safe_prefix(const prompt_image *images, size_t n_images, size_t prefix)
{
    for (size_t i = 0; i < n_images; i++)
        if (prefix > images[i].at && prefix < images[i].at + images[i].embd.n_tokens)
            return images[i].at;
    return prefix;
}

static uint64_t fnv1a64(const uint8_t *data, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    return h;
}

/* splitmix64's finaliser: neighbouring inputs give unrelated outputs. */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A copy of src into dst; false when out of memory. */
static bool copy_embd(corral_image_embd *dst, const corral_image_embd *src)
{
    *dst = *src;
    size_t bytes = src->n_tokens * src->n_embd * sizeof *src->data;
    dst->data = malloc(bytes ? bytes : 1);
    if (!dst->data)
        return false;
    memcpy(dst->data, src->data, bytes);
    return true;
}

/* The preprocessing the projector's parameters ask for. */
static image_preprocess preprocessing(const corral_mmproj *mm)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    return image_preprocess_from_params(&params);
}

/* Pixels for the projector, as its parameters say. */
static image_pixels *preprocess(const corral_mmproj *mm, const image_rgb *rgb, corral_error *err)
{
    image_preprocess pre = preprocessing(mm);
    return image_preprocess_run(&pre, rgb, err);
}

/* The tokens of one image file's bytes (hash: theirs): the cached embeddings' count, else
 * the count its size gives, without encoding it. */
static bool count_image(prompt_vision *v, const uint8_t *data, size_t len, uint64_t hash,
                        corral_image_embd *out, corral_error *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < CACHED_IMAGES; i++)
        if (v->cache[i].embd.n_tokens && v->cache[i].hash == hash)
            out->n_tokens = v->cache[i].embd.n_tokens;
    pthread_mutex_unlock(&v->lock);
    if (out->n_tokens)
        return true;
    image_rgb *rgb = image_decode(data, len, NULL, err);
    image_preprocess pre = preprocessing(v->mm);
    uint32_t nx, ny;
    bool ok = rgb && image_preprocess_size(&pre, rgb->width, rgb->height, &nx, &ny, err);
    image_rgb_free(rgb);
    if (ok && !(out->n_tokens = corral_mmproj_image_tokens(v->mm, nx, ny))) {
        corral_error_set(err, "the projector takes no image of %u x %u pixels", nx, ny);
        ok = false;
    }
    return ok;
}

/* The embeddings of one image file's bytes (hash: theirs), from the cache or encoded. */
static bool encode_image(prompt_vision *v, const uint8_t *data, size_t len, uint64_t hash,
                         corral_image_embd *out, bool *encoded, corral_error *err)
{
    *encoded = false;
    pthread_mutex_lock(&v->lock);
    cached_image *slot = &v->cache[0];
    for (size_t i = 0; i < CACHED_IMAGES; i++) {
        cached_image *c = &v->cache[i];
        if (c->embd.n_tokens && c->hash == hash) {
            c->used = ++v->clock;
            bool ok = copy_embd(out, &c->embd);
            pthread_mutex_unlock(&v->lock);
            if (!ok)
                corral_error_set(err, "out of memory");
            return ok;
        }
        if (c->used < slot->used)
            slot = c;
    }
    image_rgb *rgb = image_decode(data, len, NULL, err);
    image_pixels *pixels = rgb ? preprocess(v->mm, rgb, err) : NULL;
    image_rgb_free(rgb);
    bool ok = pixels && corral_mmproj_encode(v->mm, pixels->data, pixels->nx, pixels->ny,
                                             v->n_threads, out, err);
    *encoded = ok;
    image_pixels_free(pixels);
    if (ok) {
        corral_image_embd_free(&slot->embd);
        if (copy_embd(&slot->embd, out)) {
            slot->hash = hash;
            slot->used = ++v->clock;
        } else {
            slot->embd = (corral_image_embd){0};
        }
    }
    pthread_mutex_unlock(&v->lock);
    return ok;
}

/* ids grown to hold `more` after its n; false when out of memory or too many. */
static bool grow(corral_token **ids, size_t *cap, size_t n, size_t more, corral_error *err)
{
    if (more > SIZE_MAX / sizeof **ids / 2 - n) {
        corral_error_set(err, "prompt too long");
        return false;
    }
    if (n + more <= *cap)
        return true;
    size_t want = (n + more) * 2;
    corral_token *grown = realloc(*ids, want * sizeof *grown);
    if (!grown) {
        corral_error_set(err, "out of memory");
        return false;
    }
    *ids = grown;
    *cap = want;
    return true;
}

/* Append the ids of text (len bytes) to ids. */
static bool append_text(const corral_vocab *vocab, const char *text, size_t len, bool add_special,
                        corral_token **ids, size_t *cap, size_t *n, corral_error *err)
{
    size_t need = len + 4, got = 0;
    for (;;) {
        if (!grow(ids, cap, *n, need, err))
            return false;
        if (!corral_tokenize(vocab, text, len, add_special, true, *ids + *n, need, &got, err))
            return false;
        if (got <= need)
            break;
        need = got;
    }
    *n += got;
    return true;
}

/* text1 + text2 as one piece (the image's marks are tokenized with the text beside them). */
static bool append_joined(const corral_vocab *vocab, const char *a, size_t a_len, const char *b,
                          size_t b_len, bool add_special, corral_token **ids, size_t *cap,
                          size_t *n, corral_error *err)
{
    char *text = malloc(a_len + b_len + 1);
    if (!text) {
        corral_error_set(err, "out of memory");
        return false;
    }
    memcpy(text, a, a_len);
    memcpy(text + a_len, b, b_len);
    bool ok = append_text(vocab, text, a_len + b_len, add_special, ids, cap, n, err);
    free(text);
    return ok;
}

/* prompt_vision_tokens; with !encode, each image's embd has its n_tokens only. */
static corral_token *vision_ids(prompt_vision *v, const corral_vocab *vocab, const char *prompt,
                                const json_t *images, bool add_special, size_t reserve,
                                bool encode, size_t *n, prompt_image **out_images,
                                size_t *n_images, corral_error *err)
{
    size_t count = json_array_size(images), prompt_len = strlen(prompt), cap = reserve + 64;
    size_t done = 0; /* prompt bytes tokenized so far */
    const char *begin = corral_mmproj_image_begin(v->mm), *end = corral_mmproj_image_end(v->mm);
    if (encode && count > PROMPT_MAX_IMAGES) { /* counting a long chat's history may see more */
        corral_error_set(err, "at most %d images per request", PROMPT_MAX_IMAGES);
        return NULL;
    }
    corral_token *ids = malloc(cap * sizeof *ids);
    prompt_image *list = calloc(count ? count : 1, sizeof *list);
    bool ok = ids && list;
    if (!ok)
        corral_error_set(err, "out of memory");
    *n = reserve;
    const char *after_mark = ""; /* the previous image's end text */
    for (size_t i = 0; ok && i < count; i++) {
        const json_t *image = json_array_get(images, i);
        const char *data = json_string_value(json_object_get(image, "data"));
        json_t *at_json = json_object_get(image, "at");
        json_int_t at = json_integer_value(at_json);
        if (!data || !json_is_integer(at_json) || at < (json_int_t)done ||
            (uint64_t)at > prompt_len) {
            corral_error_set(err, "images[%zu] needs base64 data and an offset in the prompt "
                                  "after the previous image's", i);
            ok = false;
            break;
        }
        size_t len = 0;
        uint8_t *bytes = util_base64_decode(data, strlen(data), PROMPT_MAX_IMAGE_BYTES, &len, err);
        ok = bytes != NULL;
        if (ok) {
            char *text = NULL;
            size_t text_len = strlen(after_mark) + ((size_t)at - done);
            ok = (text = malloc(text_len + 1)) != NULL;
            if (ok) {
                snprintf(text, text_len + 1, "%s%.*s", after_mark, (int)((size_t)at - done),
                         prompt + done);
                ok = append_joined(vocab, text, text_len, begin, strlen(begin),
                                   add_special && i == 0, &ids, &cap, n, err);
                free(text);
            } else {
                corral_error_set(err, "out of memory");
            }
        }
        uint64_t hash = bytes ? fnv1a64(bytes, len) : 0;
        ok = ok && (encode ? encode_image(v, bytes, len, hash, &list[i].embd, &list[i].encoded,
                                          err)
                           : count_image(v, bytes, len, hash, &list[i].embd, err));
        free(bytes);
        ok = ok && grow(&ids, &cap, *n, list[i].embd.n_tokens, err);
        if (ok) {
            list[i].at = *n;
            for (size_t t = 0; t < list[i].embd.n_tokens; t++)
                ids[(*n)++] = -1 - (corral_token)(mix64(hash + t) & 0x7fffffff);
        }
        done = (size_t)at;
        after_mark = end;
    }
    ok = ok && append_joined(vocab, after_mark, strlen(after_mark), prompt + done,
                             prompt_len - done, add_special && count == 0, &ids, &cap, n, err);
    if (!ok) {
        free(ids);
        prompt_images_free(list, count);
        return NULL;
    }
    *n -= reserve;
    *out_images = list;
    *n_images = count;
    return ids;
}

corral_token *prompt_vision_tokens(prompt_vision *v, const corral_vocab *vocab,
                                   const char *prompt, const json_t *images, bool add_special,
                                   size_t reserve, size_t *n, prompt_image **out_images,
                                   size_t *n_images, corral_error *err)
{
    return vision_ids(v, vocab, prompt, images, add_special, reserve, true, n, out_images,
                      n_images, err);
}

bool prompt_vision_count(prompt_vision *v, const corral_vocab *vocab, const char *prompt,
                         const json_t *images, bool add_special, prompt_count *out,
                         corral_error *err)
{
    prompt_image *list = NULL;
    size_t n_images = 0;
    corral_token *ids = vision_ids(v, vocab, prompt, images, add_special, 0, false, &out->n_tokens,
                                   &list, &n_images, err);
    if (!ids)
        return false;
    free(ids);
    out->n_image_tokens = out->largest_image = 0;
    for (size_t i = 0; i < n_images; i++) {
        out->n_image_tokens += list[i].embd.n_tokens;
        if (list[i].embd.n_tokens > out->largest_image)
            out->largest_image = list[i].embd.n_tokens;
    }
    prompt_images_free(list, n_images);
    return true;
}

uint32_t prompt_vision_batch_tokens(const prompt_vision *v, const corral_model *model)
{
    return corral_mmproj_batch_tokens(v->mm, model);
}
