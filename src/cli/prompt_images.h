/*
 * Media paths in a prompt, as ollama's CLI finds them for a model that sees images or hears
 * audio: `corral run MODEL "what is in ./photo.jpg"` and the REPL attach each file named by a
 * path that starts with "/", "./", "../" or "~/" and ends in .jpg, .jpeg, .png, .webp or .wav
 * (any case; spaces may appear, escaped with a backslash or not, and the path may be quoted).
 * The path leaves the prompt and the file's bytes go with the request as a base64 media item
 * (ollama's `images`, which carry audio too). A path that names no file stays in the prompt
 * as text.
 */
#ifndef CORRAL_CLI_PROMPT_IMAGES_H
#define CORRAL_CLI_PROMPT_IMAGES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "corral/error.h"

#define PROMPT_IMAGE_MAX_BYTES ((size_t)100 << 20) /* ollama's limit on a media file */
#define PROMPT_IMAGE_MAX_COUNT 16

/*
 * The prompt without the media paths it names (*text, malloc'ed, trimmed) and the files as
 * base64 strings appended to images (a JSON array). Each attached file is announced on notice
 * ("Added image 'PATH'", "Added audio 'PATH'") when notice is not NULL. false with err set
 * when a named file cannot be read, is larger than PROMPT_IMAGE_MAX_BYTES, is not a JPEG, PNG
 * or WebP image nor a WAV clip, or when there are more than PROMPT_IMAGE_MAX_COUNT.
 */
bool prompt_images_extract(const char *prompt, char **text, json_t *images, FILE *notice,
                           corral_error *err);

/*
 * Whether the prompt's first word is a path to a media file that exists ("/tmp/cat.png what
 * is this?"): such a line in the REPL is a prompt, not a slash command.
 */
bool prompt_images_starts_with_file(const char *prompt);

#endif
