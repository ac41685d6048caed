/*
 * Images and audio clips in a completion prompt (prompt_images.h): each item told by its
 * bytes, decoded, preprocessed and encoded with a small cache of recent embeddings, and the
 * prompt's ids around each item.
 */
#include "runner/prompt_images.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "audio/audio.h"
#include "audio/mel.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "image/slices.h"
#include "util/base64.h"

/* One image file's embeddings: its parts' (one part, or a sliced image's overview and
 * slices, image/slices.h) one after another, and the plan that cut it. */
typedef struct image_embd {
    corral_image_embd embd;
    image_slice_plan plan; /* 0 x 0 slices: one part */
} image_embd;

/* An image file's identity: the SHA-256 of its bytes. The cache is shared by every request to
 * the runner, so a hash that a client can steer (a non-cryptographic one: one image made to
 * collide with another's) would let one request's image stand for another's. */
typedef struct image_digest {
    uint8_t bytes[32];
} image_digest;

typedef struct cached_image {
    image_digest digest;
    image_embd image; /* embd.n_tokens 0: unused */
    uint64_t used;
} cached_image;

struct prompt_vision {
    corral_mmproj *mm;           /* NULL: the model takes no images */
    corral_audio_tower *audio;   /* NULL: the model takes no audio */
    /* why a tower the model file carries is not used ("": none, or it is used) */
    char audio_error[CORRAL_ERROR_MAX];
    int n_threads;
    /* One encoding at a time (each takes every thread it is given, and a tower on a GPU has
     * one set of buffers); a request that waits for it re-reads the cache once it has it.
     * Taken before cache_lock, never after. */
    pthread_mutex_t encode_lock;
    /* guards the cache and its clock, held only to look up, copy or keep embeddings, so that
     * a cached item is not held up by another request's encoding */
    pthread_mutex_t cache_lock;
    cached_image cache[PROMPT_CACHED_IMAGES];
    uint64_t cache_room; /* the most bytes of embeddings the cache holds (prompt_images.h) */
    uint64_t clock;
    /* fetched once, at load: EVP_sha256()'s implicit fetch would happen lazily inside
     * whichever request threads hash first, at the same time */
    EVP_MD *sha256;
};

prompt_vision *prompt_vision_create(const char *path, const char *model_path,
                                    const corral_model *model, int n_threads, corral_error *err)
{
    corral_error_set(err, "%s", "");
    prompt_vision *v = calloc(1, sizeof *v);
    if (!v) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    bool ok = !path || ((v->mm = corral_mmproj_load(path, err)) &&
                        corral_mmproj_fits(v->mm, model, err));
    if (ok && model_path) {
        /* a tower that does not load costs the model its audio only: its text and images
         * still answer, and a clip's refusal says why */
        corral_error tower_err = {{0}};
        bool absent = true;
        v->audio = corral_audio_tower_load(model_path, &absent, &tower_err);
        if (v->audio && !corral_audio_tower_fits(v->audio, model, &tower_err)) {
            corral_audio_tower_free(v->audio);
            v->audio = NULL;
        }
        if (!v->audio && !absent)
            snprintf(v->audio_error, sizeof v->audio_error, "%s", tower_err.message);
    }
    if (ok && !v->mm && !v->audio && !v->audio_error[0]) { /* nothing to take: no error */
        free(v);
        return NULL;
    }
    if (ok && !(v->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL))) {
        corral_error_set(err, "libcrypto has no SHA-256");
        ok = false;
    }
    if (!ok) {
        corral_mmproj_free(v->mm);
        corral_audio_tower_free(v->audio);
        free(v);
        return NULL;
    }
    v->n_threads = n_threads;
    uint64_t one = v->mm ? corral_mmproj_image_bytes(v->mm) : 0;
    if (v->audio) {
        uint64_t clip = corral_audio_tower_clip_bytes(
            v->audio, audio_mel_frames(AUDIO_MEL_SEGMENT_SAMPLES));
        one = clip > one ? clip : one;
    }
    if (__builtin_mul_overflow(one, (uint64_t)PROMPT_CACHED_IMAGES, &v->cache_room))
        v->cache_room = UINT64_MAX;
    pthread_mutex_init(&v->encode_lock, NULL);
    pthread_mutex_init(&v->cache_lock, NULL);
    return v;
}

bool prompt_vision_gpu_bytes(const prompt_vision *v, int device, uint64_t *out,
                             corral_error *err)
{
    if (!v->mm) {
        corral_error_set(err, "no vision tower");
        return false;
    }
    return corral_mmproj_gpu_bytes(v->mm, device, out, err);
}

bool prompt_vision_use_gpu(prompt_vision *v, int device, corral_error *err)
{
    if (!v->mm) {
        corral_error_set(err, "no vision tower");
        return false;
    }
    pthread_mutex_lock(&v->encode_lock);
    bool ok = corral_mmproj_use_gpu(v->mm, device, err);
    pthread_mutex_unlock(&v->encode_lock);
    return ok;
}

bool prompt_vision_audio_gpu_bytes(const prompt_vision *v, int device, uint64_t *out,
                                   corral_error *err)
{
    *out = 0;
    if (!v->audio) {
        corral_error_set(err, "no audio tower");
        return false;
    }
    return corral_audio_tower_gpu_bytes(v->audio, device, out, err);
}

bool prompt_vision_audio_use_gpu(prompt_vision *v, int device, corral_error *err)
{
    if (!v->audio) {
        corral_error_set(err, "no audio tower");
        return false;
    }
    pthread_mutex_lock(&v->encode_lock);
    bool ok = corral_audio_tower_use_gpu(v->audio, device, err);
    pthread_mutex_unlock(&v->encode_lock);
    return ok;
}

void prompt_vision_free(prompt_vision *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < PROMPT_CACHED_IMAGES; i++)
        corral_image_embd_free(&v->cache[i].image.embd);
    pthread_mutex_destroy(&v->encode_lock);
    pthread_mutex_destroy(&v->cache_lock);
    corral_mmproj_free(v->mm);
    corral_audio_tower_free(v->audio);
    EVP_MD_free(v->sha256);
    free(v);
}

bool prompt_vision_takes_audio(const prompt_vision *v)
{
    return v && v->audio;
}

const char *prompt_vision_audio_error(const prompt_vision *v)
{
    return v && v->audio_error[0] ? v->audio_error : NULL;
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

static bool digest_of(const EVP_MD *sha256, const uint8_t *data, size_t len, image_digest *out,
                      corral_error *err)
{
    unsigned int n = 0;
    /* fails only when libcrypto cannot allocate, not on any input */
    if (!EVP_Digest(data, len, out->bytes, &n, sha256, NULL) || n != sizeof out->bytes) {
        corral_error_set(err, "cannot hash a media item (libcrypto)");
        return false;
    }
    return true;
}

static bool same_digest(const image_digest *a, const image_digest *b)
{
    return memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

/* The digest's first 8 bytes, the seed of the image's pseudo-ids. */
static uint64_t digest_seed(const image_digest *d)
{
    uint64_t seed;
    memcpy(&seed, d->bytes, sizeof seed);
    return seed;
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

/* Whether the projector cuts large images into parts. */
static bool slices_images(const corral_mmproj *mm)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    return params.max_slices > 0;
}

/* The parts an image of width x height becomes: a sliced kind's plan, else one part. */
static bool plan_of(const corral_mmproj *mm, uint32_t width, uint32_t height,
                    image_slice_plan *plan, corral_error *err)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    memset(plan, 0, sizeof *plan);
    return params.max_slices == 0 || image_plan_for_params(&params, width, height, plan, err);
}

static size_t parts_of(const image_slice_plan *plan)
{
    return 1 + (size_t)plan->cols * plan->rows;
}

/* The tokens of part k under a sliced kind's plan. */
static size_t part_tokens(const corral_mmproj *mm, const image_slice_plan *plan, size_t k)
{
    return image_slice_part_is_overview(plan, k)
               ? corral_mmproj_image_tokens(mm, plan->overview_w, plan->overview_h)
               : corral_mmproj_image_tokens(mm, plan->cell_w, plan->cell_h);
}

/* The cached embeddings of digest copied into out (with the count only when !copy); false
 * when none is cached, or out of memory (*failed then). */
static bool from_cache(prompt_vision *v, const image_digest *digest, bool copy, image_embd *out,
                       bool *failed, corral_error *err)
{
    *failed = false;
    bool found = false;
    pthread_mutex_lock(&v->cache_lock);
    for (size_t i = 0; i < PROMPT_CACHED_IMAGES; i++) {
        cached_image *c = &v->cache[i];
        if (!c->image.embd.n_tokens || !same_digest(&c->digest, digest))
            continue;
        out->plan = c->image.plan;
        if (!copy) {
            out->embd.n_tokens = c->image.embd.n_tokens;
        } else if (copy_embd(&out->embd, &c->image.embd)) {
            c->used = ++v->clock;
        } else {
            corral_error_set(err, "out of memory");
            *failed = true;
        }
        found = !*failed;
        break;
    }
    pthread_mutex_unlock(&v->cache_lock);
    return found;
}

static uint64_t embd_bytes(const corral_image_embd *e)
{
    return (uint64_t)e->n_tokens * e->n_embd * sizeof *e->data;
}

/* Freshly encoded embeddings kept (a copy of out's) in a free entry, the least recently used
 * ones given up until one is free and the cache's room holds them all; ones larger than the
 * whole room are not kept. So the same bytes in a later request are not encoded again. */
static void keep_encoded(prompt_vision *v, const image_digest *digest, const image_embd *out)
{
    uint64_t need = embd_bytes(&out->embd), held = 0;
    if (need > v->cache_room)
        return;
    pthread_mutex_lock(&v->cache_lock);
    for (size_t i = 0; i < PROMPT_CACHED_IMAGES; i++)
        held += embd_bytes(&v->cache[i].image.embd);
    cached_image *slot = NULL;
    for (;;) {
        cached_image *oldest = NULL;
        slot = NULL;
        for (size_t i = 0; i < PROMPT_CACHED_IMAGES; i++) {
            cached_image *c = &v->cache[i];
            if (!c->image.embd.n_tokens)
                slot = c;
            else if (!oldest || c->used < oldest->used)
                oldest = c;
        }
        if (slot && held + need <= v->cache_room)
            break;
        held -= embd_bytes(&oldest->image.embd); /* need fits an empty cache: one is held */
        corral_image_embd_free(&oldest->image.embd);
        oldest->image.embd = (corral_image_embd){0};
    }
    slot->image.plan = out->plan;
    if (copy_embd(&slot->image.embd, &out->embd)) {
        slot->digest = *digest;
        slot->used = ++v->clock;
    } else {
        slot->image.embd = (corral_image_embd){0}; /* out of memory: only the cache goes short */
    }
    pthread_mutex_unlock(&v->cache_lock);
}

/* The tokens of one image file's bytes (digest: theirs): the cached embeddings' count, else
 * the count its size gives, without encoding it. */
static bool count_image(prompt_vision *v, const uint8_t *data, size_t len,
                        const image_digest *digest,
                        image_embd *out, bool *refused, corral_error *err)
{
    memset(out, 0, sizeof *out);
    bool failed;
    bool cached = from_cache(v, digest, false, out, &failed, err);
    if (cached)
        return true;
    image_rgb *rgb = image_decode(data, len, NULL, err);
    bool ok = rgb != NULL;
    uint32_t nx = 0, ny = 0;
    if (ok && slices_images(v->mm)) {
        ok = plan_of(v->mm, rgb->width, rgb->height, &out->plan, err);
        for (size_t k = 0; ok && k < parts_of(&out->plan); k++)
            out->embd.n_tokens += part_tokens(v->mm, &out->plan, k);
        nx = out->plan.overview_w;
        ny = out->plan.overview_h;
    } else if (ok) {
        image_preprocess pre = preprocessing(v->mm);
        ok = image_preprocess_size(&pre, rgb->width, rgb->height, &nx, &ny, err);
        out->embd.n_tokens = ok ? corral_mmproj_image_tokens(v->mm, nx, ny) : 0;
    }
    image_rgb_free(rgb);
    if (ok && !out->embd.n_tokens) {
        corral_error_set(err, "the projector takes no image of %u x %u pixels", nx, ny);
        ok = false;
    }
    *refused = !ok; /* every failure here is the image's: undecodable, or a size not taken */
    return ok;
}

/* The parts of a sliced kind's image under plan, each encoded, one after another in out. */
static bool encode_parts(prompt_vision *v, const image_rgb *rgb, const image_slice_plan *plan,
                         const corral_cancel *cancel, corral_image_embd *out, corral_error *err)
{
    image_preprocess pre = preprocessing(v->mm);
    image_pixels *parts[1 + IMAGE_MAX_SLICES];
    size_t n = parts_of(plan);
    if (!image_slices_run(&pre, plan, rgb, parts, err))
        return false;
    corral_image_embd each[1 + IMAGE_MAX_SLICES];
    memset(each, 0, sizeof each);
    bool ok = true;
    size_t total = 0;
    for (size_t k = 0; ok && k < n; k++) {
        ok = corral_mmproj_encode_cancellable(v->mm, parts[k]->data, parts[k]->nx, parts[k]->ny,
                                              v->n_threads, cancel, &each[k], err);
        total += ok ? each[k].n_tokens : 0;
    }
    size_t width = each[0].n_embd;
    if (ok && !(out->data = malloc(total * width * sizeof *out->data))) {
        corral_error_set(err, "out of memory");
        ok = false;
    }
    if (ok) {
        out->n_tokens = total;
        out->nx = (uint32_t)total;
        out->ny = 1;
        out->n_embd = (uint32_t)width;
        for (size_t k = 0, at = 0; k < n; at += each[k].n_tokens, k++)
            memcpy(out->data + at * width, each[k].data,
                   each[k].n_tokens * width * sizeof *out->data);
    }
    for (size_t k = 0; k < n; k++) {
        corral_image_embd_free(&each[k]);
        image_pixels_free(parts[k]);
    }
    return ok;
}

/* Whether cancel (NULL: never) asks the request's encoding to stop; err then says so. */
static bool cancelled(const corral_cancel *cancel, corral_error *err)
{
    if (!cancel || !cancel->requested(cancel->user))
        return false;
    corral_error_set(err, "%s", CORRAL_CANCELLED);
    return true;
}

/*
 * The cached embeddings of digest into out, looked up before and again after waiting for the
 * encode lock (another request may have encoded the same item meanwhile): true when the
 * cache answered, memory ran out or the request was cancelled while it waited (*ok says
 * which), the lock not held; false with the encode lock held, for the caller to encode and
 * release it.
 */
static bool cached_else_lock(prompt_vision *v, const image_digest *digest,
                             const corral_cancel *cancel, image_embd *out, bool *ok,
                             corral_error *err)
{
    bool failed;
    if (from_cache(v, digest, true, out, &failed, err) || failed) {
        *ok = !failed;
        return true;
    }
    pthread_mutex_lock(&v->encode_lock);
    bool gone = cancelled(cancel, err);
    if (gone || from_cache(v, digest, true, out, &failed, err) || failed) {
        pthread_mutex_unlock(&v->encode_lock);
        *ok = !gone && !failed;
        return true;
    }
    return false;
}

/* The embeddings of one image file's bytes (digest: theirs), from the cache or encoded;
 * *refused when it fails on the image itself (its decoding, slicing or preprocessing), not
 * on the projector's encoding, memory or the request's cancel. */
static bool encode_image(prompt_vision *v, const uint8_t *data, size_t len,
                         const image_digest *digest, const corral_cancel *cancel,
                         image_embd *out, bool *encoded, bool *refused, corral_error *err)
{
    *encoded = false;
    memset(out, 0, sizeof *out);
    bool ok;
    if (cached_else_lock(v, digest, cancel, out, &ok, err))
        return ok;
    image_rgb *rgb = image_decode(data, len, NULL, err);
    ok = rgb != NULL;
    *refused = !ok;
    if (ok && slices_images(v->mm)) {
        *refused = !(ok = plan_of(v->mm, rgb->width, rgb->height, &out->plan, err));
        ok = ok && encode_parts(v, rgb, &out->plan, cancel, &out->embd, err);
    } else if (ok) {
        image_pixels *pixels = preprocess(v->mm, rgb, err);
        *refused = !pixels;
        ok = pixels && corral_mmproj_encode_cancellable(v->mm, pixels->data, pixels->nx,
                                                        pixels->ny, v->n_threads, cancel,
                                                        &out->embd, err);
        image_pixels_free(pixels);
    }
    image_rgb_free(rgb);
    *encoded = ok;
    if (ok)
        keep_encoded(v, digest, out);
    pthread_mutex_unlock(&v->encode_lock);
    return ok;
}

/* A clip decoded and brought to the tower's rate; NULL with err (the clip's fault) when it
 * does not decode or is too long. */
static audio_pcm *clip_samples(const uint8_t *data, size_t len, corral_error *err)
{
    return audio_decode(data, len, AUDIO_MEL_RATE, AUDIO_MAX_CLIP_SECONDS, err);
}

/* The tokens of one clip's bytes (digest: theirs) without encoding it, from its length alone;
 * every failure is the clip's. */
static bool count_clip(prompt_vision *v, const uint8_t *data, size_t len,
                       const image_digest *digest, image_embd *out, bool *refused,
                       corral_error *err)
{
    memset(out, 0, sizeof *out);
    bool failed;
    bool cached = from_cache(v, digest, false, out, &failed, err);
    if (cached)
        return true;
    audio_pcm *pcm = clip_samples(data, len, err);
    *refused = true;
    if (!pcm)
        return false;
    size_t n = pcm->n_samples;
    audio_pcm_free(pcm);
    for (size_t s = 0; s < audio_mel_segments(n); s++)
        out->embd.n_tokens += corral_audio_tower_tokens(v->audio, audio_mel_segment_frames(n, s));
    if (!out->embd.n_tokens) { /* as audio_mel_compute refuses it */
        corral_error_set(err, "audio too short: %zu samples, at least %d are needed", n,
                         AUDIO_MEL_WINDOW / 2 + 1);
        return false;
    }
    *refused = false;
    return true;
}

/* The embeddings of one clip's bytes, from the cache or encoded segment by segment
 * (audio/mel.h); *refused when it fails on the clip itself (its decoding, or its length).
 * A clip cancelled part way is not kept. */
static bool encode_clip(prompt_vision *v, const uint8_t *data, size_t len,
                        const image_digest *digest, const corral_cancel *cancel,
                        image_embd *out, bool *encoded, bool *refused, corral_error *err)
{
    *encoded = false;
    memset(out, 0, sizeof *out);
    bool ok;
    if (cached_else_lock(v, digest, cancel, out, &ok, err))
        return ok;
    audio_pcm *pcm = clip_samples(data, len, err);
    audio_mel *mel = pcm ? audio_mel_compute(pcm->samples, pcm->n_samples, err) : NULL;
    audio_pcm_free(pcm);
    *refused = !mel;
    ok = mel && corral_audio_tower_encode_segments(v->audio, mel->data, mel->segment_frames,
                                                   mel->n_segments, v->n_threads, cancel,
                                                   &out->embd, err);
    audio_mel_free(mel);
    *encoded = ok;
    if (ok)
        keep_encoded(v, digest, out);
    pthread_mutex_unlock(&v->encode_lock);
    return ok;
}

/* One item's bytes as an image or a clip, as its first bytes say, refused when the model
 * takes no such item. *clip: whether it is one. */
static bool media_item(prompt_vision *v, const uint8_t *data, size_t len,
                       const image_digest *digest, bool encode, const corral_cancel *cancel,
                       image_embd *out, bool *encoded, bool *clip, bool *refused,
                       corral_error *err)
{
    *encoded = false;
    *clip = audio_sniff(data, len) != AUDIO_NOT_AUDIO;
    memset(out, 0, sizeof *out);
    if (*clip && !v->audio) {
        *refused = true;
        if (v->audio_error[0])
            corral_error_set(err, "the model's audio tower cannot be used: %s", v->audio_error);
        else
            corral_error_set(err, "model does not support audio");
        return false;
    }
    if (!*clip && !v->mm) {
        *refused = true;
        corral_error_set(err, "model does not support images");
        return false;
    }
    if (!*clip && len > PROMPT_MAX_IMAGE_BYTES) { /* decoded under the larger clip cap */
        *refused = true;
        corral_error_set(err, "decoded data larger than %u bytes", PROMPT_MAX_IMAGE_BYTES);
        return false;
    }
    if (*clip)
        return encode ? encode_clip(v, data, len, digest, cancel, out, encoded, refused, err)
                      : count_clip(v, data, len, digest, out, refused, err);
    return encode ? encode_image(v, data, len, digest, cancel, out, encoded, refused, err)
                  : count_image(v, data, len, digest, out, refused, err);
}

void prompt_media_refusal(const json_t *items, corral_error *err)
{
    bool audio = false;
    for (size_t i = 0; !audio && i < json_array_size(items); i++) {
        const char *data = json_string_value(json_object_get(json_array_get(items, i), "data"));
        size_t len = 0;
        /* a media item's first bytes say what it is: 16 base64 letters hold 12 of them */
        uint8_t *head = data ? util_base64_decode(data, strlen(data) < 16 ? strlen(data) : 16,
                                                  16, &len, NULL)
                             : NULL;
        audio = head && audio_sniff(head, len) != AUDIO_NOT_AUDIO;
        free(head);
    }
    corral_error_set(err, "model does not support %s", audio ? "audio" : "images");
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

/* Append the ids of text (len bytes) to ids; start: the text begins the prompt
 * (corral_tokenize_prompt's one BOS). */
static bool append_text(const corral_vocab *vocab, const char *text, size_t len, bool add_special,
                        bool start, corral_token **ids, size_t *cap, size_t *n, corral_error *err)
{
    size_t need = len + 4, got = 0;
    for (;;) {
        if (!grow(ids, cap, *n, need, err))
            return false;
        bool ok = start ? corral_tokenize_prompt(vocab, text, len, add_special, *ids + *n, need,
                                                 &got, err)
                        : corral_tokenize(vocab, text, len, add_special, true, *ids + *n, need,
                                          &got, err);
        if (!ok)
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
                          size_t b_len, bool add_special, bool start, corral_token **ids,
                          size_t *cap, size_t *n, corral_error *err)
{
    char *text = malloc(a_len + b_len + 1);
    if (!text) {
        corral_error_set(err, "out of memory");
        return false;
    }
    memcpy(text, a, a_len);
    memcpy(text + a_len, b, b_len);
    bool ok = append_text(vocab, text, a_len + b_len, add_special, start, ids, cap, n, err);
    free(text);
    return ok;
}

/*
 * One image's parts into the ids and list (at *n_list): each part's text (the first part's
 * went with the prompt text before the image), then its pseudo-ids, drawn from the image's
 * digest and the token's place in the image so that the same image gives the same run; each
 * part an entry of its own with its rows of the image's embeddings (with !encode, only their
 * count). One part keeps the embeddings' grid as the encoder made it.
 */
static bool add_parts(prompt_vision *v, const corral_vocab *vocab, image_embd *got,
                      bool encoded, bool encode, uint64_t seed, corral_token **ids, size_t *cap,
                      size_t *n, prompt_image *list, size_t *n_list, corral_error *err)
{
    size_t n_parts = parts_of(&got->plan), offset = 0;
    for (size_t k = 0; k < n_parts; k++) {
        size_t nt = n_parts == 1 ? got->embd.n_tokens : part_tokens(v->mm, &got->plan, k);
        if (offset + nt > got->embd.n_tokens) {
            corral_error_set(err, "the image's parts hold fewer embeddings than their tokens");
            return false;
        }
        if (k > 0) {
            const char *text = corral_mmproj_part_text(v->mm, got->plan.cols, got->plan.rows, k);
            if (!append_text(vocab, text, strlen(text), false, false, ids, cap, n, err))
                return false;
        }
        if (!grow(ids, cap, *n, nt, err))
            return false;
        prompt_image *entry = &list[(*n_list)++];
        entry->at = *n;
        entry->encoded = encoded && k == 0;
        if (n_parts == 1) {
            entry->embd = got->embd; /* moved */
            got->embd = (corral_image_embd){0};
        } else if (!encode) {
            entry->embd.n_tokens = nt;
        } else {
            size_t width = got->embd.n_embd;
            entry->embd = (corral_image_embd){.n_tokens = nt, .nx = (uint32_t)nt, .ny = 1,
                                              .n_embd = (uint32_t)width};
            if (!(entry->embd.data = malloc(nt * width * sizeof *entry->embd.data))) {
                corral_error_set(err, "out of memory");
                return false;
            }
            memcpy(entry->embd.data, got->embd.data + offset * width,
                   nt * width * sizeof *entry->embd.data);
        }
        for (size_t t = 0; t < nt; t++)
            (*ids)[(*n)++] = -1 - (corral_token)(mix64(seed + offset + t) & 0x7fffffff);
        offset += nt;
    }
    return true;
}

/* prompt_vision_tokens; with !encode, each image's embd has its n_tokens only. */
static corral_token *vision_ids(prompt_vision *v, const corral_vocab *vocab, const char *prompt,
                                const json_t *images, bool add_special, size_t reserve,
                                bool encode, const corral_cancel *cancel, size_t *n,
                                prompt_image **out_images, size_t *n_images, bool *refused,
                                corral_error *err)
{
    size_t count = json_array_size(images), prompt_len = strlen(prompt), cap = reserve + 64;
    size_t done = 0; /* prompt bytes tokenized so far */
    *refused = false;
    if (encode && count > PROMPT_MAX_IMAGES) { /* counting a long chat's history may see more */
        *refused = true;
        corral_error_set(err, "at most %d images or audio clips per request", PROMPT_MAX_IMAGES);
        return NULL;
    }
    corral_token *ids = malloc(cap * sizeof *ids);
    /* a sliced image is an entry per part */
    prompt_image *list = calloc(count ? count * (1 + IMAGE_MAX_SLICES) : 1, sizeof *list);
    size_t n_list = 0;
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
            *refused = true;
            ok = false;
            break;
        }
        size_t len = 0;
        uint8_t *bytes = util_base64_decode(data, strlen(data), AUDIO_MAX_CLIP_BYTES, &len, err);
        *refused = !(ok = bytes != NULL);
        image_digest digest = {{0}};
        ok = ok && digest_of(v->sha256, bytes, len, &digest, err);
        image_embd got;
        memset(&got, 0, sizeof got);
        bool encoded = false, clip = false;
        ok = ok && media_item(v, bytes, len, &digest, encode, cancel, &got, &encoded, &clip,
                              refused, err);
        free(bytes);
        if (ok) { /* the text before the item, and its first part's (the plan's) marks */
            const char *lead = clip ? corral_audio_tower_begin(v->audio)
                                    : corral_mmproj_part_text(v->mm, got.plan.cols,
                                                              got.plan.rows, 0);
            char *text = NULL;
            size_t text_len = strlen(after_mark) + ((size_t)at - done);
            ok = (text = malloc(text_len + 1)) != NULL;
            if (ok) {
                snprintf(text, text_len + 1, "%s%.*s", after_mark, (int)((size_t)at - done),
                         prompt + done);
                ok = append_joined(vocab, text, text_len, lead, strlen(lead),
                                   add_special && i == 0, i == 0, &ids, &cap, n, err);
                free(text);
            } else {
                corral_error_set(err, "out of memory");
            }
        }
        ok = ok && add_parts(v, vocab, &got, encoded, encode, digest_seed(&digest), &ids, &cap, n, list, &n_list,
                             err);
        corral_image_embd_free(&got.embd);
        done = (size_t)at;
        if (ok)
            after_mark = clip ? corral_audio_tower_end(v->audio)
                              : corral_mmproj_part_text(v->mm, got.plan.cols, got.plan.rows,
                                                        parts_of(&got.plan));
    }
    ok = ok && append_joined(vocab, after_mark, strlen(after_mark), prompt + done,
                             prompt_len - done, add_special && count == 0, count == 0, &ids,
                             &cap, n, err);
    if (!ok) {
        free(ids);
        prompt_images_free(list, n_list);
        return NULL;
    }
    *n -= reserve;
    *out_images = list;
    *n_images = n_list;
    return ids;
}

corral_token *prompt_vision_tokens(prompt_vision *v, const corral_vocab *vocab,
                                   const char *prompt, const json_t *images, bool add_special,
                                   size_t reserve, const corral_cancel *cancel, size_t *n,
                                   prompt_image **out_images, size_t *n_images, bool *refused,
                                   corral_error *err)
{
    return vision_ids(v, vocab, prompt, images, add_special, reserve, true, cancel, n,
                      out_images, n_images, refused, err);
}

bool prompt_vision_count(prompt_vision *v, const corral_vocab *vocab, const char *prompt,
                         const json_t *images, bool add_special, prompt_count *out,
                         bool *refused, corral_error *err)
{
    prompt_image *list = NULL;
    size_t n_images = 0;
    corral_token *ids = vision_ids(v, vocab, prompt, images, add_special, 0, false, NULL,
                                   &out->n_tokens, &list, &n_images, refused, err);
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
    /* a clip's tokens are causal: they go through any batch */
    return v->mm ? corral_mmproj_batch_tokens(v->mm, model) : 0;
}
