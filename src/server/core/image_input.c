/*
 * A request's media (images and audio), checked and placed in the prompt by per-request
 * markers (image_input.h).
 */
#include "server/core/image_input.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "audio/audio.h"
#include "image/image.h"
#include "util/base64.h"

#define PLACEHOLDER "[img]"

bool image_input_present(const chat_request *req)
{
    for (size_t i = 0; i < req->n_messages; i++)
        if (req->messages[i].n_images > 0)
            return true;
    return req->n_images > 0;
}

bool image_input_more_than_one(const chat_request *req)
{
    for (size_t i = 0; i < req->n_messages; i++)
        if (req->messages[i].n_images > 1)
            return true;
    return req->n_images > 1;
}

bool image_input_in_system(const chat_request *req, char *message, size_t size)
{
    for (size_t i = 0; i < req->n_messages; i++) {
        const chat_message *m = &req->messages[i];
        if (m->n_images > 0 && (!strcmp(m->role, "system") || !strcmp(m->role, "developer"))) {
            snprintf(message, size, "%s message cannot contain images", m->role);
            return true;
        }
    }
    return false;
}

/* A client's media item: base64 of an audio file (*audio set), or of an image the decoders
 * read within their limits (decoded only with decode_images). */
static bool check_item(const chat_image *image, size_t index, bool decode_images, bool *audio,
                       char *message, size_t size)
{
    corral_error err = {{0}};
    size_t len;
    uint8_t *bytes = util_base64_decode(image->base64, image->len, AUDIO_MAX_CLIP_BYTES,
                                        &len, &err);
    if (!bytes) {
        snprintf(message, size, "image %zu: invalid image data: %s", index, err.message);
        return false;
    }
    audio_container clip = audio_sniff(bytes, len);
    *audio = clip != AUDIO_NOT_AUDIO;
    if (*audio) { /* the runner decodes it; Ogg it would refuse (audio.h) */
        free(bytes);
        if (clip == AUDIO_OGG)
            snprintf(message, size, "image %zu: Ogg audio is not supported: send WAV, FLAC or "
                     "MP3", index);
        return clip != AUDIO_OGG;
    }
    if (!decode_images) {
        free(bytes);
        return true;
    }
    if (len > IMAGE_INPUT_MAX_BYTES) {
        free(bytes);
        snprintf(message, size, "image %zu: invalid image data: decoded data larger than %u "
                 "bytes", index, IMAGE_INPUT_MAX_BYTES);
        return false;
    }
    image_rgb *rgb = image_decode(bytes, len, NULL, &err);
    free(bytes);
    if (!rgb) {
        snprintf(message, size, "image %zu: %s", index, err.message);
        return false;
    }
    image_rgb_free(rgb);
    return true;
}

bool image_input_prepare(image_input *in, const chat_request *req, bool decode_images,
                         char *message, size_t size)
{
    memset(in, 0, sizeof *in);
    size_t n = req->n_images;
    for (size_t i = 0; i < req->n_messages; i++)
        n += req->messages[i].n_images;
    uint8_t random[8];
    if (getrandom(random, sizeof random, 0) != sizeof random ||
        !(in->images = calloc(n ? n : 1, sizeof *in->images))) {
        snprintf(message, size, "out of memory");
        return false;
    }
    for (size_t i = 0; i < sizeof random; i++)
        snprintf(in->nonce + 2 * i, 3, "%02x", random[i]);
    for (size_t i = 0; i < req->n_messages; i++)
        for (size_t k = 0; k < req->messages[i].n_images; k++)
            in->images[in->n_images++] = &req->messages[i].images[k];
    for (size_t k = 0; k < req->n_images; k++)
        in->images[in->n_images++] = &req->images[k];
    for (size_t i = 0; i < in->n_images; i++) {
        bool audio;
        if (!check_item(in->images[i], i, decode_images, &audio, message, size)) {
            image_input_clear(in);
            return false;
        }
        in->n_audio += audio;
    }
    return true;
}

void image_input_clear(image_input *in)
{
    free(in->images);
    memset(in, 0, sizeof *in);
}

/* Whether text starts with a character Go's utf8 and unicode packages read as a rune that is
 * not white space (ollama's test before it sets tags apart from a message's text). */
static bool starts_with_text(const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    if (n == 0)
        return false;
    if (s[0] < 0x80)
        return !(s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r'));
    /* a multi-byte rune: its length from the lead byte, then its continuation bytes */
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || n < len)
        return false; /* not UTF-8: Go's RuneError */
    uint32_t cp = s[0] & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return false;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffd)
        return false; /* overlong, a surrogate, past Unicode, or RuneError itself */
    return !(cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
             cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000);
}

/* text with markers first..first+count-1 placed: each at the first "[img]" left, else all
 * the rest in front, as ollama places its image tags; spaced: those in front are set apart
 * from text that starts with a character other than white space, as ollama's renderers set
 * them (image_input_mark). NULL when out of memory. */
static char *mark_text(const image_input *in, const char *text, size_t first, size_t count,
                       bool spaced)
{
    size_t len = strlen(text), marker_len = 64;
    char *out = malloc(len + count * (marker_len + 1) + 1);
    if (!out)
        return NULL;
    char *front = out;
    const char *rest = text;
    /* markers for placeholders go in place; the others in front, in order */
    size_t placed = 0;
    for (const char *p = text; placed < count && (p = strstr(p, PLACEHOLDER)); p += 5)
        placed++;
    for (size_t k = placed; k < count; k++)
        front += sprintf(front, "<corral-image-%s-%zu>", in->nonce, first + k);
    if (spaced && placed < count && starts_with_text(text))
        *front++ = ' '; /* the room of a marker's +1 */
    for (size_t k = 0; k < placed; k++) {
        const char *p = strstr(rest, PLACEHOLDER);
        memcpy(front, rest, (size_t)(p - rest));
        front += p - rest;
        front += sprintf(front, "<corral-image-%s-%zu>", in->nonce, first + k);
        rest = p + strlen(PLACEHOLDER);
    }
    strcpy(front, rest);
    return out;
}

static bool mark_field(const image_input *in, json_t *obj, const char *key, size_t first,
                       size_t count, bool spaced)
{
    const char *text = json_string_value(json_object_get(obj, key));
    char *marked = mark_text(in, text ? text : "", first, count, spaced);
    bool ok = marked && json_object_set_new(obj, key, json_string(marked)) == 0;
    free(marked);
    return ok;
}

bool image_input_mark(const image_input *in, const chat_request *req, json_t *template_input,
                      bool spaced)
{
    json_t *messages = json_object_get(template_input, "messages");
    size_t first = 0;
    for (size_t i = 0; i < req->n_messages; i++) {
        size_t count = req->messages[i].n_images;
        json_t *m = json_array_get(messages, i);
        /* placed here: the templates must not tag them again */
        if (count && (!mark_field(in, m, "content", first, count, spaced) ||
                      json_object_del(m, "images") != 0))
            return false;
        first += count;
    }
    return !req->n_images ||
           mark_field(in, template_input, "prompt", first, req->n_images, spaced);
}

bool image_input_mark_raw(const image_input *in, char **raw)
{
    char *marked = mark_text(in, *raw, 0, in->n_images, false);
    if (!marked)
        return false;
    free(*raw);
    *raw = marked;
    return true;
}

json_t *image_input_extract(const image_input *in, char *prompt)
{
    char prefix[40];
    int prefix_len = snprintf(prefix, sizeof prefix, "<corral-image-%s-", in->nonce);
    json_t *out = json_array();
    bool *used = calloc(in->n_images ? in->n_images : 1, sizeof *used);
    char *write = prompt;
    const char *read = prompt;
    bool ok = out && used;
    while (ok) {
        const char *m = strstr(read, prefix);
        size_t keep = m ? (size_t)(m - read) : strlen(read);
        memmove(write, read, keep);
        write += keep;
        if (!m)
            break;
        char *end;
        unsigned long index = strtoul(m + prefix_len, &end, 10);
        if (*end != '>' || index >= in->n_images) { /* not ours after all: keep the text */
            *write++ = *m;
            read = m + 1;
            continue;
        }
        read = end + 1;
        if (used[index]) /* a template that renders a message twice: the image goes once */
            continue;
        used[index] = true;
        const chat_image *image = in->images[index];
        ok = json_array_append_new(out, json_pack("{s:s%,s:I}", "data", image->base64,
                                                  image->len, "at",
                                                  (json_int_t)(write - prompt))) == 0;
    }
    *write = '\0';
    free(used);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}
