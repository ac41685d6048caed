/*
 * A request's media on their way to the runner: images, and audio clips, which travel in the
 * same lists (ollama's `images` fields carry both) and are told apart by their bytes. Each is
 * checked first (base64 that decodes to an image Corral can read, within the decoders'
 * limits, or to a file with an audio signature, audio/audio.h: otherwise a 400); the
 * runner decodes audio itself. The prompt
 * templates then see a marker where each image goes: "[img]" in a message's content (or a
 * completion's prompt) places its next image there, as ollama does, else the markers go in
 * front of the text. A marker holds a random per-request nonce, so no text a client sends
 * can pass for one; after rendering, the markers are cut out of the prompt and the runner
 * gets each image with the byte offset where it goes.
 */
#ifndef CORRAL_SERVER_CORE_IMAGE_INPUT_H
#define CORRAL_SERVER_CORE_IMAGE_INPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/core/chat_request.h"

/* The largest image file a request may send (decoded from base64). */
#define IMAGE_INPUT_MAX_BYTES (20u << 20)

typedef struct image_input {
    char nonce[17];
    const chat_image **images; /* in the order of their markers' numbers (not owned) */
    size_t n_images;
    size_t n_audio; /* how many of them are audio */
} image_input;

/* Does the request carry any image? */
bool image_input_present(const chat_request *req);

/* Whether a completion, or one message of a chat, carries more than one image (what ollama
 * refuses for mllama, whose images go one to a message). */
bool image_input_more_than_one(const chat_request *req);

/* Whether a system or developer message of req carries an image, which a renderer whose
 * system turn is text only refuses (corral_renderer.text_only_system): then message is the
 * 400's, in ollama's words, naming the first such message's role. */
bool image_input_in_system(const chat_request *req, char *message, size_t size);

/* Check every media item of req, count the audio ones and number them all; false with a
 * 400's message (or out of memory). Items that are not audio are decoded as images only
 * with decode_images: a model without a projector refuses every image anyway, in ollama's
 * words, whatever its bytes. */
bool image_input_prepare(image_input *in, const chat_request *req, bool decode_images,
                         char *message, size_t size);
void image_input_clear(image_input *in);

/* Markers into a template input (chat_request_template_input's: each message's content, or
 * the prompt), or into a raw prompt (*raw, replaced). spaced: markers put in front of a text
 * that starts with a character other than white space are followed by a space, as ollama's
 * renderers that write image tags place them (corral_renderer.spaced_media); its templates
 * get none. False when out of memory. */
bool image_input_mark(const image_input *in, const chat_request *req, json_t *template_input,
                      bool spaced);
bool image_input_mark_raw(const image_input *in, char **raw);

/* Cut the markers out of prompt (in place) and answer the runner's "images" array: the
 * images whose markers the rendered prompt holds, in prompt order, each with the byte offset
 * where its marker was. An image whose marker the template dropped is left out. NULL when
 * out of memory. */
json_t *image_input_extract(const image_input *in, char *prompt);

#endif
