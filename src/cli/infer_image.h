/*
 * `corral infer --mmproj` and `--audio`: a prompt with one image at its "<__media__>" marker, evaluated as
 * the text before it (with the projector's begin-of-image text), the image's embeddings, and
 * the text after it (with the end-of-image text), as llama.cpp's multimodal library splits
 * it. The image is a file (--image: PNG, JPEG, WebP or GIF, decoded and preprocessed as the
 * projector wants) or already preprocessed pixels (--pixels, raw float32); --dump-pixels and
 * --dump-embd write what the encoder received and made. A projector that slices images
 * (minicpm-v) takes a file's overview and slices in turn, its texts between them, as the
 * library's chunks go; the dumps then hold every part's, one after another. With --audio the
 * item is a clip (WAV, FLAC or MP3) for the model file's own audio tower (Gemma 4's), between
 * the tower's begin- and end-of-audio texts; --dump-pixels then writes its log-mel frames.
 */
#ifndef CORRAL_CLI_INFER_IMAGE_H
#define CORRAL_CLI_INFER_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

typedef struct infer_image_options {
    const char *mmproj_path;
    const char *audio_path;  /* a clip for the model's audio tower, instead of an image */
    const char *model_path;  /* the model file, which carries that tower */
    const char *image_path;  /* an image file */
    const char *pixels_path; /* or float32, ny x nx x 3 */
    uint32_t pixels_nx, pixels_ny;
    const char *dump_pixels_path, *dump_embd_path;
    int n_threads;
} infer_image_options;

/* Parse "NXxNY" for --pixels-size; false after saying why. */
bool infer_image_parse_size(const char *text, uint32_t *nx, uint32_t *ny);

/*
 * Evaluate prompt (holding "<__media__>" once) with the image or clip into sequence 0 of ctx. On
 * success *text_ids holds the prompt's text tokens in order (n_text, for the sampler and
 * --ids; free it), *n_evaluated every token evaluated, image ones included, and the last
 * position's logits are corral_get_logits(ctx, *last_logits). False after printing why.
 */
bool infer_image_prompt(const infer_image_options *io, const corral_model *model,
                        corral_context *ctx, const char *prompt, corral_token **text_ids,
                        size_t *n_text, size_t *n_evaluated, size_t *last_logits);

#endif
