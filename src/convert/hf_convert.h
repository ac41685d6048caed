/*
 * Hugging Face checkpoint (a directory of config.json, tokenizer files and *.safetensors
 * shards) to one GGUF file, as llama.cpp's and ollama's converters write it: the same tensor
 * names, shapes and types (1-D tensors and biases F32, BF16 weights BF16, others F16), the
 * same metadata keys, Llama's Q/K rows permuted back to GGUF's RoPE pairing.
 *
 * Architectures (config.json's "architectures"[0]): LlamaForCausalLM, MistralForCausalLM and
 * MixtralForCausalLM (GGUF "llama"), Qwen2ForCausalLM ("qwen2"), Qwen3ForCausalLM ("qwen3"),
 * Qwen3MoeForCausalLM ("qwen3moe"), GemmaForCausalLM,
 * Gemma2ForCausalLM and Gemma3ForCausalLM (text; "gemma", "gemma2", "gemma3": their norms,
 * stored as w - 1, become 1 + w), Gemma3ForConditionalGeneration ("gemma3" with its vision
 * tower in the same file, as ollama's converter writes it: the tower's keys under
 * "gemma3.vision.", its tensors under ollama's "v." and "mm." names, F16 and F32),
 * Mistral3ForConditionalGeneration ("mistral3": its text model as Llama's, its pixtral tower
 * in the same file as ollama's converter writes it, the tower's Q/K rows in Hugging Face's
 * order), Llama4ForConditionalGeneration ("llama4": its text model's Q/K in the checkpoint's
 * order, dense and MoE layers, the packed experts transposed, its tower in the same file
 * under ollama's names, its position table F32), MllamaForConditionalGeneration ("mllama":
 * its text model and cross-attention layers as Llama's, its tower in the same file as
 * ollama's converter writes it: gates tanh'd, the blocks' Q and K permuted and transposed),
 * Qwen2_5_VLForConditionalGeneration
 * ("qwen25vl": its text model as Qwen2's with its
 * M-RoPE sections, its tower in the same file as ollama's converter writes it, the patch
 * kernel split into its two temporal slices and each block's attn.qkv into Q, K and V),
 * Qwen3VLForConditionalGeneration and Qwen3VLMoeForConditionalGeneration ("qwen3vl",
 * "qwen3vlmoe": the text model as Qwen3's or Qwen3 MoE's, its packed experts transposed, its
 * tower in the same file as ollama's converter writes it, with preprocessor_config.json's
 * normalisation: the Conv3D patch kernel whole, each block's attn.qkv split into Q, K and V),
 * Phi3ForCausalLM ("phi3": fused q/k/v and gate/up kept
 * fused, LongRoPE's factors as rope_factors_long/short tensors), GptOssForCausalLM,
 * Olmo2ForCausalLM and Olmo3ForCausalLM ("olmo2"), GraniteForCausalLM, CohereForCausalLM
 * ("command-r": Command R, and Command R+ with its per-head q/k norms), Cohere2ForCausalLM,
 * SmolLM3ForCausalLM, Starcoder2ForCausalLM, Qwen3_5ForConditionalGeneration ("qwen35": the
 * text model; its value heads reordered to llama.cpp's tiled order, -exp(A_log) as ssm_a, its
 * norms but ssm_norm stored as w - 1), Qwen3_5MoeForConditionalGeneration ("qwen35moe": the
 * same, with each layer's packed experts split into gate's and up's stacks and a shared
 * expert), Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM (the same text models saved alone,
 * under model.), Qwen3NextForCausalLM ("qwen3next": the same layers, value heads in the
 * checkpoint's order, in_proj_qkvz split into attn_qkv and attn_gate), BertModel ("bert"),
 * NomicBertModel ("nomic-bert", or "nomic-bert-moe" with experts) and Gemma3TextModel
 * ("gemma-embedding", EmbeddingGemma), encoders: see hf_family_embed.h,
 * Lfm2ForCausalLM and Lfm2MoeForCausalLM ("lfm2", "lfm2moe": see hf_family_lfm2.h),
 * LagunaForCausalLM ("laguna": see hf_family_laguna.h), GlmOcrForConditionalGeneration
 * ("glmocr" with its tower in the same file: see hf_family_glmocr.h), DeepseekOCRForCausalLM
 * ("deepseekocr" with its SAM and CLIP towers in the same file: see hf_family_deepseekocr.h),
 * Lfm2VlForConditionalGeneration ("lfm2" with its tower in the same file, the image settings
 * of processor_config.json too: see hf_family_lfm2.h),
 * NemotronHForCausalLM ("nemotron_h" or "nemotron_h_moe": see hf_family_nemotron_h.h),
 * Ministral3ForCausalLM ("mistral3" without a tower: Llama's layers, YaRN from
 * rope_parameters), DeepseekV3ForCausalLM and Glm4MoeLiteForCausalLM ("deepseek2": see
 * hf_family_deepseek2.h), Gemma3nForConditionalGeneration ("gemma3n": the text model as
 * ollama's converter writes it, its towers left out, its AltUp projections stacked, its
 * coefficients clamped), Gemma4ForCausalLM and Gemma4ForConditionalGeneration ("gemma4": the
 * text model with its vision tower in the same file, see hf_family_gemma4.h). A mixture of
 * experts' matrices are stacked per layer into ffn_{gate,up,down}_exps (experts outermost),
 * its router (ffn_gate_inp) kept F32. The tokenizer is
 * a SentencePiece tokenizer.model when there is one, else tokenizer.json's BPE, WordPiece or
 * Unigram (see hf_tokenizer.h). Shards (model*.safetensors when there are any, else *.safetensors) are
 * read in name order;
 * model.safetensors.index.json, when given, must name only shards that are given too.
 */
#ifndef CORRAL_CONVERT_HF_CONVERT_H
#define CORRAL_CONVERT_HF_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"

#define HF_MAX_JSON_BYTES ((size_t)64 << 20) /* the largest vocabularies' tokenizer.json fit */
/* The architectures above in short, as `corral create --help` lists them: lines by the
 * names' endings, each line indented and ending in a newline. */
#define HF_SUPPORTED_ARCHITECTURES                                                           \
    "  ...ForCausalLM: Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3Moe, Qwen3Next, Gemma,\n"  \
    "    Gemma2, Gemma3, Gemma4, Phi3, GptOss, Olmo2, Olmo3, Granite, Cohere, Cohere2,\n"     \
    "    SmolLM3, Starcoder2, Lfm2, Lfm2Moe, NemotronH, Ministral3, DeepseekV3,\n"             \
    "    Glm4MoeLite, Laguna, DeepseekOCR\n"                                                  \
    "  ...ForConditionalGeneration: Gemma3, Gemma3n, Gemma4, Mistral3, Mllama, Llama4,\n"    \
    "    Qwen2_5_VL, Qwen3VL, Qwen3VLMoe, Lfm2Vl, GlmOcr\n"                                   \
    "  both endings: Qwen3_5, Qwen3_5Moe\n"                                                   \
    "  ...Model: Bert, NomicBert (nomic-embed-text v1, v1.5 and v2), Gemma3Text\n"

/* The refusal of an architecture that is not converted: its name, the first
 * HF_SHOWN_NAME_BYTES bytes of it with "..." after a longer one, and where the list is (too
 * long for an error message, which a client may show on one line). */
#define HF_SHOWN_NAME_BYTES 80
#define HF_UNSUPPORTED_FORMAT                                                                \
    "unsupported architecture '%.*s%s' (`corral create --help` lists those Corral converts)"
_Static_assert(sizeof HF_UNSUPPORTED_FORMAT + HF_SHOWN_NAME_BYTES + 3 < CORRAL_ERROR_MAX,
               "the refusal of an architecture fits an error message whole");

/* One file of the checkpoint: its name relative to the directory, and where it is. */
typedef struct hf_file {
    const char *name;
    const char *path;
} hf_file;

typedef enum hf_status {
    HF_OK,
    HF_INVALID, /* the checkpoint: unsupported, incomplete or malformed */
    HF_IO,      /* reading or writing failed */
} hf_status;

/* Whether a file of a FROM directory belongs to a checkpoint (weights, config, tokenizer). */
bool hf_is_checkpoint_file(const char *name);

/* Whether a file's name makes it a checkpoint's weights (*.safetensors, not in a folder). */
bool hf_is_weights_file(const char *name);

/*
 * A conversion in steps, so that a server can report progress and stop when its client leaves.
 * hf_converter_open reads and checks everything it can before any output: config.json, the
 * tokenizer, every shard's header and every tensor's name and shape; files (and the strings
 * in it) must outlive the converter. hf_converter_begin starts the output at out_path (written
 * beside it, renamed into place when done); each hf_converter_step writes about 64 MiB of it
 * and sets *done after the last. Freeing an unfinished converter removes its output.
 */
typedef struct hf_converter hf_converter;

hf_status hf_converter_open(const hf_file *files, size_t n, hf_converter **out,
                            corral_error *err);
hf_status hf_converter_begin(hf_converter *c, const char *out_path, corral_error *err);
hf_status hf_converter_step(hf_converter *c, bool *done, corral_error *err);
uint64_t hf_converter_bytes_done(const hf_converter *c);  /* tensor bytes written */
uint64_t hf_converter_bytes_total(const hf_converter *c); /* known after begin */
void hf_converter_free(hf_converter *c);

/* The whole conversion to out_path in one call. */
hf_status hf_convert(const hf_file *files, size_t n, const char *out_path, corral_error *err);

#endif
