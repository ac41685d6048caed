/*
 * What the server says about a model, derived from its GGUF file and manifest config: the
 * config blob written at create (ollama's ConfigV2), `details`, `model_info` (GGUF metadata
 * as JSON), `tensors`, and `capabilities`. Shared by /api/tags,
 * /api/show, /api/create and /api/ps. Reads only; never loads weights.
 */
#ifndef CORRAL_SERVER_MODEL_INFO_H
#define CORRAL_SERVER_MODEL_INFO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "store/store.h"

/* Largest config blob read (ollama's are a few hundred bytes). */
#define MODEL_INFO_MAX_CONFIG_BYTES (1u << 20)

/* ollama's format.HumanNumber: "8.0B", "494.03M", "260K", "999". */
void model_info_human_number(uint64_t n, char *buf, size_t cap);

/* The quantization level of a GGUF general.file_type: "Q4_K_M", "F16", "F32"… */
const char *model_info_file_type_name(uint32_t file_type);

/*
 * Fill the GGUF-derived fields of a ConfigV2 object where they are still unset:
 * model_format "gguf", model_family (general.architecture), model_families (appended),
 * model_type (parameter count), file_type, context_length, embedding_length.
 */
bool model_info_config_add_gguf(json_t *config, const corral_model_file *file);

/* The manifest's config blob as an object ({} when the manifest names none). NULL with err
 * when it cannot be read or is not a JSON object. */
json_t *model_info_read_config(const corral_store *store, const corral_manifest *manifest,
                               corral_error *err);

/* `details` as tags/show/ps print it, from a config object. parent_model may be NULL. */
json_t *model_info_details(const json_t *config, const char *parent_model);

/*
 * `model_info`: every GGUF key/value except general.name and tokenizer.chat_template, plus
 * general.parameter_count. Without verbose a non-empty array is null, as ollama sends it
 * (it decodes arrays only up to length 0 unless verbose).
 */
json_t *model_info_kv(const corral_model_file *file, bool verbose);

/* `tensors`: [{name, type, shape}] in file order. */
json_t *model_info_tensors(const corral_model_file *file);

/*
 * Whether prompts come from the Go TEMPLATE layer (true) or from the GGUF's Jinja
 * tokenizer.chat_template (false), by ollama's rule: the Go template wins unless the Jinja
 * template detects more capabilities without losing tool round trips, or the same
 * tool-capable set where only the Jinja template handles tool results.
 */
bool model_info_uses_go_template(const char *go_template, const corral_model_file *file);

/* `capabilities`: config capabilities, then what the GGUF and the template in use show. file
 * and go_template may be NULL. Never NULL except out of memory. */
json_t *model_info_capabilities(const json_t *config, const corral_model_file *file,
                                const char *go_template);
/* caps with "vision" appended when the manifest has a projector layer (as ollama lists it,
 * after the others), and "audio" when that projector (a blob of store) carries an audio
 * encoder (`<prefix>.has_audio_encoder` true, gemma3n's projector aside, as ollama reads it);
 * false when out of memory. */
bool model_info_add_projector_capability(json_t *caps, const corral_store *store,
                                         const corral_manifest *manifest);

#endif
