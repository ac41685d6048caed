/*
 * Image paths in a prompt, as ollama's CLI finds them for a model that sees images:
 * `corral run MODEL "what is in ./photo.jpg"` and the REPL attach each file named by a path
 * that starts with "/", "./", "../" or "~/" and ends in .jpg, .jpeg, .png or .webp (any case;
 * spaces may appear, escaped with a backslash or not, and the path may be quoted). The path
 * leaves the prompt and the file's bytes go with the request as a base64 image. A path that
 * names no file stays in the prompt as text.
 */
#ifndef CORRAL_CLI_PROMPT_IMAGES_H
#define CORRAL_CLI_PROMPT_IMAGES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "corral/error.h"

#define PROMPT_IMAGE_MAX_BYTES ((size_t)100 << 20) /* ollama's limit on an image file */
#define PROMPT_IMAGE_MAX_COUNT 16

/*
 * The prompt without the image paths it names (*text, malloc'ed, trimmed) and the images as
 * base64 strings appended to images (a JSON array). Each attached file is announced on notice
 * ("Added image 'PATH'") when notice is not NULL. false with err set when a named file cannot
 * be read, is larger than PROMPT_IMAGE_MAX_BYTES, is not a JPEG, PNG or WebP image, or when
 * there are more than PROMPT_IMAGE_MAX_COUNT.
 */
bool prompt_images_extract(const char *prompt, char **text, json_t *images, FILE *notice,
                           corral_error *err);

/*
 * Whether the prompt's first word is a path to an image file that exists ("/tmp/cat.png what
 * is this?"): such a line in the REPL is a prompt, not a slash command.
 */
bool prompt_images_starts_with_file(const char *prompt);

#endif
