/*
 * Image and audio paths in prompts (see prompt_images.h). A path candidate starts where a word
 * starts (or after a quote) and runs to the first media extension that ends a word: the shortest
 * such run, so "./a.png and ./b.png" names two files. Escaped spaces ("\ ") are unescaped
 * and "~/" is the home directory before the file is opened.
 */
#include "cli/prompt_images.h"

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "audio/audio.h"
#include "util/base64.h"
#include "util/file.h"

static const char *const extensions[] = {".jpg", ".jpeg", ".png", ".webp", ".wav"};

static bool starts_path(const char *p)
{
    return p[0] == '/' || strncmp(p, "./", 2) == 0 || strncmp(p, "../", 3) == 0 ||
           strncmp(p, "~/", 2) == 0;
}

static bool is_word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Where the shortest media path starting at p ends (one past its extension), or NULL. A
 * path is at most PATH_MAX bytes: a long prompt full of slashes stays linear. */
static const char *path_end(const char *p)
{
    for (const char *q = p; *q && *q != '\n' && q - p < PATH_MAX; q++) {
        if (*q != '.')
            continue;
        for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++) {
            size_t n = strlen(extensions[i]);
            if (strncasecmp(q, extensions[i], n) == 0 && !is_word_char(q[n]))
                return q + n;
        }
    }
    return NULL;
}

/* The file name a path's text stands for: "\ " unescaped, "~/" expanded; malloc'ed. */
static char *file_name(const char *p, size_t n)
{
    const char *home = getenv("HOME");
    bool tilde = n >= 2 && p[0] == '~' && home;
    size_t cap = n + 1 + (tilde ? strlen(home) : 0);
    char *out = malloc(cap), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    if (tilde) {
        o += snprintf(o, cap, "%s", home);
        i = 1;
    }
    for (; i < n; i++) {
        if (p[i] == '\\' && i + 1 < n && p[i + 1] == ' ')
            i++;
        *o++ = p[i];
    }
    *o = '\0';
    return out;
}

static bool is_image(const uint8_t *b, size_t n)
{
    return (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) ||
           (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) ||
           (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0);
}

/* Read name as an image or a WAV clip and append it to images (*audio says which). 1:
 * attached, 0: no such file, -1: error. */
static int attach(const char *name, json_t *images, bool *audio, corral_error *err)
{
    struct stat st;
    if (stat(name, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return 0;
    size_t n = 0;
    corral_error read_err = {{0}};
    uint8_t *bytes = (uint8_t *)util_read_file(name, PROMPT_IMAGE_MAX_BYTES, &n, &read_err);
    if (!bytes) {
        corral_error_set(err, "couldn't process file: %s", read_err.message);
        return -1;
    }
    *audio = audio_sniff(bytes, n) == AUDIO_WAV;
    if (!*audio && !is_image(bytes, n)) {
        free(bytes);
        corral_error_set(err, "couldn't process file '%s': not a JPEG, PNG, WebP or WAV file",
                         name);
        return -1;
    }
    char *text = util_base64_encode(bytes, n);
    free(bytes);
    if (!text || json_array_append_new(images, json_string(text)) != 0) {
        free(text);
        corral_error_set(err, "out of memory");
        return -1;
    }
    free(text);
    return 1;
}

bool prompt_images_starts_with_file(const char *prompt)
{
    const char *end = starts_path(prompt) ? path_end(prompt) : NULL;
    char *name = end ? file_name(prompt, (size_t)(end - prompt)) : NULL;
    struct stat st;
    bool exists = name && stat(name, &st) == 0 && S_ISREG(st.st_mode);
    free(name);
    return exists;
}

bool prompt_images_extract(const char *prompt, char **text, json_t *images, FILE *notice,
                           corral_error *err)
{
    size_t len = strlen(prompt), n_images = 0;
    char *out = malloc(len + 1);
    if (!out) {
        corral_error_set(err, "out of memory");
        return false;
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        bool word_start = i == 0 || isspace((unsigned char)prompt[i - 1]);
        char quote = (prompt[i] == '\'' || prompt[i] == '"') && word_start ? prompt[i] : 0;
        const char *start = prompt + i + (quote ? 1 : 0);
        const char *end = (word_start || quote) && starts_path(start) ? path_end(start) : NULL;
        int attached = 0;
        bool audio = false;
        if (end) {
            char *name = file_name(start, (size_t)(end - start));
            if (!name) {
                corral_error_set(err, "out of memory");
                attached = -1;
            } else if ((attached = attach(name, images, &audio, err)) == 1) {
                if (++n_images > PROMPT_IMAGE_MAX_COUNT) {
                    corral_error_set(err, "at most %d images and clips in one prompt",
                                     PROMPT_IMAGE_MAX_COUNT);
                    attached = -1;
                } else if (notice) {
                    fprintf(notice, "Added %s '%s'\n", audio ? "audio" : "image", name);
                }
            }
            free(name);
        }
        if (attached < 0) {
            free(out);
            return false;
        }
        if (attached == 1) {
            i = (size_t)(end - prompt) + (quote && *end == quote ? 1 : 0);
            continue;
        }
        out[o++] = prompt[i++];
    }
    /* trimmed, as ollama leaves the prompt once the paths are gone */
    size_t a = 0;
    while (a < o && isspace((unsigned char)out[a]))
        a++;
    while (o > a && isspace((unsigned char)out[o - 1]))
        o--;
    memmove(out, out + a, o - a);
    out[o - a] = '\0';
    *text = out;
    return true;
}
