/*
 * Images and audio clips in a completion prompt, on the runner's side: the projector and the
 * model file's audio tower (Gemma 4's) loaded once; each media item told by its first bytes
 * (audio/audio.h: WAV, FLAC, MP3, Ogg; anything else is an image), decoded, preprocessed and
 * encoded into text-model embeddings (a few recent ones kept, so the same item in the next
 * turn is not encoded again), and the prompt's token ids with a run of pseudo-ids standing in
 * for each item's embeddings. The pseudo-ids are negative, so
 * they never equal a real token id, and are derived from a hash of the image's bytes, so the
 * same image at the same place gives the same run and the slots' common-prefix reuse keeps
 * its KV cells.
 */
#ifndef CORRAL_RUNNER_PROMPT_IMAGES_H
#define CORRAL_RUNNER_PROMPT_IMAGES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/engine.h"

/* Most media items one request may carry, and the most bytes one image file may have (a
 * clip's bytes and length are capped by audio.h's AUDIO_MAX_CLIP_BYTES and
 * AUDIO_MAX_CLIP_SECONDS). */
#define PROMPT_MAX_IMAGES 16
#define PROMPT_MAX_IMAGE_BYTES (20u << 20)
/* Recent images' and clips' embeddings kept: a conversation's turns each send all its media
 * again. The cache holds at most the bytes of this many of the largest image's embeddings,
 * or of a 30-second clip's where those are larger (a longer clip takes the room of several,
 * one longer than all of it is not kept), which is what the server's memory estimate counts
 * (memory_estimate_image_cache_bytes, memory_estimate_clip_cache_bytes). */
#define PROMPT_CACHED_IMAGES 4

/* An image's embeddings and where its pseudo-ids start in the ids (reserved ones counted). */
typedef struct prompt_image {
    size_t at;
    corral_image_embd embd;
    bool encoded; /* by this request (false: the cache had it) */
} prompt_image;

typedef struct prompt_vision prompt_vision;

/* The projector at path (NULL: none) and the audio tower in the model file at model_path
 * (where it has one), checked against model; NULL with err, or NULL with err's message empty
 * when there is neither. A tower that does not load or fit is no error: the model then takes
 * no audio, prompt_vision_audio_error says why, and a clip's refusal says it too. */
prompt_vision *prompt_vision_create(const char *path, const char *model_path,
                                    const corral_model *model, int n_threads, corral_error *err);
/* Whether the model takes audio clips; why the tower its file carries is not used (NULL:
 * none, or it is used). */
bool prompt_vision_takes_audio(const prompt_vision *v);
const char *prompt_vision_audio_error(const prompt_vision *v);
/* The refusal of media items ([{"data": base64}]) for a model that takes none: "model does not
 * support audio" when one is a clip, else "... images". */
void prompt_media_refusal(const json_t *items, corral_error *err);
/* The device memory the projector's tower takes on a GPU (device as corral_context_params'),
 * and the tower there from now on (corral_mmproj_gpu_bytes, corral_mmproj_use_gpu); false
 * with the reason when it runs on the CPU only, or there is no device. */
bool prompt_vision_gpu_bytes(const prompt_vision *v, int device, uint64_t *out,
                             corral_error *err);
bool prompt_vision_use_gpu(prompt_vision *v, int device, corral_error *err);
/* The same for the model's audio tower's conformer blocks (corral_audio_tower_gpu_bytes,
 * corral_audio_tower_use_gpu); false with the reason when there is no tower, it runs on the
 * CPU only, or there is no device. */
bool prompt_vision_audio_gpu_bytes(const prompt_vision *v, int device, uint64_t *out,
                                   corral_error *err);
bool prompt_vision_audio_use_gpu(prompt_vision *v, int device, corral_error *err);
void prompt_vision_free(prompt_vision *v);

/* Is id one of an image's pseudo-ids? */
static inline bool prompt_is_image_id(corral_token id)
{
    return id < 0;
}

/*
 * The ids of prompt with media items ([{"data": base64, "at": byte offset into prompt}],
 * offsets in order) in place: the text before each item with the projector's begin-of-image
 * text (a clip's: the audio tower's begin-of-audio text), the item's pseudo-ids, its end text
 * with what follows. BOS first with
 * add_special; `reserve` free ids at the front. *images (n_images of them, as many as the
 * array) gets each image's embeddings; free them with prompt_images_free. NULL with err
 * (a message a client can act on) for bad base64, an undecodable image or bad offsets.
 * *refused says whether a failure is the request's (too many items, bad offsets or base64,
 * an image that does not decode or whose size or shape the projector does not take, a clip
 * that does not decode or is too long, an item of a kind the model does not take) rather
 * than the runner's (memory, the projector's encoding).
 *
 * Items are encoded one at a time across all requests, an item already cached is copied
 * without waiting for another request's encoding, and cancel (NULL: never) stops this
 * request's: asked before each block of a tower, each part of an image and each segment of a
 * clip, and once more when the encoding's turn comes; err then says CORRAL_CANCELLED and
 * nothing half-encoded is cached.
 */
corral_token *prompt_vision_tokens(prompt_vision *v, const corral_vocab *vocab,
                                   const char *prompt, const json_t *images, bool add_special,
                                   size_t reserve, const corral_cancel *cancel, size_t *n,
                                   prompt_image **out_images, size_t *n_images, bool *refused,
                                   corral_error *err);

void prompt_images_free(prompt_image *images, size_t n);

/* What prompt_vision_tokens makes of a prompt, in numbers. */
typedef struct prompt_count {
    size_t n_tokens;       /* all its ids, the images' too */
    size_t n_image_tokens; /* the images' */
    size_t largest_image;  /* the most tokens one image has */
} prompt_count;

/* prompt_vision_tokens' numbers (no reserve) without encoding the images (a cached image's
 * embeddings are not copied; another is decoded only to know its size), for any number of
 * images. false with err and *refused as prompt_vision_tokens. */
bool prompt_vision_count(prompt_vision *v, const corral_vocab *vocab, const char *prompt,
                         const json_t *images, bool add_special, prompt_count *out,
                         bool *refused, corral_error *err);

/* The batch tokens the context needs for this projector's images with model
 * (corral_mmproj_batch_tokens). */
uint32_t prompt_vision_batch_tokens(const prompt_vision *v, const corral_model *model);

/* The prefix of a prompt that reuse may keep: prefix, or the start of the image it would cut. */
size_t prompt_images_safe_prefix(const prompt_image *images, size_t n_images, size_t prefix);

#endif
