/*
 * Corral's engine: the only header the runner, server and CLI may include from the engine.
 * It exposes files, models, contexts, tokenizers and sampling as opaque handles; tensor
 * types, kernels and GGUF internals stay behind it.
 */
#ifndef CORRAL_ENGINE_H
#define CORRAL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "corral/error.h"

/* ---- CPU dispatch ---- */

/* Lower the kernel level for this process: "scalar", "avx2", "avx512-novnni" (AVX-512 as a
 * CPU without VNNI runs it), "avx512" or "avx512-vdpbf16ps" (AVX-512 with BF16 rows through
 * vdpbf16ps, which Intel CPUs otherwise leave to FMAs; only where the CPU has AVX512_BF16). */
bool corral_cpu_set_level(const char *name, corral_error *err);
/* Name of the level kernels run at now (avx512-novnni when AVX-512 runs without VNNI,
 * avx512-vdpbf16ps when that level was asked for), and
 * of the highest the CPU supports. */
const char *corral_cpu_level(void);
const char *corral_cpu_detected_level(void);
/* Whether the packed 1-token matrix kernels of the SIMD levels also prefetch their weights
 * in software (CORRAL_PREFETCH=0|1, else by CPU vendor: not on AMD). */
bool corral_cpu_prefetches_single_stream(void);

/* ---- Model files (GGUF) ---- */

typedef struct corral_model_file corral_model_file;

corral_model_file *corral_model_file_open(const char *path, corral_error *err);
void corral_model_file_close(corral_model_file *file);

/* gguf-info: metadata (arrays abbreviated to max_array_items) and, optionally, tensors. */
void corral_model_file_print(const corral_model_file *file, FILE *out, bool with_tensors,
                             size_t max_array_items);

/* Metadata values, for /api/show and load planning. Index i < corral_model_file_n_meta;
 * element j < corral_model_file_meta_count (1 for scalars). */
typedef enum corral_meta_type {
    CORRAL_META_INT,    /* signed integers */
    CORRAL_META_UINT,   /* unsigned integers */
    CORRAL_META_FLOAT,
    CORRAL_META_BOOL,
    CORRAL_META_STRING,
    CORRAL_META_ARRAY,  /* see corral_model_file_meta_elem_type */
} corral_meta_type;

size_t corral_model_file_n_meta(const corral_model_file *file);
const char *corral_model_file_meta_key(const corral_model_file *file, size_t i);
/* Index of key, or -1. */
long corral_model_file_find_meta(const corral_model_file *file, const char *key);
corral_meta_type corral_model_file_meta_type(const corral_model_file *file, size_t i);
corral_meta_type corral_model_file_meta_elem_type(const corral_model_file *file, size_t i);
uint64_t corral_model_file_meta_count(const corral_model_file *file, size_t i);
int64_t corral_model_file_meta_int(const corral_model_file *file, size_t i, uint64_t j);
uint64_t corral_model_file_meta_uint(const corral_model_file *file, size_t i, uint64_t j);
double corral_model_file_meta_float(const corral_model_file *file, size_t i, uint64_t j);
bool corral_model_file_meta_bool(const corral_model_file *file, size_t i, uint64_t j);
/* Bytes of a string (not NUL-terminated). */
const char *corral_model_file_meta_string(const corral_model_file *file, size_t i, uint64_t j,
                                          size_t *len);

size_t corral_model_file_n_tensors(const corral_model_file *file);
const char *corral_model_file_tensor_name(const corral_model_file *file, size_t i);
const char *corral_model_file_tensor_type(const corral_model_file *file, size_t i); /* "Q4_K" */
/* Stored dimensions (ne[0] first); returns n_dims. */
uint32_t corral_model_file_tensor_shape(const corral_model_file *file, size_t i, int64_t ne[4]);
/* Bytes of a tensor's data in the file. */
uint64_t corral_model_file_tensor_bytes(const corral_model_file *file, size_t i);
/* Parameters: the elements of every tensor. */
uint64_t corral_model_file_n_params(const corral_model_file *file);

/*
 * What the model costs in memory when this engine runs it on this CPU, from the file alone.
 * copied_bytes: anonymous copies loading makes (matrices repacked for the level's kernels,
 * layouts converted to the engine's), which must fit in RAM. mapped_bytes: tensors read in
 * place from the file's mapping, page cache the kernel can reclaim and read again; of those,
 * mapped_expert_bytes are experts, and token_bytes is what one token reads (the dense
 * tensors whole, the share of the experts a token is routed to, no token embeddings).
 */
typedef struct corral_model_memory {
    uint64_t copied_bytes;
    uint64_t mapped_bytes;
    uint64_t mapped_expert_bytes;
    uint64_t token_bytes;
} corral_model_memory;

void corral_model_file_memory(const corral_model_file *file, corral_model_memory *out);

/* ---- Quantization: llama-quantize's recipes with the engine's reference quantizers ---- */

/* The levels corral_quantize_level accepts, for messages. */
#define CORRAL_QUANTIZE_LEVELS "Q4_0, Q4_K_M, Q4_K_S, Q5_K_M, Q6_K, Q8_0"

/* The canonical name of a level ("q4_k_m" -> "Q4_K_M"; "q4_K" is Q4_K_M as in ollama), or
 * NULL when it is not one of CORRAL_QUANTIZE_LEVELS. */
const char *corral_quantize_level(const char *name);

/*
 * Rewrites an F32/F16/BF16 GGUF at a level, as llama.cpp's llama-quantize would (same tensor
 * types, order, metadata and bytes), MXFP4 tensors (gpt-oss's experts) kept as they are: open checks the source and plans every tensor, begin
 * starts the output, and each step quantizes the next slice of a tensor (at most a few MB)
 * straight from the source's map, on n_threads threads. The output is written to a temporary
 * file and renamed to dst_path by the last step; freeing an unfinished quantizer removes it.
 */
typedef struct corral_quantizer corral_quantizer;

/* NULL with err when level is unknown, the file is not a model GGUF, a tensor is already
 * quantized ("quantization is only supported for F16, BF16 and F32 models: ..."), or a row
 * length fits no type the recipe allows. n_threads 0 = one per physical core. */
corral_quantizer *corral_quantizer_open(const char *src_path, const char *level, int n_threads,
                                        corral_error *err);
void corral_quantizer_free(corral_quantizer *q);

/* What the source holds, as ollama names it: "F32", "F16" or "BF16" (BF16 when any tensor
 * is BF16, else F16 when any is F16). */
const char *corral_quantizer_source_type(const corral_quantizer *q);

bool corral_quantizer_begin(corral_quantizer *q, const char *dst_path, corral_error *err);
/* Quantize and write the next slice; *done once the file is complete and in place. */
bool corral_quantizer_step(corral_quantizer *q, bool *done, corral_error *err);
/* Source tensor bytes processed so far, and in all. */
uint64_t corral_quantizer_bytes_done(const corral_quantizer *q);
uint64_t corral_quantizer_bytes_total(const corral_quantizer *q);

/* ---- Tokenizers: SentencePiece, byte-level BPE and WordPiece, as llama.cpp ---- */

typedef int32_t corral_token;
typedef struct corral_vocab corral_vocab;

/* Load only the vocabulary of a GGUF file (the weights are never read). */
corral_vocab *corral_vocab_open(const char *gguf_path, corral_error *err);
void corral_vocab_free(corral_vocab *vocab);

size_t corral_vocab_n_tokens(const corral_vocab *vocab);
corral_token corral_vocab_bos(const corral_vocab *vocab); /* -1 when none */
corral_token corral_vocab_eos(const corral_vocab *vocab); /* -1 when none */
/* End of generation: eos, eot, eom and the vocabulary's end-of-turn tokens. */
bool corral_vocab_is_eog(const corral_vocab *vocab, corral_token id);
/* Do a and b have the same tokens (text and type, id for id) and special ids? false with
 * err naming the first difference. What a draft model needs to guess for another model. */
bool corral_vocab_same(const corral_vocab *a, const corral_vocab *b, corral_error *err);

/*
 * Tokenize text[0..len) (any bytes). add_special adds BOS/EOS as the vocabulary says;
 * parse_special lets control-token text such as "<|eot_id|>" become that token (templates
 * need it; user text must not get it). Writes at most max_ids ids and sets *n_ids to the
 * number the text needs: when it is larger than max_ids, call again with a bigger buffer.
 * False (err set) only when the text is too large or memory runs out.
 */
bool corral_tokenize(const corral_vocab *vocab, const char *text, size_t len, bool add_special,
                     bool parse_special, corral_token *ids, size_t max_ids, size_t *n_ids,
                     corral_error *err);

/*
 * A prompt's tokens (text from a chat template, a built-in renderer, or a raw request):
 * corral_tokenize with special tokens parsed, except that when the vocabulary adds BOS, a
 * BOS the text itself begins with (a template's {{ bos_token }}, a renderer's begin-of-text)
 * goes. The prompt then starts with exactly one BOS with add_special, and with none of its own
 * after add_special false (it continues a context that began with one). A vocabulary that
 * adds no BOS keeps the text's.
 */
bool corral_tokenize_prompt(const corral_vocab *vocab, const char *text, size_t len,
                            bool add_special, corral_token *ids, size_t max_ids, size_t *n_ids,
                            corral_error *err);

/*
 * One token's bytes, as printed during generation: into buf[0..size), returning the full
 * length (call again with more room when it is larger). Control tokens are empty unless
 * special. A piece may be part of a UTF-8 character; see corral_detok_stream. An id out of
 * range gives 0.
 */
size_t corral_token_to_piece(const corral_vocab *vocab, corral_token id, char *buf, size_t size,
                             bool special);

/*
 * A whole sequence back to text, as llama.cpp's llama_detokenize: remove_special drops a
 * leading BOS / trailing EOS the vocabulary adds, unparse_special renders control tokens, and
 * BPE vocabularies clean up spaces before punctuation. Writes at most max_bytes and sets
 * *n_bytes to the full length. False (err set) on an id out of range.
 */
bool corral_detokenize(const corral_vocab *vocab, const corral_token *ids, size_t n_ids,
                       bool remove_special, bool unparse_special, char *text, size_t max_bytes,
                       size_t *n_bytes, corral_error *err);

/*
 * Streaming detokenizer for generation: each push returns the text that is now safe to show,
 * always valid UTF-8; bytes of a character still being spelled out by later tokens are held
 * back. Invalid bytes become U+FFFD. The returned text stays valid until the next call.
 */
typedef struct corral_detok_stream corral_detok_stream;

corral_detok_stream *corral_detok_stream_create(const corral_vocab *vocab, corral_error *err);
void corral_detok_stream_free(corral_detok_stream *stream);
const char *corral_detok_stream_push(corral_detok_stream *stream, corral_token id, size_t *len);
/* End of the sequence: a character left incomplete comes out as U+FFFD. */
const char *corral_detok_stream_finish(corral_detok_stream *stream, size_t *len);

/* ---- Models and inference contexts ---- */

typedef struct corral_model corral_model;
typedef struct corral_context corral_context;

/* Map a GGUF model and check every tensor against its architecture. Weights stay in the map. */
corral_model *corral_model_load(const char *path, corral_error *err);
void corral_model_free(corral_model *model);

/*
 * Attach a LoRA adapter (a GGUF with general.type "adapter", adapter.type "lora") at a scale:
 * every product with a weight it adapts then adds scale * (alpha / r) * B (A x); several
 * adapters add up. The model's weights are not changed. False (nothing attached) when the
 * file is not such an adapter or does not fit the model: the error names the tensor. Attach
 * before creating contexts.
 */
bool corral_model_add_lora(corral_model *model, const char *path, float scale, corral_error *err);
/* Whether an adapter can be attached to the model at model_path (loads both, keeps neither). */
bool corral_lora_check(const char *adapter_path, const char *model_path, corral_error *err);

const corral_vocab *corral_model_vocab(const corral_model *model);
const char *corral_model_arch(const corral_model *model);
uint32_t corral_model_n_ctx_train(const corral_model *model);
/* Blocks (layers) of the model. */
uint32_t corral_model_n_layer(const corral_model *model);
uint32_t corral_model_n_vocab(const corral_model *model);
/* An embedding model (an encoder: bert, nomic-bert) turns an input into one vector with
 * corral_embed; it has no logits, so corral_decode refuses it. */
bool corral_model_is_embedding(const corral_model *model);
/* The width of the model's hidden states: an embedding model's vectors have this many. */
uint32_t corral_model_n_embd(const corral_model *model);

/*
 * What the KV cache stores per component: F16 (the default, as in ollama), F32, or ggml's
 * Q8_0 / Q4_0 blocks of 32 components with an f16 scale each (ollama's OLLAMA_KV_CACHE_TYPE
 * q8_0 / q4_0): 34 / 18 bytes per 32 components where F16 takes 64, keys and values rounded
 * to 8 / 4 bits. The quantized types need head dimensions that are multiples of 32.
 */
typedef enum corral_kv_type {
    CORRAL_KV_F16 = 0,
    CORRAL_KV_F32,
    CORRAL_KV_Q8_0,
    CORRAL_KV_Q4_0,
} corral_kv_type;

/* "f16", "f32", "q8_0" or "q4_0" (in any case) into *type; false for any other name. */
bool corral_kv_type_parse(const char *name, corral_kv_type *type);
/* The type's name as corral_kv_type_parse reads it, in lower case. */
const char *corral_kv_type_name(corral_kv_type type);
/* Cache bytes of n_components components of a type (a multiple of 32 for Q8_0 and Q4_0). */
uint64_t corral_kv_type_bytes(corral_kv_type type, uint64_t n_components);

typedef struct corral_context_params {
    uint32_t n_ctx;   /* KV cells per sequence (the context length) */
    uint32_t n_batch; /* most tokens evaluated at once; longer batches are split */
    uint32_t n_seq;   /* sequences (parallel slots) sharing the context */
    int n_threads;    /* 0 = one per physical core */
    corral_kv_type kv_type; /* what the KV cache stores; CORRAL_KV_F16 by default */
    /* Sliding-window layers (gemma2, gemma3) attend to the whole context and cache all of it,
     * as if the model had no window. Only for tests that prove the window matters. */
    bool no_sliding_window;
    /* GPU offload: the last n_gpu_layers layers on a Vulkan device (-1: as many as fit; 0:
     * none), gpu_device its index (-1: the best usable one). Without a usable device, or for
     * a model the device layers do not support, the context runs on the CPU and logs why. */
    int n_gpu_layers;
    int gpu_device;
    /* Device memory the fitting of "as many as fit" leaves free beside its tenth for the
     * driver: what another user of the device takes (a vision tower's blocks,
     * corral_mmproj_gpu_bytes); 0 by default. */
    uint64_t gpu_reserve_bytes;
    /* The context will decode images: the layers that take an image's features besides its
     * embeddings (qwen3vl's deepstack layers) stay on the CPU. */
    bool images;
    /* A recurrent model's context keeps a second checkpoint per sequence,
     * CORRAL_CHECKPOINT_STEP, for speculative decoding to cut its rejected rows back (the
     * states' memory once more, on the CPU and the device alike); ignored elsewhere. */
    bool step_checkpoints;
} corral_context_params;

/* n_ctx 4096, n_batch 512, one sequence, threads = physical cores, F16 cache, windows on,
 * no GPU layers. */
void corral_context_params_init(corral_context_params *params);

/*
 * A context for a generative model holds the KV cache of its sequences. One for an embedding
 * model caches nothing: it evaluates one input of up to n_ctx tokens at a time, n_ctx being
 * capped at the model's trained context length (corral_context_n_ctx says what it got), and
 * n_batch, n_seq, kv_type and no_sliding_window do not apply.
 */

corral_context *corral_context_create(const corral_model *model,
                                      const corral_context_params *params, corral_error *err);
void corral_context_free(corral_context *ctx);
uint32_t corral_context_n_ctx(const corral_context *ctx);
/* Layers the context runs on a GPU (0: none), the device's name ("" when none) and the bytes
 * of device memory they hold. */
uint32_t corral_context_gpu_layers(const corral_context *ctx);
/* A GPU (Vulkan device) of the machine, as corral_gpu_list finds it. */
typedef struct corral_gpu_info {
    uint32_t index;       /* what --device vulkan:N and CORRAL_GPU_DEVICES name */
    char name[256];
    const char *type;     /* "discrete", "integrated", "virtual", "cpu" or "other" */
    uint64_t total_bytes; /* device-local memory */
    uint64_t free_bytes;  /* what the driver's budget leaves (VK_EXT_memory_budget), else total */
    bool has_budget;
    bool usable;
    const char *why_not;  /* when not usable */
    bool chosen;          /* the one a context with gpu_device -1 would use */
} corral_gpu_info;
/* Up to cap GPUs into out, *n_out found. False with the reason when the build or the machine
 * has no Vulkan (no loader, no driver). */
bool corral_gpu_list(corral_gpu_info *out, size_t cap, size_t *n_out, corral_error *err);
/* Close the GPU the process opened, once every context that uses it is freed (a clean exit:
 * the driver's objects freed). Nothing happens when none was opened. */
void corral_gpu_release(void);
const char *corral_context_gpu_device(const corral_context *ctx);
uint64_t corral_context_gpu_bytes(const corral_context *ctx);

/*
 * Tokens to evaluate. Each is appended to its sequence (seq NULL: all sequence 0) at the
 * next position; tokens of one sequence take consecutive positions in batch order.
 * logits NULL asks for the last token's logits only.
 */
typedef struct corral_batch {
    size_t n_tokens;
    const corral_token *tokens;
    const int32_t *seq;
    const bool *logits;
} corral_batch;

/* Evaluate a batch. Fails (nothing changed) on a bad id or sequence, a full sequence, or a
 * context of an embedding model. */
bool corral_decode(corral_context *ctx, const corral_batch *batch, corral_error *err);

/* Logits (n_vocab floats) of batch token i of the last decode, or NULL if not requested. */
const float *corral_get_logits(const corral_context *ctx, size_t i);

/* Tokens held by a sequence's cache (its next position). */
uint32_t corral_seq_length(const corral_context *ctx, int32_t seq);
/* Keep only the first n_keep tokens (reuse a common prefix; 0 clears). On sliding-window
 * layers the window before n_keep may already be gone: see corral_seq_reusable. A recurrent
 * model's sequence (corral_context_recurrent) cut part way goes back to its longest
 * checkpoint of at most n_keep tokens (corral_seq_checkpoint), dropping the longer ones, and
 * is cleared when there is none. */
void corral_seq_truncate(corral_context *ctx, int32_t seq, uint32_t n_keep);
/* The longest prefix, at most n_keep, that truncation keeps exactly: n_keep (capped at the
 * length), or 0 when sliding-window layers no longer hold the window before it. A recurrent
 * model's sequence cut at all keeps its longest checkpoint's length of at most n_keep, else 0
 * (the tokens after it are then evaluated again). */
uint32_t corral_seq_reusable(const corral_context *ctx, int32_t seq, uint32_t n_keep);
/* Whether the model keeps a recurrent state per sequence (qwen35's linear attention): the
 * state stands for all of a sequence's tokens, so a sequence can be continued, cleared or
 * put back to a checkpoint, but not cut back anywhere else nor shifted (fails). */
bool corral_context_recurrent(const corral_context *ctx);
/* A recurrent sequence's checkpoints: PROMPT, near a prompt's end, for the next request that
 * repeats the prompt but not the answer; STEP, before a speculative draft is verified, for
 * going back to the accepted tokens (only in a context created with step_checkpoints). */
typedef enum corral_checkpoint {
    CORRAL_CHECKPOINT_PROMPT,
    CORRAL_CHECKPOINT_STEP,
} corral_checkpoint;
/* Remember a recurrent sequence's state at its present length in its checkpoint of that
 * kind, so that a later cut back to anywhere from there on keeps that many tokens instead of
 * fewer: one checkpoint of each kind per sequence, replaced by the next of its kind, dropped
 * by a cut below it. It costs a copy of the state (the same memory again per kind, touched as
 * the kind's first checkpoint is written). Nothing to do for a context without recurrent
 * layers, whose caches cut back anywhere. false for a sequence that does not exist, or a
 * STEP checkpoint in a recurrent context created without step_checkpoints. */
bool corral_seq_checkpoint(corral_context *ctx, int32_t seq, corral_checkpoint kind);
/* Drop n_discard tokens after the first n_keep and move the rest down (context shift). Fails
 * on a recurrent model's context. */
bool corral_seq_shift(corral_context *ctx, int32_t seq, uint32_t n_keep, uint32_t n_discard,
                      corral_error *err);

/*
 * The embedding of one input, with an embedding model's context: its n_ids token ids (as
 * corral_tokenize gives them with add_special: [CLS] ... [SEP]) are evaluated together, each
 * token seeing all of them, and the last hidden states pooled as the model's GGUF says (mean,
 * the first token's, or the last token's; a model that does not pool gives the last token's,
 * as ollama takes it) into out, corral_model_n_embd floats. The vector is NOT normalised:
 * ollama's API L2-normalises it (after truncating it to `dimensions`), which is the caller's.
 * Fails (err set) on an empty input, an id outside the vocabulary, an input longer than
 * corral_context_n_ctx (truncating is the caller's choice), or a generative model's context.
 */
bool corral_embed(corral_context *ctx, const corral_token *ids, size_t n_ids, float *out,
                  corral_error *err);

/* ---- Stopping an encoding ---- */

/*
 * How a caller stops an image's or a clip's encoding that is no longer wanted (its client has
 * gone): the encoding asks requested(user) on the calling thread before each of its steps
 * (each block of a tower, each part of an image that is encoded part by part, each segment
 * of a clip) and, once it says true, stops there and fails with CORRAL_CANCELLED as err's
 * message. requested runs once per block: it must be cheap and must not block.
 */
typedef struct corral_cancel {
    bool (*requested)(void *user);
    void *user;
} corral_cancel;

#define CORRAL_CANCELLED "cancelled"

/* ---- Vision: images as text-model embeddings through a projector file ---- */

/*
 * A projector file (a GGUF with general.architecture "clip": llama.cpp's mmproj files, ollama's
 * projector layer) holds a vision tower and the projector that maps its patch states into a
 * text model's embedding space. Supported projector types: "gemma3", "qwen2.5vl_merger",
 * "mlp" (LLaVA 1.5 and 1.6; the type of a file without clip.projector_type), "pixtral",
 * "qwen3vl_merger" and "resampler" (minicpm-v).
 */
typedef struct corral_mmproj corral_mmproj;

/* path: a projector file, or a model file that carries its own vision tower (ollama's
 * single-file layout for gemma3, qwen25vl and qwen3vl: the tower's keys under the text
 * architecture, "gemma3.vision.*", its tensors under "v." and "mm."; see
 * corral_model_file_has_vision). */
corral_mmproj *corral_mmproj_load(const char *path, corral_error *err);
/* Whether a model file carries its own vision tower, so that it is its own projector. */
bool corral_model_file_has_vision(const corral_model_file *file);
void corral_mmproj_free(corral_mmproj *mm);
/* clip.projector_type, e.g. "gemma3". */
const char *corral_mmproj_projector(const corral_mmproj *mm);
/* Whether its embeddings fit the text model: the same width, and not an embedding model. */
bool corral_mmproj_fits(const corral_mmproj *mm, const corral_model *model, corral_error *err);
/* The text a prompt carries right before and after an image's tokens ("<start_of_image>",
 * "<end_of_image>" for gemma3): tokenized with the text around it, special tokens parsed. */
const char *corral_mmproj_image_begin(const corral_mmproj *mm);
const char *corral_mmproj_image_end(const corral_mmproj *mm);
/* For an image cut into parts (an overview, then cols x rows slices in row order; for tiles,
 * corral_image_params.tile_size, the slices first and the overview last; 0 x 0: the overview
 * alone): the text before part `part`, or after the last when part is 1 + cols * rows. For
 * an image that is not sliced, part 0's is corral_mmproj_image_begin's and the last
 * corral_mmproj_image_end's; a sliced image's part 0 may differ (lfm2 names its first
 * tile). */
const char *corral_mmproj_part_text(const corral_mmproj *mm, uint32_t cols, uint32_t rows,
                                    size_t part);

/* How an image must be resized before encoding. */
enum corral_image_resize {
    CORRAL_IMAGE_LETTERBOX, /* onto an image_size square of colour pad, aspect kept, centred */
    CORRAL_IMAGE_SMART,     /* each side to a multiple of align, the pixel count bounded */
    /* LLaVA 1.6's "anyres": the image stretched to the image_size square (the overview), then,
     * when a side is over image_size, letterboxed onto black at the pinpoint that keeps most
     * of it and cut into image_size squares in row order; the squares stacked top to bottom
     * after the overview (image_size wide, image_size x (1 + slices) tall) */
    CORRAL_IMAGE_ANYRES,
    /* ollama's mistral3: scaled down (sides floored) so that the longer side is at most
     * image_size, then each side rounded up to a multiple of align */
    CORRAL_IMAGE_LONGEST_EDGE,
    CORRAL_IMAGE_STRETCH,   /* to the image_size square, aspect not kept (minicpm-v's overview) */
    /* llama4 as llama.cpp cuts it: ANYRES's squares and choice of pinpoint, but the overview
     * resized with corners aligned, the slices' letterbox resized bicubic, and the overview
     * after the slices (image_size wide, image_size x (slices + 1) tall) */
    CORRAL_IMAGE_TILES,
    /* DeepSeek-OCR's views: the image fitted onto a grey image_size square (the global view)
     * and, when a side is over tile_size, stretched to the grid of min_tiles to max_tiles
     * tiles nearest its aspect; the encoder's pixels are the grid (tile_size x cols wide,
     * tile_size x rows tall), then the global view's pixels in as many more rows of that
     * width as they fill, the rest zeros; or the image_size square of the global view alone */
    CORRAL_IMAGE_VIEWS,
    /* mllama: the arrangement of at most max_tiles image_size tiles that takes the image at
     * the smallest scale of at least 1 (else the largest below), the image resized to fit it
     * and black to its right and below; the canvas (tiles wide x tiles tall) is encoded */
    CORRAL_IMAGE_CANVAS,
};

#define CORRAL_IMAGE_MAX_PINPOINTS 32

typedef struct corral_image_params {
    enum corral_image_resize resize;
    uint32_t image_size; /* letterbox, stretch: the square's side; longest edge: the bound */
    uint32_t patch_size;
    uint32_t align;      /* smart: sides are multiples of this (a merged token's side) */
    uint64_t min_pixels, max_pixels; /* smart: bounds on width x height */
    float mean[3], std[3]; /* per channel: (u8 / 255 - mean) / std */
    uint8_t pad[3];        /* letterbox: the background's RGB */
    uint32_t n_pinpoints;  /* anyres, tiles: the sizes an image may be sliced at, width x height */
    uint32_t pinpoints[CORRAL_IMAGE_MAX_PINPOINTS][2];
    /* stretch: an image larger than the square is cut into an overview and at most this many
     * slices (image/slices.h), each part encoded on its own; 0: never */
    uint32_t max_slices;
    /* canvas (mllama): the most tiles (max_tiles) */
    /* views (deepseekocr): a tile's side and the tiles in a grid; smart (lfm2, with
     * max_slices): an image wider or taller than twice tile_size is also cut into a grid of
     * tile_size squares (2 to max_slices of them), encoded before the whole image, its
     * thumbnail; 0: never */
    uint32_t tile_size, min_tiles, max_tiles;
} corral_image_params;

void corral_mmproj_image_params(const corral_mmproj *mm, corral_image_params *out);

/* The embeddings corral_mmproj_encode makes of pixels nx x ny (a size the image params give),
 * counted without encoding; 0 for a size the projector does not take. */
size_t corral_mmproj_image_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny);
/* The fewest batch tokens (corral_context_params.n_batch) a context of model needs to take
 * every image of mm: where the model's image tokens see each other both ways (gemma3), an
 * image goes through one batch, so the most tokens an image can have; else 1, as
 * corral_decode_image runs a causal image's tokens through as many batches as they need. */
uint32_t corral_mmproj_batch_tokens(const corral_mmproj *mm, const corral_model *model);
/* The most bytes one image's embeddings take (corral_image_embd's rows, every part of a
 * sliced image's), for the largest image corral_mmproj_image_params lets through: what a
 * cache of encoded images holds for one image at worst. UINT64_MAX: past 64 bits. */
uint64_t corral_mmproj_image_bytes(const corral_mmproj *mm);

/* An image's embeddings: n_tokens rows of n_embd floats, the tokens an nx x ny grid in row
 * order (a 1-D run for projectors without a grid: nx = n_tokens, ny = 1). */
typedef struct corral_image_embd {
    size_t n_tokens;
    uint32_t nx, ny;
    uint32_t n_embd;
    float *data;
    /* mllama: the image is one token whose n_embd values are its states for the
     * cross-attention layers, rows of the text model's width, of which the text after it
     * attends to the first n_attended (its tiles', not the padding tiles'); 0 elsewhere */
    uint32_t n_attended;
    /* a clip's embeddings (corral_audio_tower_encode): its tokens see only the ones before
     * them, whatever the family does for an image's */
    bool causal;
} corral_image_embd;

/*
 * Encode preprocessed pixels (float32, ny x nx x 3, RGB interleaved, normalised as
 * corral_image_params says, nx and ny as its resize makes them) into out, on n_threads
 * threads (0: one per physical core). Free out with corral_image_embd_free.
 */
bool corral_mmproj_encode(const corral_mmproj *mm, const float *pixels, uint32_t nx, uint32_t ny,
                          int n_threads, corral_image_embd *out, corral_error *err);
/* corral_mmproj_encode that stops when cancel (NULL: never) asks it to, between the tower's
 * blocks and between an encoder's parts (mllama's layer groups, deepseekocr's views). */
bool corral_mmproj_encode_cancellable(const corral_mmproj *mm, const float *pixels, uint32_t nx,
                                      uint32_t ny, int n_threads, const corral_cancel *cancel,
                                      corral_image_embd *out, corral_error *err);
void corral_image_embd_free(corral_image_embd *embd);

/* The device memory mm's vision tower takes on a GPU (device -1: the best usable one, as
 * corral_context_params.gpu_device), for a context's fitting to leave free
 * (corral_context_params.gpu_reserve_bytes); false with the reason when a block has a form
 * the device does not run or there is no usable device. */
bool corral_mmproj_gpu_bytes(const corral_mmproj *mm, int device, uint64_t *out,
                             corral_error *err);
/* mm's tower blocks on a GPU from now on (the kinds corral_mmproj_gpu_bytes names; their
 * patch and position embeddings, norms outside the blocks and projections stay on the CPU):
 * their weights uploaded once. False with the reason, the tower
 * then staying on the CPU. Not while an encoding runs. */
bool corral_mmproj_use_gpu(corral_mmproj *mm, int device, corral_error *err);

/*
 * Append an image's embeddings to a sequence in place of tokens: not scaled as token
 * embeddings are; seeing each other both ways where the model's family does that and the
 * embeddings are not marked causal (a clip's are) (gemma3:
 * then as one batch, at most the context's n_batch tokens; otherwise in batches of up to
 * n_batch, each at its own positions); at M-RoPE positions (t, t + y, t + x) for
 * qwen2vl, whose following text then continues max(nx, ny) positions on. The last image
 * token's logits are kept (corral_get_logits index n_tokens - 1). mllama's image is its one
 * image token, and its states go to the cross-attention layers for what follows it in the
 * sequence (replacing an earlier image's), on the CPU or the GPU, wherever the layer runs.
 */
bool corral_decode_image(corral_context *ctx, int32_t seq, const corral_image_embd *image,
                         corral_error *err);

/* ---- Audio: clips as text-model embeddings through an audio tower ---- */

/*
 * Gemma 4's audio tower (E2B, E4B), which ollama's files carry beside the text model: keys
 * "gemma4.audio.*", tensors "a." and "mm.a.". It takes log-mel frames (src/audio/mel.h: 128
 * bins every 10 ms of 16 kHz audio) and gives a text-model embedding per 40 ms.
 */
typedef struct corral_audio_tower corral_audio_tower;

/* The tower in the model file at path; NULL with err, or NULL with *absent set (err left
 * alone) when the file carries none. */
corral_audio_tower *corral_audio_tower_load(const char *path, bool *absent, corral_error *err);
void corral_audio_tower_free(corral_audio_tower *tower);
/* Whether its embeddings fit the text model (the same width). */
bool corral_audio_tower_fits(const corral_audio_tower *tower, const corral_model *model,
                             corral_error *err);
/* The text a prompt carries right before and after a clip's tokens ("<|audio>", "<audio|>"). */
const char *corral_audio_tower_begin(const corral_audio_tower *tower);
const char *corral_audio_tower_end(const corral_audio_tower *tower);
/* The embeddings n_frames log-mel frames give (0 for none). */
size_t corral_audio_tower_tokens(const corral_audio_tower *tower, size_t n_frames);
/* The bytes those embeddings take (corral_image_embd's rows): what a cache of encoded clips
 * holds for one clip of n_frames frames. UINT64_MAX: past 64 bits. */
uint64_t corral_audio_tower_clip_bytes(const corral_audio_tower *tower, size_t n_frames);
/* Encode n_frames rows of 128 log-mel values (at most 30 seconds' frames) into out (a 1-D
 * run: nx = n_tokens, ny = 1, causal set, so that corral_decode_image runs its tokens
 * causally) on n_threads threads (0: one per physical core). Free out with
 * corral_image_embd_free. */
bool corral_audio_tower_encode(const corral_audio_tower *tower, const float *mel,
                               size_t n_frames, int n_threads, corral_image_embd *out,
                               corral_error *err);
/* A clip longer than the tower takes, as src/audio/mel.h cuts it: n_segments runs of rows
 * one after another at mel, segment_frames[s] rows each (1 to 30 seconds' frames). Each
 * segment is encoded on its own, as corral_audio_tower_encode encodes a clip, and out holds
 * their embeddings one after another (one causal 1-D run). cancel (NULL: never) is asked
 * before each segment and, on the CPU, each of the tower's blocks (a GPU runs a segment's
 * blocks in one submission). */
bool corral_audio_tower_encode_segments(const corral_audio_tower *tower, const float *mel,
                                        const size_t *segment_frames, size_t n_segments,
                                        int n_threads, const corral_cancel *cancel,
                                        corral_image_embd *out, corral_error *err);
/* The embeddings such a clip gives: its segments' corral_audio_tower_tokens summed
 * (SIZE_MAX: past size_t). */
size_t corral_audio_tower_segments_tokens(const corral_audio_tower *tower,
                                          const size_t *segment_frames, size_t n_segments);

/* The device memory the tower's conformer blocks take on a GPU (device -1: the best usable
 * one, as corral_context_params.gpu_device), for a context's fitting to leave free
 * (corral_context_params.gpu_reserve_bytes, with a vision tower's); false with the reason
 * when there is no usable device or it cannot run them. */
bool corral_audio_tower_gpu_bytes(const corral_audio_tower *tower, int device, uint64_t *out,
                                  corral_error *err);
/* The tower's conformer blocks on a GPU from now on (its subsampling convolutions and
 * projections stay on the CPU): their weights uploaded once, room made for a 30-second
 * segment. False with the reason, the tower then staying on the CPU. Not while an encoding
 * runs; from then on the tower encodes one clip at a time (the device's blocks hold one
 * segment's rows). */
bool corral_audio_tower_use_gpu(corral_audio_tower *tower, int device, corral_error *err);

/* ---- Sampling (ollama's options; llama.cpp's order) ---- */

typedef struct corral_sampler corral_sampler;

typedef struct corral_sampler_params {
    float temperature;   /* 0 = greedy, ties to the lowest id */
    int32_t top_k;       /* <= 0: off */
    float top_p;         /* 1: off */
    float min_p;         /* 0: off */
    float typical_p;     /* 1: off */
    int32_t repeat_last_n; /* history window for the penalties; 0: off */
    float repeat_penalty;
    float presence_penalty;
    float frequency_penalty;
    int64_t seed;        /* -1: random */
} corral_sampler_params;

/* ollama's defaults: temperature 0.8, top_k 40, top_p 0.9, min_p 0, typical_p 1,
 * repeat_last_n 64, repeat_penalty 1, presence/frequency 0, seed -1. */
void corral_sampler_params_init(corral_sampler_params *params);

corral_sampler *corral_sampler_create(const corral_sampler_params *params, size_t n_vocab,
                                      corral_error *err);
void corral_sampler_free(corral_sampler *sampler);
/* Choose a token from n_vocab logits (not modified). */
corral_token corral_sampler_sample(corral_sampler *sampler, const float *logits);
/* Record a token (prompt or generated) in the penalty history. */
void corral_sampler_accept(corral_sampler *sampler, corral_token id);
void corral_sampler_reset(corral_sampler *sampler);

/* ---- Grammar-constrained decoding (GBNF, llama.cpp's grammar format) ---- */

typedef struct corral_grammar corral_grammar;

/*
 * Parse GBNF text (start rule "root"; see docs/API.md for the syntax) for vocab's tokens.
 * vocab may be NULL for a grammar that only checks text (corral_grammar_accepts). NULL with
 * err, naming the line, on a syntax error or an undefined rule.
 */
corral_grammar *corral_grammar_create(const char *gbnf, const corral_vocab *vocab,
                                      corral_error *err);

/*
 * The grammar of gbnf, or instead opening alone, either after one optional whitespace
 * character: for a model that may open its thinking before it answers in the grammar. Once the text is opening, the
 * grammar is complete; the caller lets the thinking run free and starts a grammar of its
 * own for the answer. NULL with err as corral_grammar_create, or when opening is empty or
 * not UTF-8.
 */
corral_grammar *corral_grammar_create_opening(const char *gbnf, const char *opening,
                                              const corral_vocab *vocab, corral_error *err);
void corral_grammar_free(corral_grammar *grammar);

/*
 * Back to the grammar's start, as if just created, keeping what its masks have worked out
 * (the interned stacks and the kept masks): a later request with the same grammar then
 * costs unions of kept bit sets from its first step. False when memory runs out.
 */
bool corral_grammar_restart(corral_grammar *grammar);

/* The GBNF text the grammar was made from, and in *opening its opening (NULL when made by
 * corral_grammar_create). */
const char *corral_grammar_source(const corral_grammar *grammar, const char **opening);

/* Bytes of the kept work corral_grammar_restart keeps (the masks, the interned stacks). */
size_t corral_grammar_kept_bytes(const corral_grammar *grammar);

/* Does the grammar, from its start, accept exactly text[0..len) as a whole? */
bool corral_grammar_accepts(const corral_grammar *grammar, const char *text, size_t len);

/*
 * Constrain the sampler's draws to the tokens grammar allows (NULL: unconstrained); each
 * drawn token advances it, and an end-of-generation token is drawn only once the grammar is
 * complete (or when nothing else is allowed). The sampler does not own the grammar, which
 * must have the sampler's vocabulary.
 */
void corral_sampler_set_grammar(corral_sampler *sampler, corral_grammar *grammar);

#endif
