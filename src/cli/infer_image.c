/*
 * The media side of `corral infer` (infer_image.h): projector or audio tower loading, pixels
 * or log-mel frames in, the encoder's output out, and the prompt split around the item.
 */
#include "cli/infer_image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio/audio.h"
#include "audio/mel.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "image/slices.h"
#include "util/file.h"

/* An image file's bytes at most: far above any photo a phone takes. */
#define MAX_IMAGE_FILE_BYTES (64u << 20)

#define MEDIA_MARKER "<__media__>"

bool infer_image_parse_size(const char *text, uint32_t *nx, uint32_t *ny)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(text, &end, 10), y = 0;
    bool ok = !errno && end != text && *end == 'x';
    if (ok) {
        const char *p = end + 1;
        y = strtoul(p, &end, 10);
        ok = !errno && end != p && *end == '\0';
    }
    if (!ok || x == 0 || y == 0 || x > 65536 || y > 65536) {
        fprintf(stderr, "corral infer: --pixels-size expects WIDTHxHEIGHT, got '%s'\n", text);
        return false;
    }
    *nx = (uint32_t)x;
    *ny = (uint32_t)y;
    return true;
}

static bool write_floats(const char *path, const float *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, sizeof *data, n, f) == n;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "corral infer: cannot write %s: %s\n", path, strerror(errno));
    return ok;
}

/* The --image file decoded; NULL after saying why. */
static image_rgb *decoded_image(const infer_image_options *io)
{
    corral_error err;
    size_t len;
    char *data = util_read_file(io->image_path, MAX_IMAGE_FILE_BYTES, &len, &err);
    if (!data) {
        fprintf(stderr, "corral infer: cannot read image %s\n", err.message);
        return NULL;
    }
    image_rgb *rgb = image_decode((const uint8_t *)data, len, NULL, &err);
    free(data);
    if (!rgb)
        fprintf(stderr, "corral infer: %s: %s\n", io->image_path, err.message);
    return rgb;
}

/* --image: the file decoded and preprocessed as the projector says; *nx, *ny its size. */
static float *image_pixels_of(const infer_image_options *io, const corral_mmproj *mm,
                              uint32_t *nx, uint32_t *ny)
{
    corral_error err;
    image_rgb *rgb = decoded_image(io);
    if (!rgb)
        return NULL;
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    image_rgb_free(rgb);
    if (!pixels) {
        fprintf(stderr, "corral infer: %s: %s\n", io->image_path, err.message);
        return NULL;
    }
    float *data_out = pixels->data;
    *nx = pixels->nx;
    *ny = pixels->ny;
    pixels->data = NULL;
    image_pixels_free(pixels);
    return data_out;
}

/* The preprocessed pixels of --pixels: exactly nx * ny * 3 floats. */
static float *read_pixels(const infer_image_options *io)
{
    size_t want = (size_t)io->pixels_nx * io->pixels_ny * 3 * sizeof(float), len;
    corral_error err;
    char *data = util_read_file(io->pixels_path, want + 1, &len, &err);
    if (!data) {
        fprintf(stderr, "corral infer: cannot read pixels %s\n", err.message);
        return NULL;
    }
    if (len != want) {
        fprintf(stderr, "corral infer: %s holds %zu bytes, not the %zu of %u x %u x 3 floats\n",
                io->pixels_path, len, want, io->pixels_nx, io->pixels_ny);
        free(data);
        return NULL;
    }
    return (float *)data;
}

/* Tokenize text (len bytes) and evaluate it; appends its ids to *ids. add_special: the text
 * begins the prompt, with the one BOS every prompt has (corral_tokenize_prompt). */
static bool eval_text(const corral_vocab *vocab, corral_context *ctx, const char *text,
                      size_t len, bool add_special, corral_token **ids, size_t *n_ids,
                      size_t *n_last)
{
    corral_error err;
    size_t n = 0, cap = len + 8;
    corral_token *grown = realloc(*ids, (*n_ids + cap) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "corral infer: out of memory\n");
        return false;
    }
    *ids = grown;
    bool ok = add_special
                  ? corral_tokenize_prompt(vocab, text, len, true, grown + *n_ids, cap, &n, &err)
                  : corral_tokenize(vocab, text, len, false, true, grown + *n_ids, cap, &n, &err);
    if (!ok || n > cap) {
        fprintf(stderr, "corral infer: %s\n", n > cap ? "prompt too long" : err.message);
        return false;
    }
    if (n == 0)
        return true;
    corral_batch batch = {.n_tokens = n, .tokens = grown + *n_ids};
    if (!corral_decode(ctx, &batch, &err)) {
        fprintf(stderr, "corral infer: %s\n", err.message);
        return false;
    }
    *n_ids += n;
    *n_last = n - 1;
    return true;
}

/*
 * A projector that slices (minicpm-v): the --image file cut into its overview and slices
 * (image/slices.h), each encoded, evaluated in turn with the projector's text before each
 * part, as mtmd's chunks go. --dump-pixels and --dump-embd write every part's, one after
 * another.
 */
static bool sliced_prompt(const infer_image_options *io, const corral_mmproj *mm,
                          corral_context *ctx, const corral_vocab *vocab, const char *before,
                          size_t n_before, const char *after, corral_token **text_ids,
                          size_t *n_text, size_t *n_evaluated, size_t *last_logits)
{
    corral_error err;
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_rgb *rgb = decoded_image(io);
    image_slice_plan plan;
    image_pixels *parts[1 + IMAGE_MAX_SLICES] = {0};
    corral_image_embd embd[1 + IMAGE_MAX_SLICES];
    memset(embd, 0, sizeof embd);
    bool ok = rgb && image_plan_for_params(&params, rgb->width, rgb->height, &plan, &err) &&
              image_slices_run(&pre, &plan, rgb, parts, &err);
    if (rgb && !ok)
        fprintf(stderr, "corral infer: %s: %s\n", io->image_path, err.message);
    image_rgb_free(rgb);
    size_t n_parts = ok ? 1 + (size_t)plan.cols * plan.rows : 0, n_image = 0, last = 0;
    FILE *dump_pixels = NULL, *dump_embd = NULL;
    if (ok && io->dump_pixels_path && !(dump_pixels = fopen(io->dump_pixels_path, "wb")))
        ok = false;
    if (ok && io->dump_embd_path && !(dump_embd = fopen(io->dump_embd_path, "wb")))
        ok = false;
    for (size_t k = 0; ok && k < n_parts; k++) {
        size_t n = (size_t)parts[k]->nx * parts[k]->ny * 3;
        if (dump_pixels && fwrite(parts[k]->data, sizeof(float), n, dump_pixels) != n)
            ok = false;
        if (ok && !corral_mmproj_encode(mm, parts[k]->data, parts[k]->nx, parts[k]->ny,
                                        io->n_threads, &embd[k], &err)) {
            fprintf(stderr, "corral infer: %s\n", err.message);
            ok = false;
        }
        n = embd[k].n_tokens * embd[k].n_embd;
        if (ok && dump_embd && fwrite(embd[k].data, sizeof(float), n, dump_embd) != n)
            ok = false;
    }
    if (dump_pixels && fclose(dump_pixels) != 0)
        ok = false;
    if (dump_embd && fclose(dump_embd) != 0)
        ok = false;
    if (!ok && (dump_pixels || dump_embd))
        fprintf(stderr, "corral infer: cannot write the dumps: %s\n", strerror(errno));
    *text_ids = NULL;
    *n_text = 0;
    /* before + part 0's text, each part and the text after it (the last: with the prompt's) */
    for (size_t k = 0; ok && k <= n_parts; k++) {
        const char *mark = corral_mmproj_part_text(mm, plan.cols, plan.rows, k);
        size_t len = strlen(mark) + (k == 0 ? n_before : 0) + (k == n_parts ? strlen(after) : 0);
        char *text = malloc(len + 1);
        if (!text) {
            fprintf(stderr, "corral infer: out of memory\n");
            ok = false;
            break;
        }
        snprintf(text, len + 1, "%.*s%s%s", k == 0 ? (int)n_before : 0, before, mark,
                 k == n_parts ? after : "");
        ok = eval_text(vocab, ctx, text, len, k == 0, text_ids, n_text, &last);
        free(text);
        if (ok && k < n_parts) {
            if (!corral_decode_image(ctx, 0, &embd[k], &err)) {
                fprintf(stderr, "corral infer: %s\n", err.message);
                ok = false;
            }
            n_image += embd[k].n_tokens;
            last = embd[k].n_tokens - 1;
        }
    }
    for (size_t k = 0; k < 1 + IMAGE_MAX_SLICES; k++) {
        image_pixels_free(parts[k]);
        corral_image_embd_free(&embd[k]);
    }
    if (ok) {
        *n_evaluated = *n_text + n_image;
        *last_logits = last;
    } else {
        free(*text_ids);
        *text_ids = NULL;
    }
    return ok;
}

/* The --audio clip's embeddings from the model file's tower, and its begin and end texts;
 * false after printing why. */
static bool clip_embd(const infer_image_options *io, const corral_model *model,
                      corral_image_embd *out, const char **begin, const char **end)
{
    corral_error err = {{0}};
    bool absent = false;
    corral_audio_tower *tower = corral_audio_tower_load(io->model_path, &absent, &err);
    if (!tower) {
        fprintf(stderr, "corral infer: %s\n",
                absent ? "the model file carries no audio tower" : err.message);
        return false;
    }
    size_t len = 0;
    char *bytes = NULL;
    audio_pcm *pcm = NULL;
    audio_mel *mel = NULL;
    bool ok = corral_audio_tower_fits(tower, model, &err) &&
              (bytes = util_read_file(io->audio_path, AUDIO_MAX_CLIP_BYTES, &len, &err)) &&
              (pcm = audio_decode((const uint8_t *)bytes, len, AUDIO_MEL_RATE,
                                  AUDIO_MAX_CLIP_SECONDS, &err)) &&
              (mel = audio_mel_compute(pcm->samples, pcm->n_samples, &err)) &&
              corral_audio_tower_encode_segments(tower, mel->data, mel->segment_frames,
                                                 mel->n_segments, io->n_threads, NULL, out,
                                                 &err);
    if (!ok)
        fprintf(stderr, "corral infer: %s: %s\n", io->audio_path, err.message);
    if (ok && io->dump_pixels_path)
        ok = write_floats(io->dump_pixels_path, mel->data, mel->n_frames * mel->n_mel);
    if (ok && io->dump_embd_path)
        ok = write_floats(io->dump_embd_path, out->data, out->n_tokens * out->n_embd);
    *begin = corral_audio_tower_begin(tower);
    *end = corral_audio_tower_end(tower);
    audio_mel_free(mel);
    audio_pcm_free(pcm);
    free(bytes);
    corral_audio_tower_free(tower);
    return ok;
}

/* The prompt around one media item already encoded (embd, freed here; ok false: it was not):
 * before + begin, the item's embeddings, end + after. begin and end are static texts. */
static bool eval_around_item(const corral_model *model, corral_context *ctx, const char *prompt,
                             const char *marker, const char *begin, const char *end,
                             corral_image_embd *embd, bool ok, corral_token **text_ids,
                             size_t *n_text, size_t *n_evaluated, size_t *last_logits)
{
    size_t before = (size_t)(marker - prompt), after = strlen(marker + strlen(MEDIA_MARKER));
    char *text = ok ? malloc(before + after + strlen(begin) + strlen(end) + 1) : NULL;
    const corral_vocab *vocab = corral_model_vocab(model);
    corral_error err;
    size_t last = 0;
    *text_ids = NULL;
    *n_text = 0;
    if (ok && !text) {
        fprintf(stderr, "corral infer: out of memory\n");
        ok = false;
    }
    if (ok) {
        int len = sprintf(text, "%.*s%s", (int)before, prompt, begin);
        ok = eval_text(vocab, ctx, text, (size_t)len, true, text_ids, n_text, &last);
    }
    if (ok && !corral_decode_image(ctx, 0, embd, &err)) {
        fprintf(stderr, "corral infer: %s\n", err.message);
        ok = false;
    }
    last = embd->n_tokens - 1;
    if (ok) {
        int len = sprintf(text, "%s%s", end, marker + strlen(MEDIA_MARKER));
        ok = eval_text(vocab, ctx, text, (size_t)len, false, text_ids, n_text, &last);
    }
    if (ok) {
        *n_evaluated = *n_text + embd->n_tokens;
        *last_logits = last;
    } else {
        free(*text_ids);
        *text_ids = NULL;
    }
    free(text);
    corral_image_embd_free(embd);
    return ok;
}

/* The prompt around the --audio clip: before + begin-of-audio, the clip's embeddings (its
 * tokens causal), end-of-audio + after. */
static bool clip_prompt(const infer_image_options *io, const corral_model *model,
                        corral_context *ctx, const char *prompt, const char *marker,
                        corral_token **text_ids, size_t *n_text, size_t *n_evaluated,
                        size_t *last_logits)
{
    corral_image_embd embd = {0};
    const char *begin = "", *end = "";
    bool ok = clip_embd(io, model, &embd, &begin, &end);
    /* the tower's texts are static: they outlive it */
    return eval_around_item(model, ctx, prompt, marker, begin, end, &embd, ok, text_ids, n_text,
                            n_evaluated, last_logits);
}

bool infer_image_prompt(const infer_image_options *io, const corral_model *model,
                        corral_context *ctx, const char *prompt, corral_token **text_ids,
                        size_t *n_text, size_t *n_evaluated, size_t *last_logits)
{
    const char *marker = strstr(prompt, MEDIA_MARKER);
    if (!marker || strstr(marker + 1, MEDIA_MARKER)) {
        fprintf(stderr, "corral infer: with --mmproj or --audio the prompt must hold "
                        MEDIA_MARKER " once, where the item goes\n");
        return false;
    }
    if (io->audio_path) {
        if (io->mmproj_path || io->image_path || io->pixels_path) {
            fprintf(stderr, "corral infer: --audio takes no --mmproj, --image or --pixels\n");
            return false;
        }
        return clip_prompt(io, model, ctx, prompt, marker, text_ids, n_text, n_evaluated,
                           last_logits);
    }
    if (!io->image_path == !io->pixels_path) {
        fprintf(stderr, "corral infer: --mmproj needs --image FILE, or --pixels FILE "
                        "--pixels-size WxH\n");
        return false;
    }
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(io->mmproj_path, &err);
    if (!mm || !corral_mmproj_fits(mm, model, &err)) {
        fprintf(stderr, "corral infer: %s\n", err.message);
        corral_mmproj_free(mm);
        return false;
    }
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    if (io->image_path && params.max_slices > 0) {
        bool ok = sliced_prompt(io, mm, ctx, corral_model_vocab(model), prompt,
                                (size_t)(marker - prompt), marker + strlen(MEDIA_MARKER),
                                text_ids, n_text, n_evaluated, last_logits);
        corral_mmproj_free(mm);
        return ok;
    }
    uint32_t nx = io->pixels_nx, ny = io->pixels_ny;
    float *pixels = io->image_path ? image_pixels_of(io, mm, &nx, &ny) : read_pixels(io);
    corral_image_embd embd = {0};
    bool ok = pixels != NULL;
    if (ok && io->dump_pixels_path)
        ok = write_floats(io->dump_pixels_path, pixels, (size_t)nx * ny * 3);
    if (ok && !corral_mmproj_encode(mm, pixels, nx, ny, io->n_threads, &embd, &err)) {
        fprintf(stderr, "corral infer: %s\n", err.message);
        ok = false;
    }
    if (ok && io->dump_embd_path)
        ok = write_floats(io->dump_embd_path, embd.data, embd.n_tokens * embd.n_embd);
    ok = eval_around_item(model, ctx, prompt, marker, corral_mmproj_image_begin(mm),
                          corral_mmproj_image_end(mm), &embd, ok, text_ids, n_text, n_evaluated,
                          last_logits);
    free(pixels);
    corral_mmproj_free(mm);
    return ok;
}
