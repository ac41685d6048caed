/*
 * `corral infer MODEL.gguf "prompt"`: the developer's direct line to the engine. Tokenizes
 * (or takes --prompt-ids), evaluates the prompt in batches, samples and streams text, shifts
 * the context as ollama does when it fills, and reports speeds on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/infer_image.h"
#include "cli/device_option.h"
#include "corral/engine.h"
#include "util/file.h"

#define MAX_PROMPT_TOKENS (1u << 20)
#define MAX_LORAS 16

/* A --lora FILE[:SCALE]: the path is the first path_len bytes of spec. */
typedef struct lora_option {
    const char *spec;
    size_t path_len;
    float scale;
} lora_option;

typedef struct infer_options {
    const char *model_path;
    const char *prompt;
    const char *prompt_ids;
    const char *grammar_path;
    long n_predict;
    long num_keep;
    bool print_ids, print_logits, ignore_eos;
    lora_option loras[MAX_LORAS];
    size_t n_loras;
    corral_context_params ctx;
    device_option device;
    corral_sampler_params sampling;
    infer_image_options image;
} infer_options;

static void usage(FILE *out)
{
    fputs("Usage: corral infer MODEL.gguf \"prompt\" [options]\n"
          "  -n N                  tokens to generate (default 128; -1 = until end of text)\n"
          "  --prompt-ids 1,2,3    token ids instead of a prompt text, used as given\n"
          "  --ids                 print prompt and generated ids instead of text\n"
          "  --logits              print the logits of the last prompt position, one per line\n"
          "  --ignore-eos          keep generating after end-of-generation tokens\n"
          "  --grammar FILE        constrain the text to a GBNF grammar (start rule: root)\n"
          "  --lora FILE[:SCALE]   apply a LoRA adapter (GGUF) at SCALE (default 1); repeatable\n"
          "  -c, --ctx N           context length (default 4096, capped at the model's)\n"
          "  -b, --batch N         prompt batch size (default 512)\n"
          "  --keep N              tokens kept when the context shifts (default 4)\n"
          "  --kv TYPE             KV cache type: f16 (default), f32, q8_0, q4_0\n"
          "  -t, --threads N       threads (default: physical cores)\n"
          "  --cpu LEVEL           kernel level: scalar, avx2, avx512-novnni, avx512,\n"
          "                        avx512-vdpbf16ps\n"
          "  --mmproj FILE         a vision projector (GGUF); the prompt holds <__media__>\n"
          "  --image FILE          the image (PNG, JPEG, WebP, GIF) for <__media__>\n"
          "  --pixels FILE --pixels-size WxH   or the image preprocessed (float32, HxWx3)\n"
          "  --audio FILE          a clip (WAV, FLAC, MP3) for <__media__>, through the model\n"
          "                        file's own audio tower (Gemma 4 E2B/E4B)\n"
          "  --dump-pixels FILE  --dump-embd FILE   write the encoder's input / output\n"
          "                        (a clip's input: its log-mel frames)\n"
          "  --device DEV          cpu, or vulkan[:N] (every layer that fits on GPU N)\n"
          "  --gpu-layers N        the last N layers on the GPU (-1: all that fit)\n"
          "  --temperature X  --top-k N  --top-p X  --min-p X  --typical-p X  --seed N\n"
          "  --repeat-penalty X  --repeat-last-n N  --presence-penalty X  --frequency-penalty X\n",
          out);
}

static bool parse_long(const char *flag, const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end) {
        fprintf(stderr, "corral infer: %s expects an integer, got '%s'\n", flag, text);
        return false;
    }
    *out = v;
    return true;
}

static bool parse_float(const char *flag, const char *text, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(text, &end);
    if (errno || end == text || *end) {
        fprintf(stderr, "corral infer: %s expects a number, got '%s'\n", flag, text);
        return false;
    }
    *out = v;
    return true;
}

/* FILE or FILE:SCALE; a path that itself holds a ':' is taken whole unless what follows the
 * last ':' is a number. */
static bool parse_lora(infer_options *o, const char *value)
{
    if (o->n_loras == MAX_LORAS) {
        fprintf(stderr, "corral infer: at most %d --lora adapters\n", MAX_LORAS);
        return false;
    }
    lora_option *l = &o->loras[o->n_loras];
    *l = (lora_option){value, strlen(value), 1.0f};
    const char *colon = strrchr(value, ':');
    if (colon && colon[1]) {
        char *end;
        errno = 0;
        float scale = strtof(colon + 1, &end);
        if (!errno && !*end) {
            l->path_len = (size_t)(colon - value);
            l->scale = scale;
        }
    }
    if (l->path_len == 0) {
        fprintf(stderr, "corral infer: --lora expects FILE[:SCALE], got '%s'\n", value);
        return false;
    }
    o->n_loras++;
    return true;
}

/* Options that take a value; returns 1 when consumed, 0 when not one of these, -1 on error. */
static int parse_valued(infer_options *o, const char *flag, const char *value)
{
    long n;
    corral_sampler_params *s = &o->sampling;
    struct { const char *name; float *dst; } floats[] = {
        {"--temperature", &s->temperature}, {"--top-p", &s->top_p},
        {"--min-p", &s->min_p}, {"--typical-p", &s->typical_p},
        {"--repeat-penalty", &s->repeat_penalty}, {"--presence-penalty", &s->presence_penalty},
        {"--frequency-penalty", &s->frequency_penalty},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        if (strcmp(flag, floats[i].name) == 0)
            return parse_float(flag, value, floats[i].dst) ? 1 : -1;
    if (strcmp(flag, "--prompt-ids") == 0) {
        o->prompt_ids = value;
        return 1;
    }
    if (strcmp(flag, "--grammar") == 0) {
        o->grammar_path = value;
        return 1;
    }
    if (strcmp(flag, "--lora") == 0)
        return parse_lora(o, value) ? 1 : -1;
    const char **paths[] = {&o->image.mmproj_path, &o->image.image_path, &o->image.pixels_path,
                            &o->image.dump_pixels_path, &o->image.dump_embd_path,
                            &o->image.audio_path};
    const char *path_flags[] = {"--mmproj", "--image", "--pixels", "--dump-pixels",
                                "--dump-embd", "--audio"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(flag, path_flags[i]) == 0) {
            *paths[i] = value;
            return 1;
        }
    if (strcmp(flag, "--pixels-size") == 0)
        return infer_image_parse_size(value, &o->image.pixels_nx, &o->image.pixels_ny) ? 1 : -1;
    int device = device_option_parse(&o->device, "infer", flag, value);
    if (device != 0)
        return device;
    if (strcmp(flag, "--kv") == 0) {
        if (corral_kv_type_parse(value, &o->ctx.kv_type))
            return 1;
        fprintf(stderr, "corral infer: --kv expects f16, f32, q8_0 or q4_0, got '%s'\n", value);
        return -1;
    }
    if (strcmp(flag, "--cpu") == 0) {
        corral_error err;
        if (!corral_cpu_set_level(value, &err)) {
            fprintf(stderr, "corral infer: %s\n", err.message);
            return -1;
        }
        return 1;
    }
    const char *ints[] = {"-n", "-c", "--ctx", "-b", "--batch", "--keep", "-t", "--threads",
                          "--top-k", "--seed", "--repeat-last-n"};
    size_t which = 0;
    while (which < sizeof ints / sizeof ints[0] && strcmp(flag, ints[which]) != 0)
        which++;
    if (which == sizeof ints / sizeof ints[0])
        return 0;
    if (!parse_long(flag, value, &n))
        return -1;
    bool negative_ok = which == 0 || which == 9 || which == 10;
    if ((n < 0 && !negative_ok) || n > (1l << 24)) {
        fprintf(stderr, "corral infer: %s %ld is out of range\n", flag, n);
        return -1;
    }
    switch (which) {
    case 0: o->n_predict = n; break;
    case 1: case 2: o->ctx.n_ctx = (uint32_t)n; break;
    case 3: case 4: o->ctx.n_batch = (uint32_t)n; break;
    case 5: o->num_keep = n; break;
    case 6: case 7: o->ctx.n_threads = (int)n; break;
    case 8: s->top_k = (int32_t)n; break;
    case 9: s->seed = n; break;
    default: s->repeat_last_n = (int32_t)n; break;
    }
    return 1;
}

static int parse_args(infer_options *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--ids") == 0) {
            o->print_ids = true;
        } else if (strcmp(a, "--logits") == 0) {
            o->print_logits = true;
        } else if (strcmp(a, "--ignore-eos") == 0) {
            o->ignore_eos = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            if (i + 1 >= argc) {
                fprintf(stderr, "corral infer: %s needs a value\n", a);
                return 2;
            }
            int r = parse_valued(o, a, argv[i + 1]);
            if (r < 0)
                return 2;
            if (r == 0) {
                fprintf(stderr, "corral infer: unknown option '%s'\n", a);
                usage(stderr);
                return 2;
            }
            i++;
        } else if (!o->model_path) {
            o->model_path = a;
        } else if (!o->prompt) {
            o->prompt = a;
        } else {
            fprintf(stderr, "corral infer: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!o->model_path || (!o->prompt && !o->prompt_ids)) {
        usage(stderr);
        return 2;
    }
    if ((o->image.mmproj_path || o->image.audio_path) && (o->prompt_ids || !o->prompt)) {
        fprintf(stderr, "corral infer: --mmproj and --audio take a prompt text, not "
                        "--prompt-ids\n");
        return 2;
    }
    return -1;
}

static bool parse_id_list(const char *text, corral_token *ids, size_t max, size_t *n)
{
    *n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || *n >= max || (*end && *end != ',')) {
            fprintf(stderr, "corral infer: --prompt-ids expects comma-separated token ids\n");
            return false;
        }
        ids[(*n)++] = (corral_token)v;
        p = *end ? end + 1 : end;
    }
    return *n > 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void print_ids(const char *label, const corral_token *ids, size_t n)
{
    printf("%s:", label);
    for (size_t i = 0; i < n; i++)
        printf(" %d", ids[i]);
    putchar('\n');
}

/* Tokens for the prompt: parsed ids, or the tokenized text starting with the one BOS every
 * server prompt has (corral_tokenize_prompt: a "<s>" the text begins with is that BOS). */
static corral_token *prompt_tokens(const infer_options *o, const corral_vocab *vocab, size_t *n)
{
    size_t cap = MAX_PROMPT_TOKENS;
    corral_token *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "corral infer: out of memory\n");
        return NULL;
    }
    if (o->prompt_ids) {
        if (!parse_id_list(o->prompt_ids, ids, cap, n)) {
            free(ids);
            return NULL;
        }
        return ids;
    }
    corral_error err;
    if (!corral_tokenize_prompt(vocab, o->prompt, strlen(o->prompt), true, ids, cap, n, &err) ||
        *n > cap) {
        fprintf(stderr, "corral infer: %s\n", *n > cap ? "prompt too long" : err.message);
        free(ids);
        return NULL;
    }
    return ids;
}

/* Make room for one more token: keep num_keep, drop half of the rest, as ollama does. */
static bool shift_if_full(corral_context *ctx, long num_keep, unsigned *n_shifts)
{
    uint32_t len = corral_seq_length(ctx, 0), n_ctx = corral_context_n_ctx(ctx);
    if (len + 1 < n_ctx)
        return true;
    uint32_t keep = num_keep < 0 || (uint32_t)num_keep >= len ? 0 : (uint32_t)num_keep;
    uint32_t discard = (len - keep) / 2;
    corral_error err;
    if (discard == 0 || !corral_seq_shift(ctx, 0, keep, discard, &err)) {
        fprintf(stderr, "corral infer: cannot shift the context\n");
        return false;
    }
    (*n_shifts)++;
    return true;
}

/* The GBNF file at path for vocab's tokens; NULL after saying why. */
static corral_grammar *load_grammar(const char *path, const corral_vocab *vocab)
{
    enum { MAX_GRAMMAR_BYTES = 1 << 20 };
    corral_error err;
    size_t len;
    char *text = util_read_file(path, MAX_GRAMMAR_BYTES, &len, &err);
    if (!text) {
        fprintf(stderr, "corral infer: cannot read grammar %s\n", err.message);
        return NULL;
    }
    corral_grammar *grammar = corral_grammar_create(text, vocab, &err);
    if (!grammar)
        fprintf(stderr, "corral infer: %s: %s\n", path, err.message);
    free(text);
    return grammar;
}

static int run(const infer_options *o)
{
    corral_error err;
    int status = 1;
    corral_model *model = corral_model_load(o->model_path, &err);
    if (!model) {
        fprintf(stderr, "corral infer: %s\n", err.message);
        return 1;
    }
    for (size_t i = 0; i < o->n_loras; i++) {
        char path[4096];
        const lora_option *l = &o->loras[i];
        if (l->path_len >= sizeof path) {
            fprintf(stderr, "corral infer: --lora path too long\n");
            corral_model_free(model);
            return 1;
        }
        snprintf(path, sizeof path, "%.*s", (int)l->path_len, l->spec);
        if (!corral_model_add_lora(model, path, l->scale, &err)) {
            fprintf(stderr, "corral infer: %s\n", err.message);
            corral_model_free(model);
            return 1;
        }
    }
    const corral_vocab *vocab = corral_model_vocab(model);
    size_t n_prompt = 0, n_vocab = corral_model_n_vocab(model);
    /* the prompt is evaluated with its image or clip */
    bool image = o->image.mmproj_path != NULL || o->image.audio_path != NULL;
    corral_token *prompt = image ? NULL : prompt_tokens(o, vocab, &n_prompt);
    corral_context_params cp = o->ctx;
    device_option_apply(&o->device, &cp);
    cp.images = image;
    if (cp.n_ctx > corral_model_n_ctx_train(model))
        cp.n_ctx = corral_model_n_ctx_train(model);
    corral_context *ctx = prompt || image ? corral_context_create(model, &cp, &err) : NULL;
    corral_sampler *sampler = ctx ? corral_sampler_create(&o->sampling, n_vocab, &err) : NULL;
    corral_grammar *grammar = NULL;
    bool grammar_ok = !sampler || !o->grammar_path ||
                      (grammar = load_grammar(o->grammar_path, vocab)) != NULL;
    if (grammar)
        corral_sampler_set_grammar(sampler, grammar);
    corral_detok_stream *stream =
        sampler && grammar_ok ? corral_detok_stream_create(vocab, &err) : NULL;
    long n_max = o->n_predict < 0 ? 10l * cp.n_ctx : o->n_predict;
    corral_token *generated = stream ? malloc(((size_t)n_max + 1) * sizeof *generated) : NULL;
    if (!generated) {
        if ((prompt || image) && grammar_ok) /* load_grammar said why it failed */
            fprintf(stderr, "corral infer: %s\n", stream ? "out of memory" : err.message);
        goto done;
    }
    if (n_prompt >= cp.n_ctx) {
        fprintf(stderr, "corral infer: the prompt has %zu tokens but the context holds %u\n",
                n_prompt, cp.n_ctx);
        goto done;
    }

    double t0 = now_seconds();
    corral_batch batch = {.n_tokens = n_prompt, .tokens = prompt};
    size_t n_evaluated = n_prompt, last = n_prompt - 1;
    if (image) {
        infer_image_options io = o->image;
        io.n_threads = cp.n_threads;
        io.model_path = o->model_path;
        if (!infer_image_prompt(&io, model, ctx, o->prompt, &prompt, &n_prompt, &n_evaluated,
                                &last))
            goto done;
    } else if (!corral_decode(ctx, &batch, &err)) {
        fprintf(stderr, "corral infer: %s\n", err.message);
        goto done;
    }
    double t_prompt = now_seconds() - t0;
    const float *logits = corral_get_logits(ctx, last);
    if (o->print_logits)
        for (size_t i = 0; i < n_vocab; i++)
            printf("%.9g\n", logits[i]);
    for (size_t i = 0; i < n_prompt; i++)
        corral_sampler_accept(sampler, prompt[i]);

    size_t n_gen = 0;
    unsigned n_shifts = 0;
    const char *stop_reason = "length";
    double t1 = now_seconds();
    while ((long)n_gen < n_max) {
        corral_token id = corral_sampler_sample(sampler, logits);
        corral_sampler_accept(sampler, id);
        generated[n_gen++] = id;
        if (!o->ignore_eos && corral_vocab_is_eog(vocab, id)) {
            stop_reason = "end of generation";
            break;
        }
        if (!o->print_ids) {
            size_t len;
            const char *text = corral_detok_stream_push(stream, id, &len);
            fwrite(text, 1, len, stdout);
            fflush(stdout);
        }
        if ((long)n_gen == n_max)
            break;
        if (corral_context_recurrent(ctx) &&
            corral_seq_length(ctx, 0) + 1 >= corral_context_n_ctx(ctx)) {
            stop_reason = "a full context (a recurrent model's cannot shift)";
            break;
        }
        if (!shift_if_full(ctx, o->num_keep, &n_shifts))
            goto done;
        batch = (corral_batch){.n_tokens = 1, .tokens = &id};
        if (!corral_decode(ctx, &batch, &err)) {
            fprintf(stderr, "\ncorral infer: %s\n", err.message);
            goto done;
        }
        logits = corral_get_logits(ctx, 0);
    }
    double t_gen = now_seconds() - t1;
    if (o->print_ids) {
        print_ids("prompt_ids", prompt, n_prompt);
        print_ids("generated_ids", generated, n_gen);
    } else {
        size_t len;
        const char *text = corral_detok_stream_finish(stream, &len);
        fwrite(text, 1, len, stdout);
        putchar('\n');
    }
    fprintf(stderr, "\nprompt: %zu tokens in %.3f s (%.1f tokens/s)\n", n_evaluated, t_prompt,
            (double)n_evaluated / (t_prompt > 0 ? t_prompt : 1e-9));
    fprintf(stderr, "generation: %zu tokens in %.3f s (%.1f tokens/s), stopped by %s",
            n_gen, t_gen, (double)n_gen / (t_gen > 0 ? t_gen : 1e-9), stop_reason);
    if (n_shifts)
        fprintf(stderr, ", context shifted %u time%s", n_shifts, n_shifts == 1 ? "" : "s");
    fprintf(stderr, "\ncpu: %s, %s KV cache, context %u\n", corral_cpu_level(),
            corral_kv_type_name(cp.kv_type), cp.n_ctx);
    if (corral_context_gpu_layers(ctx))
        fprintf(stderr, "gpu: %u of %u layers on %s, %.1f MiB\n", corral_context_gpu_layers(ctx),
                corral_model_n_layer(model), corral_context_gpu_device(ctx),
                (double)corral_context_gpu_bytes(ctx) / (1 << 20));
    status = 0;
done:
    free(generated);
    corral_detok_stream_free(stream);
    corral_sampler_free(sampler);
    corral_grammar_free(grammar);
    corral_context_free(ctx);
    corral_gpu_release();
    free(prompt);
    corral_model_free(model);
    return status;
}

int cmd_infer(int argc, char **argv)
{
    infer_options o = {.n_predict = 128, .num_keep = 4};
    corral_context_params_init(&o.ctx);
    corral_sampler_params_init(&o.sampling);
    int r = parse_args(&o, argc, argv);
    return r >= 0 ? r : run(&o);
}
