/*
 * Gemma 4's audio tower (corral_audio_tower, engine.h; audio_gemma4.h inside the engine), as
 * ollama's converter lays it into the model file and transformers' Gemma 4 audio model
 * computes it:
 *
 * - two 3 x 3 convolutions of stride 2 over (time, mel bin), each followed by a layer norm
 *   over its channels (a weight, no bias) and a ReLU; the second's (frequency, channel) pairs
 *   of a time step, frequency major, projected to the tower's width (a.pre_encode.out);
 * - conformer blocks: half a feed-forward step (RMS norm, SiLU MLP, RMS norm, times 0.5);
 *   local self-attention (RMS norms before and after); a light convolution module (RMS norm,
 *   a gated linear unit, a causal depthwise convolution, RMS norm, SiLU, a linear); the other
 *   half feed-forward step; an RMS norm of the block's output;
 * - the attention: each query sees itself and the 12 positions before it; queries scaled by
 *   1 / (sqrt(head width) ln 2) times the file's per-dimension scale (softplus already
 *   applied by the converter), keys by ln(1 + e) / ln 2 (times a per-dimension key scale
 *   where the file has one); a relative-position term, the query against a projection of the
 *   sinusoid of the distance (0 to 12); logits capped at 50 by tanh; softmax over the keys
 *   in reach;
 * - the output projection with its bias (mm.a.fc), an RMS norm without a weight and the
 *   projection into the text model's width (mm.a.input_projection).
 *
 * A linear product may clip its input and its output: one-value F32 tensors beside its weight
 * (NAME.input_min, .input_max, .output_min, .output_max), as transformers' clipped linears
 * keep them and llama.cpp applies them by name; absent, that side is unbounded.
 *
 * transformers computes the attention in blocks of 12 queries against 24 keys; the same sums
 * over the same keys come out of a plain window, which is what runs here.
 *
 * A clip longer than 30 seconds comes as segments of at most 30 seconds' frames (src/audio/
 * mel.h): each goes through the tower as a clip of its own and their embeddings follow one
 * another, as llama.cpp's mtmd encodes such a clip for this tower. A caller's corral_cancel
 * is asked before each segment and each block, so that minutes of encoding stop within one
 * block of a request's end (within one segment when the blocks run on a GPU).
 *
 * The conformer blocks, the bulk of the work, run on a GPU once corral_audio_tower_use_gpu
 * has put them there (gpu_audio.h): a segment's rows go up after the input projection and
 * come back before the output projection.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio_gemma4.h"
#include "corral/engine.h"
#include "gguf.h"
#include "gpu_audio.h"
#include "mmproj.h"
#include "model.h"
#include "quant.h"
#include "tensor_type.h"
#include "threadpool.h"
#include "util/checked.h"

#define MEL_BINS 128
#define CHUNK_PAST 12      /* positions before a query that it sees */
#define N_REL (CHUNK_PAST + 1)
#define LOGIT_CAP 50.0f
#define FFN_RESIDUAL 0.5f
#define DEFAULT_EPS 1e-6f
/* Bounds on what a file may claim, far above the released towers, and on a segment's
 * frames: 30 seconds, the longest clip the tower is made for (a longer one comes as
 * segments, corral_audio_tower_encode_segments). */
#define MAX_EMBD (1 << 14)
#define MAX_LAYERS 256
#define MAX_CHANNELS 4096
#define MAX_KERNEL 64
#define MAX_FRAMES 3000

struct corral_audio_tower {
    gguf_file *file;
    uint32_t n_layer, n_embd, n_head, n_ff, kernel, c0, c1, n_proj, n_embd_text;
    float eps;
    float *conv0, *conv1; /* [out channel][3 time][3 frequency][in channel] */
    weight conv0_norm, conv1_norm, out_proj_b;
    audio_linear input_proj, out_proj, mm_proj;
    audio_layer *layers;
    float *rel_pos; /* [N_REL][n_embd]: the sinusoid of each distance */
    gpu_audio *gpu; /* the blocks on a GPU (corral_audio_tower_use_gpu), or NULL: the CPU */
};

/* ---- loading ---- */

/* The kernels read a tensor's values in place as floats or as blocks holding 16-bit scales;
 * a file with general.alignment below 4 can place them anywhere. */
static bool aligned(const corral_audio_tower *t, const gguf_tensor *g, corral_error *err)
{
    if ((uintptr_t)g->data % sizeof(float) == 0)
        return true;
    corral_error_set(err, "%s: tensor '%s' is not aligned to %zu bytes in the file",
                     gguf_path(t->file), g->name, sizeof(float));
    return false;
}

static bool bind(const corral_audio_tower *t, weight *w, const char *name, size_t n_in,
                 size_t n_out, bool vector, bool required, corral_error *err)
{
    const gguf_tensor *g = gguf_find_tensor(t->file, name);
    memset(w, 0, sizeof *w);
    if (!g) {
        if (required)
            corral_error_set(err, "%s: missing tensor '%s'", gguf_path(t->file), name);
        return !required;
    }
    if (g->ne[0] != (int64_t)n_in || g->ne[1] != (int64_t)(vector ? 1 : n_out) || g->ne[2] != 1 ||
        g->ne[3] != 1) {
        corral_error_set(err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected "
                         "%zu x %zu", gguf_path(t->file), name, (long long)g->ne[0],
                         (long long)g->ne[1], (long long)g->ne[2], (long long)g->ne[3], n_in,
                         vector ? (size_t)1 : n_out);
        return false;
    }
    const quant_ops *ops = quant_ops_active(g->type);
    bool usable = vector ? g->type == TENSOR_TYPE_F32 : ops && ops->dot && ops->dequantize;
    if (!aligned(t, g, err))
        return false;
    if (!usable) {
        corral_error_set(err, "%s: tensor '%s' has type %s, which is not supported %s",
                         gguf_path(t->file), name, tensor_type_name(g->type),
                         vector ? "for a vector (F32 is)" : "for a matrix");
        return false;
    }
    w->data = g->data;
    w->type = g->type;
    w->n_in = n_in;
    w->n_out = vector ? 1 : n_out;
    w->row_bytes = g->size_bytes / w->n_out;
    w->ops = ops;
    return true;
}

/* One bound of a product: the one F32 value at name, or *out left as it is without one. */
static bool read_bound(const corral_audio_tower *t, const char *name, float *out,
                       corral_error *err)
{
    const gguf_tensor *g = gguf_find_tensor(t->file, name);
    if (!g)
        return true;
    if (g->type != TENSOR_TYPE_F32 || gguf_tensor_n_elems(g) != 1) {
        corral_error_set(err, "%s: tensor '%s' must be one F32 value", gguf_path(t->file), name);
        return false;
    }
    memcpy(out, g->data, sizeof *out);
    if (isnan(*out)) {
        corral_error_set(err, "%s: tensor '%s' is not a number", gguf_path(t->file), name);
        return false;
    }
    return true;
}

/* The matrix stem.weight [n_in, n_out] and its product's bounds beside it. */
static bool bind_linear(const corral_audio_tower *t, audio_linear *l, const char *stem,
                        size_t n_in, size_t n_out, corral_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "%s.weight", stem);
    l->in_lo = l->out_lo = -FLT_MAX;
    l->in_hi = l->out_hi = FLT_MAX;
    float *bounds[4] = {&l->in_lo, &l->in_hi, &l->out_lo, &l->out_hi};
    static const char *const sides[4] = {"input_min", "input_max", "output_min", "output_max"};
    if (!bind(t, &l->w, name, n_in, n_out, false, true, err))
        return false;
    for (size_t i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", stem, sides[i]);
        if (!read_bound(t, name, bounds[i], err))
            return false;
    }
    /* bounds the wrong way round, or a floor of +inf (a ceiling of -inf), would replace
     * every value with a bound, and infinite ones make the embeddings infinite */
    for (size_t i = 0; i < 4; i += 2)
        if (!(*bounds[i] <= *bounds[i + 1]) || *bounds[i] == INFINITY ||
            *bounds[i + 1] == -INFINITY) {
            corral_error_set(err, "%s: %s's %s bounds are %g to %g, which bound no value",
                             gguf_path(t->file), stem, i == 0 ? "input" : "output",
                             (double)*bounds[i], (double)*bounds[i + 1]);
            return false;
        }
    return true;
}

/* A small kernel of any type the engine reads, as floats: a 4-D tensor of the shape given. */
static float *read_kernel(const corral_audio_tower *t, const char *name, const int64_t ne[4],
                          corral_error *err)
{
    const gguf_tensor *g = gguf_find_tensor(t->file, name);
    if (!g) {
        corral_error_set(err, "%s: missing tensor '%s'", gguf_path(t->file), name);
        return NULL;
    }
    if (memcmp(g->ne, ne, 4 * sizeof *ne) != 0) {
        corral_error_set(err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected "
                         "[%lld, %lld, %lld, %lld]", gguf_path(t->file), name,
                         (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2],
                         (long long)g->ne[3], (long long)ne[0], (long long)ne[1],
                         (long long)ne[2], (long long)ne[3]);
        return NULL;
    }
    if (!aligned(t, g, err))
        return NULL;
    const quant_ops *ops = quant_ops_active(g->type);
    size_t rows = (size_t)(ne[1] * ne[2] * ne[3]), width = (size_t)ne[0];
    if (!ops || !ops->dequantize || g->size_bytes % rows != 0) {
        corral_error_set(err, "%s: tensor '%s' has type %s, which is not supported for a "
                         "kernel", gguf_path(t->file), name, tensor_type_name(g->type));
        return NULL;
    }
    float *out = malloc(rows * width * sizeof *out);
    if (!out) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    size_t row_bytes = g->size_bytes / rows;
    for (size_t r = 0; r < rows; r++)
        ops->dequantize((const uint8_t *)g->data + r * row_bytes, out + r * width, width);
    return out;
}

static bool read_key(const corral_audio_tower *t, const char *name, uint32_t *out, uint32_t max,
                     bool required, corral_error *err)
{
    char key[96];
    snprintf(key, sizeof key, "gemma4.audio.%s", name);
    if (!(required ? gguf_get_u32 : gguf_get_u32_opt)(t->file, key, out, err))
        return false;
    if (required && (*out == 0 || *out > max)) {
        corral_error_set(err, "%s: %s is %u; 1 to %u are taken", gguf_path(t->file), key, *out,
                         max);
        return false;
    }
    return true;
}

static bool bind_layer(corral_audio_tower *t, uint32_t il, corral_error *err)
{
    audio_layer *l = &t->layers[il];
    size_t E = t->n_embd, F = t->n_ff, D = E / t->n_head;
    struct {
        weight *w;
        const char *suffix;
        size_t n;
        bool required;
    } vectors[] = {
        {&l->ffn_norm, "ffn_norm", E, true},
        {&l->ffn_post_norm, "ffn_post_norm", E, true},
        {&l->ffn_norm_1, "ffn_norm_1", E, true},
        {&l->ffn_post_norm_1, "ffn_post_norm_1", E, true},
        {&l->attn_norm, "ln1", E, true},
        {&l->q_scale, "per_dim_scale", D, true},
        {&l->k_scale, "per_dim_k_scale", D, false},
        {&l->attn_post_norm, "ln2", E, true},
        /* ollama's converter names the module's first norm conv_norm and the one after the
         * depthwise convolution norm_conv */
        {&l->conv_norm, "conv_norm", E, true},
        {&l->conv_post_norm, "norm_conv", E, true},
        {&l->out_norm, "layer_pre_norm", E, true},
    };
    struct {
        audio_linear *l;
        const char *suffix;
        size_t n_in, n_out;
    } matrices[] = {
        {&l->ffn_up, "ffn_up", E, F},       {&l->ffn_down, "ffn_down", F, E},
        {&l->ffn_up_1, "ffn_up_1", E, F},   {&l->ffn_down_1, "ffn_down_1", F, E},
        {&l->wq, "attn_q", E, E},           {&l->wk, "attn_k", E, E},
        {&l->wv, "attn_v", E, E},           {&l->wo, "attn_out", E, E},
        {&l->rel_k, "linear_pos", E, E},    {&l->conv_pw1, "conv_pw1", E, 2 * E},
        {&l->conv_pw2, "conv_pw2", E, E},
    };
    char name[96];
    for (size_t i = 0; i < sizeof vectors / sizeof *vectors; i++) {
        snprintf(name, sizeof name, "a.blk.%u.%s.weight", il, vectors[i].suffix);
        if (!bind(t, vectors[i].w, name, vectors[i].n, 1, true, vectors[i].required, err))
            return false;
    }
    for (size_t i = 0; i < sizeof matrices / sizeof *matrices; i++) {
        snprintf(name, sizeof name, "a.blk.%u.%s", il, matrices[i].suffix);
        if (!bind_linear(t, matrices[i].l, name, matrices[i].n_in, matrices[i].n_out, err))
            return false;
    }
    snprintf(name, sizeof name, "a.blk.%u.conv_dw.weight", il);
    l->conv_dw = read_kernel(t, name, (const int64_t[4]){t->kernel, (int64_t)E, 1, 1}, err);
    return l->conv_dw != NULL;
}

/* The sinusoid of each distance 0 .. CHUNK_PAST: sines of the first half of the width's
 * timescales (1 to 10^4, geometric), then their cosines. */
static bool build_rel_pos(corral_audio_tower *t, corral_error *err)
{
    size_t E = t->n_embd, half = E / 2;
    if (!(t->rel_pos = malloc(N_REL * E * sizeof *t->rel_pos))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    double step = log(10000.0) / (double)(half > 1 ? half - 1 : 1);
    for (size_t d = 0; d < N_REL; d++)
        for (size_t k = 0; k < half; k++) {
            double angle = (double)d * exp(-(double)k * step);
            t->rel_pos[d * E + k] = (float)sin(angle);
            t->rel_pos[d * E + half + k] = (float)cos(angle);
        }
    return true;
}

void corral_audio_tower_free(corral_audio_tower *t)
{
    if (!t)
        return;
    gpu_audio_free(t->gpu);
    if (t->layers)
        for (uint32_t il = 0; il < t->n_layer; il++)
            free(t->layers[il].conv_dw);
    free(t->layers);
    free(t->conv0);
    free(t->conv1);
    free(t->rel_pos);
    gguf_close(t->file);
    free(t);
}

/* A convolution kernel as the file has it, [out][in][3][3], laid out [out][3][3][in] so that
 * a tap's input channels are contiguous, as the frames' are; NULL when out of memory. */
static bool taps_last(float **kernel, size_t c_out, size_t c_in, corral_error *err)
{
    float *t = malloc(c_out * c_in * 9 * sizeof *t);
    if (!t) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t co = 0; co < c_out; co++)
        for (size_t ci = 0; ci < c_in; ci++)
            for (size_t k = 0; k < 9; k++)
                t[(co * 9 + k) * c_in + ci] = (*kernel)[(co * c_in + ci) * 9 + k];
    free(*kernel);
    *kernel = t;
    return true;
}

/* The frequency bins a stride-2 convolution with one bin of padding leaves of n. */
static size_t halved(size_t n)
{
    return n ? (n - 1) / 2 + 1 : 0;
}

static bool load(corral_audio_tower *t, corral_error *err)
{
    const char *path = gguf_path(t->file);
    t->eps = DEFAULT_EPS;
    if (!read_key(t, "block_count", &t->n_layer, MAX_LAYERS, true, err) ||
        !read_key(t, "embedding_length", &t->n_embd, MAX_EMBD, true, err) ||
        !read_key(t, "attention.head_count", &t->n_head, MAX_EMBD, true, err) ||
        !gguf_get_f32_opt(t->file, "gemma4.audio.attention.layer_norm_epsilon", &t->eps, err) ||
        !gguf_get_u32(t->file, "gemma4.embedding_length", &t->n_embd_text, err))
        return false;
    if (t->n_embd % t->n_head != 0 || t->n_embd % 2 != 0 || !(t->eps > 0.0f) ||
        t->n_embd_text == 0 || t->n_embd_text > MAX_EMBD * 4) {
        corral_error_set(err, "%s: an audio tower %u wide with %u heads, epsilon %g and a text "
                         "width of %u is not one this engine runs", path, t->n_embd, t->n_head,
                         (double)t->eps, t->n_embd_text);
        return false;
    }
    /* the widths the keys leave out come from the tensors */
    const gguf_tensor *up = gguf_find_tensor(t->file, "a.blk.0.ffn_up.weight");
    const gguf_tensor *dw = gguf_find_tensor(t->file, "a.blk.0.conv_dw.weight");
    const gguf_tensor *c0 = gguf_find_tensor(t->file, "a.conv1d.0.weight");
    const gguf_tensor *c1 = gguf_find_tensor(t->file, "a.conv1d.1.weight");
    const gguf_tensor *fc = gguf_find_tensor(t->file, "mm.a.fc.weight");
    if (!up || !dw || !c0 || !c1 || !fc) {
        corral_error_set(err, "%s: the audio tower lacks one of a.blk.0.ffn_up, "
                         "a.blk.0.conv_dw, a.conv1d.0, a.conv1d.1 and mm.a.fc", path);
        return false;
    }
    if (up->ne[1] < 1 || up->ne[1] > MAX_EMBD * 8 || dw->ne[0] < 1 || dw->ne[0] > MAX_KERNEL ||
        c0->ne[3] < 1 || c0->ne[3] > MAX_CHANNELS || c1->ne[3] < 1 || c1->ne[3] > MAX_CHANNELS ||
        fc->ne[1] < 1 || fc->ne[1] > MAX_EMBD * 4) {
        corral_error_set(err, "%s: the audio tower's widths are out of bounds", path);
        return false;
    }
    t->n_ff = (uint32_t)up->ne[1];
    t->kernel = (uint32_t)dw->ne[0];
    t->c0 = (uint32_t)c0->ne[3];
    t->c1 = (uint32_t)c1->ne[3];
    t->n_proj = (uint32_t)fc->ne[1];
    size_t E = t->n_embd, F2 = halved(halved(MEL_BINS));
    if (!(t->conv0 = read_kernel(t, "a.conv1d.0.weight", (const int64_t[4]){3, 3, 1, t->c0},
                                 err)) ||
        !(t->conv1 = read_kernel(t, "a.conv1d.1.weight",
                                 (const int64_t[4]){3, 3, t->c0, t->c1}, err)) ||
        !taps_last(&t->conv0, t->c0, 1, err) || !taps_last(&t->conv1, t->c1, t->c0, err) ||
        !bind(t, &t->conv0_norm, "a.conv1d.0.norm.weight", t->c0, 1, true, true, err) ||
        !bind(t, &t->conv1_norm, "a.conv1d.1.norm.weight", t->c1, 1, true, true, err) ||
        !bind_linear(t, &t->input_proj, "a.pre_encode.out", F2 * t->c1, E, err) ||
        !bind_linear(t, &t->out_proj, "mm.a.fc", E, t->n_proj, err) ||
        !bind(t, &t->out_proj_b, "mm.a.fc.bias", t->n_proj, 1, true, false, err) ||
        !bind_linear(t, &t->mm_proj, "mm.a.input_projection", t->n_proj, t->n_embd_text, err))
        return false;
    if (!(t->layers = calloc(t->n_layer, sizeof *t->layers))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t il = 0; il < t->n_layer; il++)
        if (!bind_layer(t, il, err))
            return false;
    return build_rel_pos(t, err);
}

corral_audio_tower *corral_audio_tower_load(const char *path, bool *absent, corral_error *err)
{
    *absent = false;
    gguf_file *file = gguf_open(path, err);
    return file ? audio_tower_open(file, absent, err) : NULL;
}

corral_audio_tower *audio_tower_open(gguf_file *file, bool *absent, corral_error *err)
{
    *absent = false;
    gguf_str arch = {0};
    if (!gguf_get_str_opt(file, "general.architecture", &arch, err)) {
        gguf_close(file);
        return NULL;
    }
    if (!arch.data || arch.size != 6 || memcmp(arch.data, "gemma4", 6) != 0 ||
        !gguf_find_kv(file, "gemma4.audio.block_count")) {
        *absent = true;
        gguf_close(file);
        return NULL;
    }
    corral_audio_tower *t = calloc(1, sizeof *t);
    if (!t) {
        corral_error_set(err, "out of memory");
        gguf_close(file);
        return NULL;
    }
    t->file = file;
    if (!load(t, err)) {
        corral_audio_tower_free(t);
        return NULL;
    }
    return t;
}

void audio_tower_hparams_get(const corral_audio_tower *t, audio_tower_hparams *out)
{
    *out = (audio_tower_hparams){.n_layer = t->n_layer, .n_embd = t->n_embd,
                                 .n_head = t->n_head, .n_ff = t->n_ff, .kernel = t->kernel,
                                 .conv0_channels = t->c0, .conv1_channels = t->c1,
                                 .n_proj = t->n_proj, .n_embd_text = t->n_embd_text,
                                 .eps = t->eps};
}

bool corral_audio_tower_fits(const corral_audio_tower *t, const corral_model *model,
                             corral_error *err)
{
    if (corral_model_n_embd(model) != t->n_embd_text) {
        corral_error_set(err, "the audio tower makes embeddings of %u values, the model takes %u",
                         t->n_embd_text, corral_model_n_embd(model));
        return false;
    }
    return true;
}

const char *corral_audio_tower_begin(const corral_audio_tower *t)
{
    (void)t;
    return "<|audio>";
}

const char *corral_audio_tower_end(const corral_audio_tower *t)
{
    (void)t;
    return "<audio|>";
}

size_t corral_audio_tower_tokens(const corral_audio_tower *t, size_t n_frames)
{
    (void)t;
    return halved(halved(n_frames));
}

uint64_t corral_audio_tower_clip_bytes(const corral_audio_tower *t, size_t n_frames)
{
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)corral_audio_tower_tokens(t, n_frames),
                               (uint64_t)t->n_embd_text * sizeof(float), &bytes))
        return UINT64_MAX;
    return bytes;
}

/* ---- encoding ---- */

typedef struct audio_run {
    const corral_audio_tower *t;
    threadpool *pool;
    void *act; /* activation rows for a quantized product */
    size_t act_bytes;
    float *clipped; /* a product's input within its bounds */
    size_t clipped_count;
    const corral_cancel *cancel; /* asked before each block; NULL: never */
} audio_run;

static void clamp_rows(float *x, size_t count, float lo, float hi)
{
    for (size_t i = 0; i < count; i++)
        x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

/* y = clip(W . clip(x)) (+ bias) for n rows. */
static bool product(audio_run *run, const audio_linear *l, const weight *bias, const float *x,
                    size_t n, float *y, corral_error *err)
{
    const weight *w = &l->w;
    if (l->in_lo > -FLT_MAX || l->in_hi < FLT_MAX) {
        size_t count;
        if (!checked_mul_size(n, w->n_in, &count)) {
            corral_error_set(err, "audio too long");
            return false;
        }
        if (count > run->clipped_count) {
            float *grown = realloc(run->clipped, count * sizeof *grown);
            if (!grown) {
                corral_error_set(err, "out of memory");
                return false;
            }
            run->clipped = grown;
            run->clipped_count = count;
        }
        memcpy(run->clipped, x, count * sizeof *x);
        clamp_rows(run->clipped, count, l->in_lo, l->in_hi);
        x = run->clipped;
    }
    if (w->type != TENSOR_TYPE_F32) {
        size_t need;
        if (!checked_mul_size(quant_act_row_bytes(w->type, w->n_in), n, &need)) {
            corral_error_set(err, "audio too long");
            return false;
        }
        if (need > run->act_bytes) {
            void *grown = realloc(run->act, need);
            if (!grown) {
                corral_error_set(err, "out of memory");
                return false;
            }
            run->act = grown;
            run->act_bytes = need;
        }
    }
    vision_matmul(run->pool, w, NULL, x, n, y, run->act);
    clamp_rows(y, n * w->n_out, l->out_lo, l->out_hi);
    if (bias && bias->data) {
        const float *b = bias->data;
        for (size_t r = 0; r < n; r++)
            for (size_t i = 0; i < w->n_out; i++)
                y[r * w->n_out + i] += b[i];
    }
    return true;
}

/* Each of n rows (width E) RMS-normed, times w where given, into out (may be x). */
static void rms_rows(const float *x, size_t n, size_t E, const weight *w, float eps, float *out)
{
    const float *g = w ? w->data : NULL;
    for (size_t r = 0; r < n; r++) {
        const float *a = x + r * E;
        float *b = out + r * E;
        double ss = 0.0;
        for (size_t i = 0; i < E; i++)
            ss += (double)a[i] * a[i];
        float scale = (float)(1.0 / sqrt(ss / (double)E + eps));
        for (size_t i = 0; i < E; i++)
            b[i] = a[i] * scale * (g ? g[i] : 1.0f);
    }
}

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* One subsampling convolution (3 x 3, stride 2, one step of zero padding): in [T][F][C_in]
 * to out [halved T][halved F][C_out], each output's channels layer-normed (times norm) and
 * through a ReLU. */
typedef struct conv_job {
    const float *in, *kernel, *norm;
    size_t T, F, c_in, c_out, T_out, F_out;
    float eps;
    float *out;
} conv_job;

/* a . b over n floats in 8 running sums, which compilers keep in vector lanes */
static float dot(const float *a, const float *b, size_t n)
{
    float lane[8] = {0};
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (size_t l = 0; l < 8; l++)
            lane[l] += a[k + l] * b[k + l];
    for (; k < n; k++)
        lane[0] += a[k] * b[k];
    return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

static void conv_task(void *arg, size_t t, size_t thread)
{
    (void)thread;
    const conv_job *j = arg;
    for (size_t f = 0; f < j->F_out; f++) {
        float *o = j->out + (t * j->F_out + f) * j->c_out;
        for (size_t co = 0; co < j->c_out; co++) {
            float sum = 0.0f;
            for (size_t kt = 0; kt < 3; kt++) {
                long ti = 2 * (long)t - 1 + (long)kt;
                if (ti < 0 || (size_t)ti >= j->T)
                    continue;
                for (size_t kf = 0; kf < 3; kf++) {
                    long fi = 2 * (long)f - 1 + (long)kf;
                    if (fi < 0 || (size_t)fi >= j->F)
                        continue;
                    const float *x = j->in + ((size_t)ti * j->F + (size_t)fi) * j->c_in;
                    sum += dot(j->kernel + (co * 9 + kt * 3 + kf) * j->c_in, x, j->c_in);
                }
            }
            o[co] = sum;
        }
        double mean = 0.0, var = 0.0;
        for (size_t c = 0; c < j->c_out; c++)
            mean += o[c];
        mean /= (double)j->c_out;
        for (size_t c = 0; c < j->c_out; c++)
            var += (o[c] - mean) * (o[c] - mean);
        var /= (double)j->c_out;
        double inv = 1.0 / sqrt(var + j->eps);
        for (size_t c = 0; c < j->c_out; c++) {
            float v = (float)((o[c] - mean) * inv) * j->norm[c];
            o[c] = v > 0.0f ? v : 0.0f;
        }
    }
}

/* Half a feed-forward step, added into h: h += 0.5 post(down(silu(up(pre(h))))). */
static bool ffn_step(audio_run *run, float *h, size_t n, const weight *pre,
                     const audio_linear *up, const audio_linear *down, const weight *post,
                     float *x, float *wide, corral_error *err)
{
    const corral_audio_tower *t = run->t;
    size_t E = t->n_embd;
    rms_rows(h, n, E, pre, t->eps, x);
    if (!product(run, up, NULL, x, n, wide, err))
        return false;
    for (size_t i = 0; i < n * t->n_ff; i++)
        wide[i] = silu(wide[i]);
    if (!product(run, down, NULL, wide, n, x, err))
        return false;
    rms_rows(x, n, E, post, t->eps, x);
    for (size_t i = 0; i < n * E; i++)
        h[i] += FFN_RESIDUAL * x[i];
    return true;
}

typedef struct attn_job {
    const corral_audio_tower *t;
    const float *q, *k, *v, *rel; /* rel: [N_REL][E], the distances' projected sinusoids */
    size_t n;
    float *out;
} attn_job;

static void attn_task(void *arg, size_t i, size_t thread)
{
    (void)thread;
    const attn_job *j = arg;
    size_t E = j->t->n_embd, H = j->t->n_head, D = E / H;
    size_t reach = i < CHUNK_PAST ? i + 1 : N_REL; /* keys i, i - 1, .. */
    for (size_t h = 0; h < H; h++) {
        const float *q = j->q + i * E + h * D;
        float logit[N_REL], top = -INFINITY;
        for (size_t d = 0; d < reach; d++) {
            const float *k = j->k + (i - d) * E + h * D, *r = j->rel + d * E + h * D;
            float s = 0.0f;
            for (size_t c = 0; c < D; c++)
                s += q[c] * (k[c] + r[c]);
            s = LOGIT_CAP * tanhf(s / LOGIT_CAP);
            logit[d] = s;
            top = s > top ? s : top;
        }
        float sum = 0.0f;
        for (size_t d = 0; d < reach; d++)
            sum += logit[d] = expf(logit[d] - top);
        float *o = j->out + i * E + h * D;
        memset(o, 0, D * sizeof *o);
        for (size_t d = 0; d < reach; d++) {
            const float *v = j->v + (i - d) * E + h * D;
            float p = logit[d] / sum;
            for (size_t c = 0; c < D; c++)
                o[c] += p * v[c];
        }
    }
}

/* The queries' scale before a block's per-dimension one: 1 / (sqrt(head width) ln 2). */
static float query_scale(size_t head_width)
{
    return (float)(1.0 / sqrt((double)head_width) / log(2.0));
}

/* The keys' scale: ln(1 + e) / ln 2. */
static float key_scale(void)
{
    return (float)(log(1.0 + exp(1.0)) / log(2.0));
}

/* The attention step, added into h. */
static bool attention_step(audio_run *run, const audio_layer *l, float *h, size_t n, float *x,
                           float *q, float *k, float *v, float *rel, corral_error *err)
{
    const corral_audio_tower *t = run->t;
    size_t E = t->n_embd, H = t->n_head, D = E / H;
    rms_rows(h, n, E, &l->attn_norm, t->eps, x);
    if (!product(run, &l->wq, NULL, x, n, q, err) || !product(run, &l->wk, NULL, x, n, k, err) ||
        !product(run, &l->wv, NULL, x, n, v, err) ||
        !product(run, &l->rel_k, NULL, t->rel_pos, N_REL, rel, err))
        return false;
    const float *qs = l->q_scale.data, *ks = l->k_scale.data;
    float q_scale = query_scale(D), k_scale = key_scale();
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < E; c++) {
            q[r * E + c] *= q_scale * qs[c % D];
            k[r * E + c] *= k_scale * (ks ? ks[c % D] : 1.0f);
        }
    attn_job job = {t, q, k, v, rel, n, x};
    threadpool_run(run->pool, n, attn_task, &job);
    if (!product(run, &l->wo, NULL, x, n, q, err))
        return false;
    rms_rows(q, n, E, &l->attn_post_norm, t->eps, q);
    for (size_t i = 0; i < n * E; i++)
        h[i] += q[i];
    return true;
}

/* The light convolution module, added into h. */
static bool conv_step(audio_run *run, const audio_layer *l, float *h, size_t n, float *x,
                      float *wide, float *g, corral_error *err)
{
    const corral_audio_tower *t = run->t;
    size_t E = t->n_embd, K = t->kernel;
    rms_rows(h, n, E, &l->conv_norm, t->eps, x);
    if (!product(run, &l->conv_pw1, NULL, x, n, wide, err))
        return false;
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < E; c++) {
            float b = wide[r * 2 * E + E + c];
            g[r * E + c] = wide[r * 2 * E + c] / (1.0f + expf(-b));
        }
    /* causal depthwise: step r sees steps r - K + 1 .. r */
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < E; c++) {
            const float *w = l->conv_dw + c * K;
            float s = 0.0f;
            for (size_t kk = 0; kk < K; kk++) {
                size_t back = K - 1 - kk;
                if (back <= r)
                    s += w[kk] * g[(r - back) * E + c];
            }
            x[r * E + c] = s;
        }
    rms_rows(x, n, E, &l->conv_post_norm, t->eps, x);
    for (size_t i = 0; i < n * E; i++)
        x[i] = silu(x[i]);
    if (!product(run, &l->conv_pw2, NULL, x, n, g, err))
        return false;
    for (size_t i = 0; i < n * E; i++)
        h[i] += g[i];
    return true;
}

/* The subsampling convolutions and the input projection: mel frames to h [N][E]. */
static bool subsample(audio_run *run, const float *mel, size_t T, float *h, corral_error *err)
{
    const corral_audio_tower *t = run->t;
    size_t T1 = halved(T), F1 = halved(MEL_BINS), T2 = halved(T1), F2 = halved(F1);
    bool ok = true;
    float *a = vision_alloc_rows(T1 * F1, t->c0, &ok);
    float *b = vision_alloc_rows(T2 * F2, t->c1, &ok);
    if (!ok) {
        free(a);
        free(b);
        corral_error_set(err, "out of memory");
        return false;
    }
    conv_job j0 = {mel, t->conv0, t->conv0_norm.data, T, MEL_BINS, 1, t->c0, T1, F1, t->eps, a};
    threadpool_run(run->pool, T1, conv_task, &j0);
    conv_job j1 = {a, t->conv1, t->conv1_norm.data, T1, F1, t->c0, t->c1, T2, F2, t->eps, b};
    threadpool_run(run->pool, T2, conv_task, &j1);
    ok = product(run, &t->input_proj, NULL, b, T2, h, err);
    free(a);
    free(b);
    return ok;
}

static bool encode(audio_run *run, const float *mel, size_t T, corral_image_embd *out,
                   corral_error *err)
{
    const corral_audio_tower *t = run->t;
    size_t n = halved(halved(T)), E = t->n_embd;
    size_t wide_width = t->n_ff > 2 * E ? t->n_ff : 2 * E;
    size_t P = t->n_proj;
    bool ok = true;
    float *h = vision_alloc_rows(n, E, &ok), *x = vision_alloc_rows(n, E, &ok);
    float *q = vision_alloc_rows(n, E, &ok), *k = vision_alloc_rows(n, E, &ok);
    float *v = vision_alloc_rows(n, E, &ok), *rel = vision_alloc_rows(N_REL, E, &ok);
    float *wide = vision_alloc_rows(n, wide_width, &ok);
    float *proj = vision_alloc_rows(n, P, &ok);
    float *embd = vision_alloc_rows(n, t->n_embd_text, &ok);
    if (!ok)
        corral_error_set(err, "out of memory");
    ok = ok && subsample(run, mel, T, h, err);
    if (ok && t->gpu)
        ok = gpu_audio_run(t->gpu, h, (uint32_t)n, err);
    for (uint32_t il = 0; ok && !t->gpu && il < t->n_layer; il++) {
        const audio_layer *l = &t->layers[il];
        ok = !vision_cancelled(run->cancel, err) &&
             ffn_step(run, h, n, &l->ffn_norm, &l->ffn_up, &l->ffn_down, &l->ffn_post_norm, x,
                      wide, err) &&
             attention_step(run, l, h, n, x, q, k, v, rel, err) &&
             conv_step(run, l, h, n, x, wide, q, err) &&
             ffn_step(run, h, n, &l->ffn_norm_1, &l->ffn_up_1, &l->ffn_down_1,
                      &l->ffn_post_norm_1, x, wide, err);
        if (ok)
            rms_rows(h, n, E, &l->out_norm, t->eps, h);
    }
    ok = ok && product(run, &t->out_proj, &t->out_proj_b, h, n, proj, err);
    if (ok) {
        rms_rows(proj, n, P, NULL, t->eps, proj);
        ok = product(run, &t->mm_proj, NULL, proj, n, embd, err);
    }
    free(h);
    free(x);
    free(q);
    free(k);
    free(v);
    free(rel);
    free(wide);
    free(proj);
    if (!ok) {
        free(embd);
        return false;
    }
    *out = (corral_image_embd){.n_tokens = n, .nx = (uint32_t)n, .ny = 1,
                               .n_embd = t->n_embd_text, .data = embd, .causal = true};
    return true;
}

size_t corral_audio_tower_segments_tokens(const corral_audio_tower *t,
                                          const size_t *segment_frames, size_t n_segments)
{
    size_t total = 0;
    for (size_t s = 0; s < n_segments; s++)
        if (__builtin_add_overflow(total, corral_audio_tower_tokens(t, segment_frames[s]),
                                   &total))
            return SIZE_MAX;
    return total;
}

bool corral_audio_tower_encode_segments(const corral_audio_tower *t, const float *mel,
                                        const size_t *segment_frames, size_t n_segments,
                                        int n_threads, const corral_cancel *cancel,
                                        corral_image_embd *out, corral_error *err)
{
    memset(out, 0, sizeof *out);
    if (n_segments == 0) {
        corral_error_set(err, "a clip of no segments");
        return false;
    }
    for (size_t s = 0; s < n_segments; s++)
        if (segment_frames[s] == 0 || segment_frames[s] > MAX_FRAMES) {
            corral_error_set(err, "a clip segment of %zu log-mel frames; the audio tower takes "
                             "1 to %d (30 seconds)", segment_frames[s], MAX_FRAMES);
            return false;
        }
    size_t n = corral_audio_tower_segments_tokens(t, segment_frames, n_segments), bytes;
    if (!checked_mul_size(n, (size_t)t->n_embd_text * sizeof(float), &bytes)) {
        corral_error_set(err, "audio too long");
        return false;
    }
    size_t threads = n_threads > 0 ? (size_t)n_threads : threadpool_physical_cores();
    audio_run run = {.t = t, .cancel = cancel};
    float *embd = malloc(bytes);
    if (!embd) {
        corral_error_set(err, "out of memory");
        return false;
    }
    if (!(run.pool = threadpool_create(threads, err))) {
        free(embd);
        return false;
    }
    /* each segment through the whole tower on its own: no position, convolution or
     * attention reaches across a segment's edge */
    bool ok = true;
    for (size_t s = 0, row = 0, at = 0; ok && s < n_segments; row += segment_frames[s], s++) {
        corral_image_embd part;
        ok = !vision_cancelled(cancel, err) &&
             encode(&run, mel + row * MEL_BINS, segment_frames[s], &part, err);
        if (ok) {
            memcpy(embd + at * t->n_embd_text, part.data,
                   part.n_tokens * t->n_embd_text * sizeof *embd);
            at += part.n_tokens;
            corral_image_embd_free(&part);
        }
    }
    threadpool_free(run.pool);
    free(run.act);
    free(run.clipped);
    if (!ok) {
        free(embd);
        return false;
    }
    *out = (corral_image_embd){.n_tokens = n, .nx = (uint32_t)n, .ny = 1,
                               .n_embd = t->n_embd_text, .data = embd, .causal = true};
    return true;
}

bool corral_audio_tower_encode(const corral_audio_tower *t, const float *mel, size_t n_frames,
                               int n_threads, corral_image_embd *out, corral_error *err)
{
    return corral_audio_tower_encode_segments(t, mel, &n_frames, 1, n_threads, NULL, out, err);
}

/* ---- the blocks on a GPU ---- */

/* The rows of a segment's longest run: MAX_FRAMES subsampled twice. */
static uint32_t max_rows(void)
{
    return (uint32_t)halved(halved(MAX_FRAMES));
}

static void gpu_blocks_of(const corral_audio_tower *t, gpu_audio_blocks *out)
{
    *out = (gpu_audio_blocks){.n_embd = t->n_embd, .n_head = t->n_head, .n_ff = t->n_ff,
                              .kernel = t->kernel, .past = CHUNK_PAST, .eps = t->eps,
                              .cap = LOGIT_CAP, .q_scale = query_scale(t->n_embd / t->n_head),
                              .k_scale = key_scale(), .ffn_residual = FFN_RESIDUAL,
                              .layers = t->layers, .n_layers = t->n_layer,
                              .rel_pos = t->rel_pos};
}

bool corral_audio_tower_gpu_bytes(const corral_audio_tower *t, int device, uint64_t *out,
                                  corral_error *err)
{
    gpu_audio_blocks b;
    gpu_blocks_of(t, &b);
    return gpu_audio_bytes(device, &b, max_rows(), out, err);
}

bool corral_audio_tower_use_gpu(corral_audio_tower *t, int device, corral_error *err)
{
    if (t->gpu)
        return true;
    gpu_audio_blocks b;
    gpu_blocks_of(t, &b);
    t->gpu = gpu_audio_create(device, &b, max_rows(), err);
    return t->gpu != NULL;
}
