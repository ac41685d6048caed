/*
 * Model descriptions for tags/show/create/ps (see model_info.h). Everything here is read
 * from a GGUF header, a config blob or a template's text; GGUF strings are untrusted bytes
 * and are made valid UTF-8 before they become JSON.
 */
#include "server/models/model_info.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/harmony_model.h"
#include "server/core/renderer_model.h"
#include "server/http/json_lossy.h"
#include "template/template.h"
#include "util/checked.h"

void model_info_human_number(uint64_t n, char *buf, size_t cap)
{
    double x = (double)n;
    if (n >= 1000000000u) {
        x /= 1e9;
        snprintf(buf, cap, x == (double)(uint64_t)x ? "%.0fB" : "%.1fB", x);
    } else if (n >= 1000000u) {
        x /= 1e6;
        snprintf(buf, cap, x == (double)(uint64_t)x ? "%.0fM" : "%.2fM", x);
    } else if (n >= 1000u) {
        snprintf(buf, cap, "%.0fK", x / 1e3);
    } else {
        snprintf(buf, cap, "%" PRIu64, n);
    }
}

/* llama.cpp's llama_ftype names; ollama's FileType.String() agrees where it knows them.
 * 4, llama.cpp's removed Q4_1_SOME_F16, is what ollama's first gpt-oss converter wrote for
 * its MXFP4 files, and ollama names it so. */
static const char *const file_type_names[] = {
    [0] = "F32",      [1] = "F16",      [2] = "Q4_0",     [3] = "Q4_1",     [4] = "MXFP4",
    [7] = "Q8_0",
    [8] = "Q5_0",     [9] = "Q5_1",     [10] = "Q2_K",    [11] = "Q3_K_S",  [12] = "Q3_K_M",
    [13] = "Q3_K_L",  [14] = "Q4_K_S",  [15] = "Q4_K_M",  [16] = "Q5_K_S",  [17] = "Q5_K_M",
    [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS",  [21] = "Q2_K_S",  [22] = "IQ3_XS",
    [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL",  [26] = "IQ3_S",   [27] = "IQ3_M",
    [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS",  [31] = "IQ1_M",   [32] = "BF16",
    [36] = "TQ1_0",   [37] = "TQ2_0",   [38] = "MXFP4",
};

const char *model_info_file_type_name(uint32_t file_type)
{
    size_t n = sizeof file_type_names / sizeof file_type_names[0];
    if (file_type < n && file_type_names[file_type])
        return file_type_names[file_type];
    return "unknown";
}

/* ---- GGUF metadata access ---- */

static long find_arch_meta(const corral_model_file *file, const char *suffix)
{
    long arch = corral_model_file_find_meta(file, "general.architecture");
    if (arch < 0 || corral_model_file_meta_type(file, (size_t)arch) != CORRAL_META_STRING)
        return -1;
    size_t len;
    const char *name = corral_model_file_meta_string(file, (size_t)arch, 0, &len);
    char key[320];
    if (len > 200)
        return -1;
    snprintf(key, sizeof key, "%.*s.%s", (int)len, name, suffix);
    return corral_model_file_find_meta(file, key);
}

/* A scalar integer key as uint64; false if absent or not an integer. */
static bool meta_uint(const corral_model_file *file, long i, uint64_t *out)
{
    if (i < 0)
        return false;
    switch (corral_model_file_meta_type(file, (size_t)i)) {
    case CORRAL_META_UINT:
        *out = corral_model_file_meta_uint(file, (size_t)i, 0);
        return true;
    case CORRAL_META_INT: {
        int64_t v = corral_model_file_meta_int(file, (size_t)i, 0);
        *out = v < 0 ? 0 : (uint64_t)v;
        return true;
    }
    default:
        return false;
    }
}

/* A string key's bytes, or NULL if absent or not a string. */
static const char *meta_string(const corral_model_file *file, const char *key, size_t *len)
{
    long i = corral_model_file_find_meta(file, key);
    if (i < 0 || corral_model_file_meta_type(file, (size_t)i) != CORRAL_META_STRING)
        return NULL;
    return corral_model_file_meta_string(file, (size_t)i, 0, len);
}

static json_t *meta_element(const corral_model_file *file, size_t i, corral_meta_type type,
                            uint64_t j)
{
    switch (type) {
    case CORRAL_META_INT:
        return json_integer(corral_model_file_meta_int(file, i, j));
    case CORRAL_META_UINT: {
        uint64_t v = corral_model_file_meta_uint(file, i, j);
        return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
    }
    case CORRAL_META_FLOAT:
        return json_real(corral_model_file_meta_float(file, i, j));
    case CORRAL_META_BOOL:
        return json_boolean(corral_model_file_meta_bool(file, i, j));
    case CORRAL_META_STRING: {
        size_t len;
        const char *s = corral_model_file_meta_string(file, i, j, &len);
        return json_string_lossy(s, len);
    }
    case CORRAL_META_ARRAY:
        break; /* GGUF has no nested arrays that we expose */
    }
    return json_null();
}

static json_t *meta_value(const corral_model_file *file, size_t i, bool verbose)
{
    corral_meta_type type = corral_model_file_meta_type(file, i);
    if (type != CORRAL_META_ARRAY)
        return meta_element(file, i, type, 0);
    uint64_t n = corral_model_file_meta_count(file, i);
    if (n > 0 && !verbose)
        return json_null();
    corral_meta_type elem = corral_model_file_meta_elem_type(file, i);
    json_t *array = json_array();
    for (uint64_t j = 0; array && j < n; j++) {
        if (json_array_append_new(array, meta_element(file, i, elem, j)) != 0) {
            json_decref(array);
            return NULL;
        }
    }
    return array;
}

json_t *model_info_kv(const corral_model_file *file, bool verbose)
{
    json_t *info = json_object();
    size_t n = corral_model_file_n_meta(file);
    for (size_t i = 0; info && i < n; i++) {
        const char *key = corral_model_file_meta_key(file, i);
        if (strcmp(key, "general.name") == 0 || strcmp(key, "tokenizer.chat_template") == 0)
            continue;
        json_t *value = meta_value(file, i, verbose);
        /* a key that is not valid UTF-8 cannot be a JSON key; such a file is hostile */
        if (!value || json_object_set_new(info, key, value) != 0) {
            json_decref(info);
            return NULL;
        }
    }
    uint64_t n_params = corral_model_file_n_params(file);
    if (info && json_object_set_new(info, "general.parameter_count",
                                    json_integer((json_int_t)n_params)) != 0) {
        json_decref(info);
        return NULL;
    }
    return info;
}

json_t *model_info_tensors(const corral_model_file *file)
{
    json_t *tensors = json_array();
    size_t n = corral_model_file_n_tensors(file);
    for (size_t i = 0; tensors && i < n; i++) {
        int64_t ne[4];
        uint32_t n_dims = corral_model_file_tensor_shape(file, i, ne);
        json_t *shape = json_array();
        for (uint32_t d = 0; shape && d < n_dims && d < 4; d++)
            json_array_append_new(shape, json_integer(ne[d]));
        const char *name = corral_model_file_tensor_name(file, i);
        json_t *t = json_pack("{s:o,s:s,s:o*}", "name", json_string_lossy(name, strlen(name)),
                              "type", corral_model_file_tensor_type(file, i), "shape", shape);
        if (!t || json_array_append_new(tensors, t) != 0) {
            json_decref(tensors);
            return NULL;
        }
    }
    return tensors;
}

/* ---- config and details ---- */

static bool set_if_unset(json_t *config, const char *key, json_t *value)
{
    if (!value)
        return false;
    json_t *old = json_object_get(config, key);
    bool unset = !old || json_is_null(old) || (json_is_string(old) && !*json_string_value(old)) ||
                 (json_is_integer(old) && json_integer_value(old) == 0);
    if (!unset) {
        json_decref(value);
        return true;
    }
    return json_object_set_new(config, key, value) == 0;
}

bool model_info_config_add_gguf(json_t *config, const corral_model_file *file)
{
    size_t arch_len = 0;
    const char *arch = meta_string(file, "general.architecture", &arch_len);
    json_t *family = arch ? json_string_lossy(arch, arch_len) : json_string("unknown");
    char params[32];
    model_info_human_number(corral_model_file_n_params(file), params, sizeof params);
    uint64_t file_type;
    const char *quant = "unknown";
    /* ollama reports an explicit 0 (all F32) as "unknown"; we say what the file says */
    if (meta_uint(file, corral_model_file_find_meta(file, "general.file_type"), &file_type) &&
        file_type <= UINT32_MAX)
        quant = model_info_file_type_name((uint32_t)file_type);
    json_t *families = json_object_get(config, "model_families");
    if (!json_is_array(families)) {
        families = json_array();
        if (!families || json_object_set_new(config, "model_families", families) != 0)
            return false;
    }
    if (!family) {
        return false;
    }
    bool listed = false; /* a config written at create already names the family */
    size_t i;
    json_t *known;
    json_array_foreach(families, i, known)
        listed = listed || json_equal(known, family);
    if (!listed && json_array_append(families, family) != 0) {
        json_decref(family);
        return false;
    }
    bool ok = set_if_unset(config, "model_format", json_string("gguf")) &&
              set_if_unset(config, "model_family", family) &&
              set_if_unset(config, "model_type", json_string(params)) &&
              set_if_unset(config, "file_type", json_string(quant));
    uint64_t value;
    if (ok && meta_uint(file, find_arch_meta(file, "context_length"), &value) &&
        value <= INT64_MAX)
        ok = set_if_unset(config, "context_length", json_integer((json_int_t)value));
    if (ok && meta_uint(file, find_arch_meta(file, "embedding_length"), &value) &&
        value <= INT64_MAX)
        ok = set_if_unset(config, "embedding_length", json_integer((json_int_t)value));
    return ok;
}

json_t *model_info_read_config(const corral_store *store, const corral_manifest *manifest,
                               corral_error *err)
{
    if (!manifest->config.digest[0])
        return json_object();
    char *text;
    size_t len;
    if (corral_store_blob_read(store, manifest->config.digest, MODEL_INFO_MAX_CONFIG_BYTES, &text,
                               &len, err) != CORRAL_STORE_OK)
        return NULL;
    json_error_t jerr;
    json_t *config = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!json_is_object(config)) {
        corral_error_set(err, "config blob %s is not a JSON object%s%s", manifest->config.digest,
                         config ? "" : ": ", config ? "" : jerr.text);
        json_decref(config);
        return NULL;
    }
    return config;
}

static json_t *config_string(const json_t *config, const char *key)
{
    const char *s = json_string_value(json_object_get(config, key));
    return json_string(s ? s : "");
}

json_t *model_info_details(const json_t *config, const char *parent_model)
{
    json_t *families = json_object_get(config, "model_families");
    json_t *details = json_pack(
        "{s:s,s:o,s:o,s:o,s:o,s:o}", "parent_model", parent_model ? parent_model : "", "format",
        config_string(config, "model_format"), "family", config_string(config, "model_family"),
        "families", json_is_array(families) ? json_deep_copy(families) : json_null(),
        "parameter_size", config_string(config, "model_type"), "quantization_level",
        config_string(config, "file_type"));
    /* omitted when unknown, as ollama's omitempty does */
    static const char *const lengths[] = {"context_length", "embedding_length"};
    for (size_t i = 0; details && i < 2; i++) {
        json_t *v = json_object_get(config, lengths[i]);
        if (json_is_integer(v) && json_integer_value(v) > 0)
            json_object_set(details, lengths[i], v);
    }
    return details;
}

/* ---- capabilities ---- */

enum {
    CAP_COMPLETION = 1u << 0,
    CAP_TOOLS = 1u << 1,
    CAP_INSERT = 1u << 2,
    CAP_VISION = 1u << 3,
    CAP_EMBEDDING = 1u << 4,
    CAP_THINKING = 1u << 5,
    CAP_AUDIO = 1u << 6,
};

static bool contains_n(const char *haystack, size_t len, const char *needle)
{
    return memmem(haystack, len, needle, strlen(needle)) != NULL;
}

static unsigned jinja_capabilities(const char *t, size_t len)
{
    unsigned caps = 0;
    if (!t || len == 0)
        return 0;
    if (contains_n(t, len, "tools") || contains_n(t, len, "tool_call"))
        caps |= CAP_TOOLS;
    corral_output_tags tags;
    corral_template_jinja_output_tags(t, len, &tags);
    if (tags.think_open[0]) /* ollama's thinking.InferTagsFromChatTemplate found a pair */
        caps |= CAP_THINKING;
    return caps;
}

static bool jinja_has_tool_round_trip(const char *t, size_t len)
{
    static const char *const results[] = {
        "tool_response", "tool_results", "role'] == 'tool'", "role'] == \"tool\"",
        "role\"] == 'tool'", "role\"] == \"tool\"", "message.role == 'tool'",
        "message.role == \"tool\"", "ipython",
    };
    if (!(jinja_capabilities(t, len) & CAP_TOOLS))
        return false;
    if (!contains_n(t, len, "tool_calls") && !contains_n(t, len, "assistant_tool_call"))
        return false;
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
        if (contains_n(t, len, results[i]))
            return true;
    return false;
}

static unsigned go_capabilities(const corral_template *tmpl)
{
    unsigned caps = 0;
    if (corral_template_uses_field(tmpl, "tools"))
        caps |= CAP_TOOLS;
    if (corral_template_uses_field(tmpl, "suffix"))
        caps |= CAP_INSERT;
    corral_output_tags tags;
    corral_template_output_tags(tmpl, &tags);
    if (tags.think_open[0] && tags.think_close[0])
        caps |= CAP_THINKING;
    return caps;
}

static bool go_has_tool_round_trip(const corral_template *tmpl, const char *src)
{
    if (!corral_template_uses_field(tmpl, "tools") ||
        !corral_template_uses_field(tmpl, "toolcalls"))
        return false;
    return strstr(src, "eq .Role \"tool\"") || strstr(src, "tool_response") ||
           strstr(src, "TOOL_RESULTS");
}

/* What the GGUF itself says, whichever template renders. ollama lists vision for any
 * `<arch>.vision.block_count`; here only for a tower the engine reads (gemma3's, qwen25vl's),
 * so that a client never offers images to a model that would refuse them. */
static unsigned gguf_capabilities(const corral_model_file *file)
{
    unsigned caps = find_arch_meta(file, "pooling_type") >= 0 ? CAP_EMBEDDING : CAP_COMPLETION;
    if (corral_model_file_has_vision(file))
        caps |= CAP_VISION;
    if (find_arch_meta(file, "audio.block_count") >= 0)
        caps |= CAP_AUDIO;
    return caps;
}

/* ollama's shouldPreferChatTemplate over the full capability sets of each choice. */
static bool prefer_chat_template(unsigned common, unsigned chat, const char *jinja, size_t len,
                                 unsigned go, const corral_template *tmpl, const char *src)
{
    unsigned chat_set = common | chat, go_set = common | go;
    if (__builtin_popcount(chat_set) > __builtin_popcount(go_set))
        return !go_has_tool_round_trip(tmpl, src) || jinja_has_tool_round_trip(jinja, len);
    if (chat_set != go_set || !(chat_set & CAP_TOOLS))
        return false;
    return jinja_has_tool_round_trip(jinja, len) && !go_has_tool_round_trip(tmpl, src);
}

/*
 * Which template renders prompts, and what it contributes: the Go template's capabilities
 * when it renders, else those the Jinja template shows. A Go template that does not parse
 * contributes nothing and does not render (ollama logs it and falls back).
 */
static bool choose_template(const char *go_template, const corral_model_file *file,
                            unsigned *template_caps)
{
    size_t jinja_len = 0;
    const char *jinja = file ? meta_string(file, "tokenizer.chat_template", &jinja_len) : NULL;
    unsigned chat = jinja_capabilities(jinja, jinja_len);
    *template_caps = chat;
    if (!go_template)
        return false;
    corral_template *tmpl = corral_template_parse_ollama(go_template, strlen(go_template), NULL);
    if (!tmpl)
        return false;
    unsigned go = go_capabilities(tmpl);
    unsigned common = file ? gguf_capabilities(file) : 0;
    bool use_go = !jinja || jinja_len == 0 ||
                  !prefer_chat_template(common, chat, jinja, jinja_len, go, tmpl, go_template);
    corral_template_free(tmpl);
    if (use_go)
        *template_caps = go;
    return use_go;
}

bool model_info_uses_go_template(const char *go_template, const corral_model_file *file)
{
    unsigned caps;
    return choose_template(go_template, file, &caps);
}

static bool append_capability(json_t *caps, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(caps, i, v)
        if (strcmp(json_string_value(v), name) == 0)
            return true;
    return json_array_append_new(caps, json_string(name)) == 0;
}

static bool append_bits(json_t *caps, unsigned bits, const unsigned *order, size_t n)
{
    static const char *const names[] = {"completion", "tools",    "insert", "vision",
                                        "embedding",  "thinking", "audio"};
    for (size_t i = 0; i < n; i++)
        if ((bits & order[i]) && !append_capability(caps, names[__builtin_ctz(order[i])]))
            return false;
    return true;
}

json_t *model_info_capabilities(const json_t *config, const corral_model_file *file,
                                const char *go_template)
{
    json_t *caps = json_array();
    if (!caps)
        return NULL;
    bool ok = true;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(config, "capabilities"), i, v)
        if (json_is_string(v))
            ok = ok && append_capability(caps, json_string_value(v));
    unsigned template_caps;
    bool use_go = choose_template(go_template, file, &template_caps);
    /* ollama's order: the Jinja template's, the GGUF's, then the Go template's */
    static const unsigned jinja_order[] = {CAP_TOOLS, CAP_THINKING};
    static const unsigned gguf_order[] = {CAP_COMPLETION, CAP_EMBEDDING, CAP_VISION, CAP_AUDIO};
    static const unsigned go_order[] = {CAP_TOOLS, CAP_INSERT, CAP_THINKING};
    /* a built-in renderer, not a template, lays out the prompt: its capabilities stand */
    const corral_renderer *renderer = renderer_model_find(config, go_template);
    if (!use_go && !renderer)
        ok = ok && append_bits(caps, template_caps, jinja_order, 2);
    if (file)
        ok = ok && append_bits(caps, gguf_capabilities(file), gguf_order, 4);
    if (use_go && !renderer)
        ok = ok && append_bits(caps, template_caps, go_order, 3);
    if (harmony_model_parses(config, go_template)) /* its parser reads calls and thinking */
        ok = ok && append_capability(caps, "tools") && append_capability(caps, "thinking");
    if (renderer && renderer->tools) /* its prompt offers tools, its answers' calls are read */
        ok = ok && append_capability(caps, "tools");
    if (renderer && renderer->thinking) /* its prompt opens or closes the thinking */
        ok = ok && append_capability(caps, "thinking");
    const char *family = json_string_value(json_object_get(config, "model_family"));
    if (family && (strcmp(family, "gptoss") == 0 || strcmp(family, "gpt-oss") == 0))
        ok = ok && append_capability(caps, "thinking");
    if (!ok) {
        json_decref(caps);
        return NULL;
    }
    return caps;
}

/* Whether a projector file carries an audio encoder, as ollama reads one: a true
 * `has_audio_encoder` key, bare or under any prefix (llama.cpp writes `clip.has_audio_encoder`),
 * unless the projector is gemma3n's, whose audio ollama does not list. */
static bool projector_has_audio(const corral_model_file *file)
{
    size_t len;
    long type = find_arch_meta(file, "vision.projector_type");
    const char *name = type >= 0 && corral_model_file_meta_type(file, (size_t)type) ==
                                        CORRAL_META_STRING
                           ? corral_model_file_meta_string(file, (size_t)type, 0, &len)
                           : NULL;
    if (name && len == 8 && memcmp(name, "gemma3nv", 8) == 0)
        return false;
    static const char suffix[] = "has_audio_encoder";
    size_t n = sizeof suffix - 1;
    for (size_t i = 0; i < corral_model_file_n_meta(file); i++) {
        const char *key = corral_model_file_meta_key(file, i);
        size_t key_len = strlen(key);
        if (key_len < n || strcmp(key + key_len - n, suffix) != 0 ||
            (key_len > n && key[key_len - n - 1] != '.'))
            continue;
        if (corral_model_file_meta_type(file, i) == CORRAL_META_BOOL &&
            corral_model_file_meta_bool(file, i, 0))
            return true;
    }
    return false;
}

bool model_info_add_projector_capability(json_t *caps, const corral_store *store,
                                         const corral_manifest *manifest)
{
    const corral_layer *layer =
        corral_manifest_find_layer(manifest, CORRAL_MEDIA_PROJECTOR, NULL);
    if (!caps || !layer)
        return true;
    if (!append_capability(caps, "vision"))
        return false;
    /* a projector that cannot be read adds nothing more (the runner's load says why) */
    corral_error ignored = {{0}};
    char *path = corral_store_blob_path(store, layer->digest, &ignored);
    corral_model_file *file = path ? corral_model_file_open(path, &ignored) : NULL;
    bool audio = file && projector_has_audio(file);
    corral_model_file_close(file);
    free(path);
    return !audio || append_capability(caps, "audio");
}
