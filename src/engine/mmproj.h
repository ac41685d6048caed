/*
 * A vision projector file (GGUF general.architecture "clip", llama.cpp's mmproj): the vision
 * tower's hyper-parameters and weights, bound to the map and checked at load like a text
 * model's, and the projector kind that turns the tower's patch states into text-model
 * embeddings. Kinds are rows of a table (mmproj.c), each naming its tensors' shape
 * requirements and its encode step, so another projector is another row and file.
 */
#ifndef CORRAL_ENGINE_MMPROJ_H
#define CORRAL_ENGINE_MMPROJ_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"
#include "gguf.h"
#include "model.h"
#include "threadpool.h"

enum vision_norm { VISION_LAYER_NORM, VISION_RMS_NORM };
/* GELU_QUICK: x * sigmoid(1.702 x), CLIP's activation (llava's clip.use_gelu false);
 * GEGLU_QUICK: quick_gelu(gate) * up (gemma4v as llama.cpp runs it) */
enum vision_ffn {
    VISION_FFN_GELU,
    VISION_FFN_SWIGLU,
    VISION_FFN_GELU_QUICK,
    VISION_FFN_GEGLU_QUICK,
    VISION_FFN_GELU_ERF, /* GELU through erf, not tanh's approximation (mllama) */
};

/* A layer's linear products in the order of its clamp bounds (vision_layer.clamp) */
enum { VISION_CLAMP_Q, VISION_CLAMP_K, VISION_CLAMP_V, VISION_CLAMP_OUT, VISION_CLAMP_GATE,
       VISION_CLAMP_UP, VISION_CLAMP_DOWN, VISION_CLAMP_LINEARS };

typedef struct vision_layer {
    weight ln1, ln1_b, ln2, ln2_b;
    weight wq, bq, wk, bk, wv, bv, wo, bo;
    weight gate, gate_b, up, up_b, down, down_b; /* gate: gated MLPs only */
    /* gemma4v: RMS norms per head of the queries and keys, after the attention and the MLP,
     * and a scale of the layer's output ([1] or [n_embd]); absent elsewhere */
    weight q_norm, k_norm, attn_post_norm, ffn_post_norm, out_scale;
    /* gemma4v's clipped linears: per product (VISION_CLAMP_*) its input's and output's bounds
     * (in_min, in_max, out_min, out_max); NULL: none */
    const float (*clamp)[4];
    /* mllama's global layers: one-value gates (tanh already applied) on the attention's and
     * the MLP's outputs; absent elsewhere */
    weight attn_out_gate, ffn_out_gate;
} vision_layer;

/* qwen3vl: a tower layer whose states, merged 2 x 2 like the main path's, also go to the text
 * model (deepstack): norm over the merged row, fc1, GELU, fc2. */
typedef struct vision_deepstack {
    uint32_t layer;
    weight norm, norm_b, fc1, fc1_b, fc2, fc2_b;
} vision_deepstack;

typedef struct vision_hparams {
    uint32_t image_size, patch_size;
    uint32_t n_embd, n_ff, n_head, n_layer;
    uint32_t n_embd_text; /* what the projector outputs: the text model's width */
    float eps;
    float mean[3], std[3];
    uint32_t n_merge;       /* gemma3: patches pooled per side into one token */
    uint32_t n_wa_pattern;  /* qwen2.5vl: layer il attends fully when (il + 1) % this == 0 */
    uint32_t window_pixels; /* qwen2.5vl: side of an attention window in pixels */
    uint32_t n_query;       /* minicpm-v: the resampler's queries, an image part's tokens */
    int32_t minicpmv_version; /* minicpm-v: clip.minicpmv_version (2 when absent) */
    enum vision_norm norm;
    enum vision_ffn ffn;
} vision_hparams;

/* Patches one image may have: Qwen's 4096 merged tokens of 2 x 2 patches, the most its
 * preprocessing makes; the activations of that many at width 1280 take about 1 GB. */
#define MMPROJ_MAX_PATCHES 16384u

typedef struct projector_kind projector_kind;

struct corral_mmproj {
    gguf_file *file;
    const projector_kind *kind;
    char key_prefix[32]; /* "clip", or a text architecture whose file carries the tower */
    bool ollama_names;   /* tensors under ollama's names (mmproj_ollama.c) */
    vision_hparams hp;
    weight patch_embd, patch_embd_1, patch_b; /* [3 * p * p, n_embd]; _1: qwen's second frame */
    /* An F16 kernel widened to F32 once: llama.cpp's convolution then takes the patches as
     * F16 too, and multiplies the two in F32 (vision_patch_embed). */
    float *patch_embd_wide, *patch_embd_1_wide;
    weight pos_embd;                          /* [n_embd, n_patches] or empty */
    weight pre_ln, pre_ln_b; /* a norm before the blocks (llava: LayerNorm; pixtral: RMS) */
    vision_layer *layers;
    weight post_ln, post_ln_b;
    /* gemma3 */
    weight soft_emb_norm;
    weight input_proj; /* the file's [n_embd_text] x n_embd matrix turned into [n_embd, n_embd_text] */
    float *input_proj_owned;
    /* qwen2.5vl merger; llava's MLP (mm.2 optional there); mm2, mm2_b also pixtral's last
     * projection; mm0 llama4's projection (mm.model.fc) */
    weight mm0, mm0_b, mm2, mm2_b;
    /* llava, llama4 */
    weight class_embd;
    uint32_t n_run_layers;      /* blocks run: up to the deepest feature layer */
    uint32_t n_feature_layers;  /* 0: the last block run's states alone */
    uint32_t feature_layers[8]; /* ascending: states before block il (il = n_run_layers: after
                                 * the last, and the post norm), side by side */
    uint32_t n_pinpoints;       /* anyres sizes (1.6; llama4's tiles); 0: one padded square */
    uint32_t pinpoints[CORRAL_IMAGE_MAX_PINPOINTS][2];
    uint32_t max_squares;       /* squares one image may have: the overview + the most slices */
    /* pixtral: the merger's norm and n_merge x n_merge patch merger (both or neither), the
     * MLP's first projection, and the [IMG_BREAK] embedding that ends every row but the last */
    weight input_norm, patch_merger, mm1, mm1_b, img_break;
    float *patch_embd_rounded; /* pixtral: an F32 patch kernel's values rounded to F16, owned */
    float *img_break_owned;    /* pixtral, ollama's files: the [IMG_BREAK] token's row */
    /* qwen3vl: its deepstack layers, in layer order; the patch kernels as F32 rows of the
     * values llama.cpp's convolution multiplies, and whether it rounds the pixels to half
     * (projector_qwen3vl.c) */
    vision_deepstack *deepstack;
    uint32_t n_deepstack;
    float *patch_owned;
    bool patch_pixels_half;
    /* gemma4v: the learned standardisation after pooling (both or neither), the clamp
     * bounds of every layer's products then the projection's, owned */
    weight std_bias, std_scale;
    float (*clamp_owned)[4];
    /* minicpm-v resampler: learned queries cross-attending to the tower's patches */
    weight rs_query, rs_kv, rs_q, rs_q_b, rs_k, rs_k_b, rs_v, rs_v_b, rs_o, rs_o_b;
    weight rs_ln_q, rs_ln_q_b, rs_ln_kv, rs_ln_kv_b, rs_ln_post, rs_ln_post_b, rs_proj;
    /* glm4v: the patches' norm (v.norm_embd, optional), the merger convolution's bias
     * (patch_merger its kernel), mm.post_norm, and the gated MLP's gate (mm1: up, mm2: down;
     * mm0: mm.model.fc) */
    weight norm_embd, norm_embd_b, merger_b, merger_norm, merger_norm_b, mm_gate, mm_gate_b;
    float *merger_owned; /* the merger kernel as F32 rows of the values its product takes */
    bool merger_half;    /* ... and its input rounded to half first (projector_glm4v.c) */
    /* deepseekocr: the SAM encoder, the neck and what the kind keeps (projector_deepseekocr.c);
     * mm0 is its projection mm.model.fc, class_embd and pre_ln the CLIP tower's */
    struct deepseekocr_sam *sam;
    /* lfm2: the bias of the LayerNorm over a merged row (input_norm its weight) */
    weight input_norm_b;
    /* mllama: its tiles, tile embeddings, global layers and kept layers (projector_mllama.c) */
    struct mllama_tower *mllama;
    /* the tower's blocks on a GPU (gpu_vision.h; corral_mmproj_use_gpu), or NULL: the CPU */
    struct gpu_vision *gpu;
};

/* One image through the tower: pixels HWC (ny x nx x 3, normalised), its patch states. */
typedef struct vision_run {
    const corral_mmproj *mm;
    threadpool *pool;
    size_t n_patches;
    float *x, *xn, *q, *k, *v, *attn, *ff, *ff2; /* n_patches rows each */
    float *qh, *kh, *vt; /* per head: queries [n][d], key tiles, values [d][n] */
    float *scores;       /* per pool thread, scores_per_thread floats of attention scratch */
    size_t scores_per_thread;
    void *act;     /* a product's input in its kernels' activation type */
    const float *rope_cs;   /* per patch head_dim floats (cos, sin per pair), or NULL */
    bool rope_adjacent;     /* pairs (2i, 2i + 1) rotate (pixtral), not (i, i + d/2) */
    bool rope_split;        /* each half of a head turns on its own: pairs (i, i + d/4) and
                             * (d/2 + i, d/2 + i + d/4) (gemma4v) */
    float kq_scale;         /* the scores' scale; 0: 1 / sqrt(head width) */
    bool v_norm;            /* values RMS-normed per head, without a weight (gemma4v) */
    const float *ones;      /* n_embd ones: the weight of a norm that has none */
    bool patch_f16;         /* the patch embedding's pixels rounded to F16 first (pixtral) */
    const uint32_t *window; /* per patch its attention window, or NULL: one window */
    /* per patch whether it is padding, which sees no other padding (mllama); NULL: none */
    const uint8_t *padding;
    const corral_cancel *cancel; /* asked before each block (vision_run_blocks); NULL: never */
} vision_run;

struct projector_kind {
    const char *name;                /* clip.projector_type */
    const char *image_begin, *image_end; /* text the prompt carries around an image's tokens */
    enum corral_image_resize resize;
    enum vision_norm norm;
    enum vision_ffn ffn;
    bool (*bind)(corral_mmproj *mm, corral_error *err);
    /* corral_mmproj_part_text for a kind that slices images; NULL: begin and end only */
    const char *(*part_text)(const corral_mmproj *mm, uint32_t cols, uint32_t rows, size_t part);
    /* pixels of nx x ny (already sized for the kind) into out->data and its grid; false with
     * CORRAL_CANCELLED once cancel asks (vision_run_blocks asks it before each block) */
    bool (*encode)(const corral_mmproj *mm, threadpool *pool, const corral_cancel *cancel,
                   const float *pixels, uint32_t nx, uint32_t ny, corral_image_embd *out,
                   corral_error *err);
    /* The most rows one run of the tower's blocks takes from the parts its preprocessing
     * makes (corral_mmproj_image_params): a GPU's room for them (vision_use_gpu); a larger
     * run stays on the CPU. NULL for mllama alone, whose blocks go by its own
     * (mllama_use_gpu). */
    size_t (*gpu_rows)(const corral_mmproj *mm);
};

extern const projector_kind projector_gemma3;
extern const projector_kind projector_qwen25vl;
extern const projector_kind projector_llava;
extern const projector_kind projector_pixtral;
extern const projector_kind projector_qwen3vl;
extern const projector_kind projector_minicpmv;
extern const projector_kind projector_llama4;
extern const projector_kind projector_gemma4v;
extern const projector_kind projector_glm4v;
extern const projector_kind projector_deepseekocr;
extern const projector_kind projector_lfm2;
extern const projector_kind projector_mllama;

/* pixtral's embeddings for pixels nx x ny (0: a size it does not take): merged rows with an
 * [IMG_BREAK] between two (projector_pixtral.c). */
size_t pixtral_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny);
/* llama4's embeddings for a column of squares (0: a size it does not take): each square's
 * shuffled patches (projector_llama4.c). */
size_t llama4_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny);

/* deepseekocr's embeddings for its views of nx x ny (0: a size it does not take), its image
 * parameters (views: image/views.h), and its encoder's release (projector_deepseekocr.c). */
size_t deepseekocr_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny);
void deepseekocr_image_params(const corral_mmproj *mm, corral_image_params *out);
void deepseekocr_free(struct deepseekocr_sam *sam);
/* mllama's states for a canvas of nx x ny (0: a size it does not take): one token carrying
 * every tile's rows; its image parameters; its tower's release (projector_mllama.c). */
size_t mllama_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny);
void mllama_image_params(const corral_mmproj *mm, corral_image_params *out);
void mllama_free(struct mllama_tower *tower);
/* mllama's blocks on a GPU (corral_mmproj_gpu_bytes, corral_mmproj_use_gpu). */
bool mllama_gpu_bytes(const corral_mmproj *mm, int device, uint64_t *out, corral_error *err);
bool mllama_use_gpu(corral_mmproj *mm, int device, corral_error *err);
/* lfm2's embeddings for pixels nx x ny (0: a size it does not take): one per merge square
 * (projector_lfm2.c). */
size_t lfm2_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny);

/* corral_mmproj_load on a GGUF already open (fuzzing opens one in memory): the projector
 * owns file from then on, and closes it on failure. */
corral_mmproj *mmproj_open(gguf_file *file, corral_error *err);

/* A tensor of the tower by llama.cpp's name, looked up under the file's own naming. */
const gguf_tensor *mmproj_find_tensor(const corral_mmproj *mm, const char *name);

/* ollama's single-file layout (mmproj_ollama.c): the projector kind a text architecture's file
 * carries (NULL: none), llama.cpp's tensor name as ollama spells it in file (buf when
 * rewritten; where its files differ, the spelling file holds), and the hyper-parameters
 * ollama's engine fixes in code, read after the tower's sizes. */
const projector_kind *mmproj_ollama_kind(const gguf_file *file, const char *arch);
const char *mmproj_ollama_name(const projector_kind *kind, const gguf_file *file,
                               const char *name, char *buf, size_t size);
bool mmproj_ollama_hparams(corral_mmproj *mm, corral_error *err);

/* Binding helpers for the kinds (mmproj.c): a matrix [n_in, n_out], or an F32 vector. */
bool mmproj_bind_matrix(corral_mmproj *mm, weight *w, const char *name, size_t n_in,
                        size_t n_out, bool required, corral_error *err);
bool mmproj_bind_vector(corral_mmproj *mm, weight *w, const char *name, size_t n, bool required,
                        corral_error *err);
/* A convolution kernel [k, k, channels, n_out] as a matrix [n_in = k * k * channels, n_out]
 * in its own order (kx fastest, then ky, then the channel). */
bool mmproj_bind_conv(corral_mmproj *mm, weight *w, const char *name, size_t channels,
                      size_t n_in, size_t n_out, bool required, corral_error *err);

/* The tower's steps (vision.c). */
/* n rows of width floats (size overflow-checked), or NULL and *ok false; nothing once *ok is
 * false, so a run of allocations is checked once at its end. */
float *vision_alloc_rows(size_t n, size_t width, bool *ok);
/* extra_act_row_bytes: the widest input row the kind's own products take (act holds
 * n_patches of the widest). */
bool vision_run_init(vision_run *run, const corral_mmproj *mm, threadpool *pool,
                     const corral_cancel *cancel, size_t n_patches, size_t extra_act_row_bytes,
                     corral_error *err);
void vision_run_free(vision_run *run);
/* y[t] = W . x[t] (+ bias) for n rows of x (stride w->n_in), on the pool; act: room for n
 * activation rows of w. */
void vision_matmul(threadpool *pool, const weight *w, const weight *bias, const float *x,
                   size_t n, float *y, void *act);
/* run->x = conv(pixels) for patches listed as (patch row, patch col) pairs, in that order. */
void vision_patch_embed(vision_run *run, const float *pixels, uint32_t nx, const uint32_t *at);
/* The same for pixels and kernels already rounded to half values (w0, w1: n_embd rows of
 * 3 * p * p; w1 and bias may be NULL), summed as llama.cpp's F16 matrix kernel on AVX2 sums
 * them (n_in a multiple of 8): (w0 . patch + w1 . patch) + bias. */
void vision_patch_embed_half(vision_run *run, const float *pixels, uint32_t nx,
                             const uint32_t *at, const float *w0, const float *w1,
                             const float *bias);
/* In place: quick GELU through ggml's fp16 table (the tower's GEGLU_QUICK activation). */
void vision_gelu_quick(float *x, size_t n);
/* That table: the fp16 quick GELU of each fp16 bit pattern (built on first use), for a GPU
 * to read the same values. */
const uint16_t *vision_gelu_quick_f16_table(void);
/* That kernel's sum of a . b over n (a multiple of 8) half values. */
float vision_dot8(const float *a, const float *b, size_t n);
/* Block il over run->x on the CPU; vision_block_of: a block of the kind's own (mllama's
 * global layers), attending to every patch. */
void vision_block(vision_run *run, uint32_t il);
void vision_block_of(vision_run *run, const vision_layer *l);
/* Whether cancel (NULL: never) asks an encoding to stop; err then says CORRAL_CANCELLED. */
bool vision_cancelled(const corral_cancel *cancel, corral_error *err);
/* Blocks [first, first + count) over run->x: on the tower's GPU when it has one
 * (vision_use_gpu) and the run fits the rows made there, else on the CPU, run->cancel asked
 * before each (before the whole run on the GPU). False with the reason when the device fails
 * or the encoding is cancelled. */
bool vision_run_blocks(vision_run *run, uint32_t first, uint32_t count, corral_error *err);
/* A tower's blocks on a GPU (corral_mmproj_gpu_bytes, corral_mmproj_use_gpu) for every kind
 * but mllama: the device memory they take, and their upload. */
bool vision_gpu_bytes(const corral_mmproj *mm, int device, uint64_t *out, corral_error *err);
/* The patches of the largest image corral_mmproj_image_params lets through (max_pixels): the
 * gpu_rows of a kind that encodes the image whole. */
size_t vision_gpu_rows_of_pixels(const corral_mmproj *mm);
bool vision_use_gpu(corral_mmproj *mm, int device, corral_error *err);
/* Qwen's 2-D rotary angles: per patch at (row, col) pairs (at), cos and sin of its d/2 pairs
 * (d: the head's width) into cs, n * d floats. */
void vision_patch_angles(const uint32_t *at, size_t n, size_t d, float *cs);
/* out[t] = norm(in[t]) * w (+ b), the tower's norm kind; out may be in. */
void vision_norm_rows(const corral_mmproj *mm, const weight *w, const weight *b,
                      const float *in, float *out, size_t n);

#endif
