/*
 * The steps before a runner that generation and embedding requests share (model_request.h).
 */
#include "server/core/model_request.h"

#include <string.h>

#include "server/models/model_info.h"
#include "options/options.h"

unsigned model_request_open(const server *srv, const char *name, model_ref **ref,
                            corral_error *err)
{
    switch (model_ref_open(srv->store, name, ref, err)) {
    case MODEL_REF_OK: return 200;
    case MODEL_REF_INVALID_NAME: return 400;
    case MODEL_REF_NOT_FOUND: return 404;
    default: return 500;
    }
}

bool model_request_keep_alive(const server *srv, const json_t *body, int64_t *ns)
{
    json_t *v = json_object_get(body, "keep_alive");
    *ns = srv->config.keep_alive_ns;
    if (!v || json_is_null(v))
        return true;
    if (json_is_number(v)) { /* seconds */
        *ns = server_duration_ns(json_number_value(v) * 1e9);
        return true;
    }
    return json_is_string(v) && server_parse_duration(json_string_value(v), ns);
}

json_t *model_request_options(const model_ref *ref, const json_t *options, corral_error *err)
{
    json_t *request = options_normalize(options, err);
    if (!request)
        return NULL;
    json_t *merged = ref->params ? options_normalize(ref->params, err) : json_object();
    if (!merged) {
        json_decref(request);
        return NULL;
    }
    json_object_update(merged, request);
    json_decref(request);
    return merged;
}

json_t *model_request_capabilities(const server *srv, const model_ref *ref, corral_error *err)
{
    json_t *config = model_info_read_config(srv->store, ref->manifest, err);
    corral_model_file *file = config ? corral_model_file_open(ref->model_path, err) : NULL;
    json_t *caps = file ? model_info_capabilities(config, file, ref->template_text) : NULL;
    if (caps && !model_info_add_projector_capability(caps, srv->store, ref->manifest)) {
        json_decref(caps);
        caps = NULL;
    }
    if (file && !caps)
        corral_error_set(err, "out of memory");
    corral_model_file_close(file);
    json_decref(config);
    return caps;
}

bool model_request_has_capability(const json_t *caps, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(caps, i, v)
        if (strcmp(json_string_value(v), name) == 0)
            return true;
    return false;
}

bool model_request_in_family(const model_ref *ref, const char *family)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(ref->config, "model_families"), i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), family) == 0)
            return true;
    return false;
}

bool model_request_retired(const model_ref *ref, corral_error *err)
{
    if (!model_request_in_family(ref, "mllama") ||
        !corral_manifest_find_layer(ref->manifest, CORRAL_MEDIA_PROJECTOR, NULL))
        return false;
    corral_error_set(err, "'llama3.2-vision' is no longer compatible with your version of Ollama "
                          "and has been replaced by a newer version. To re-download, run 'ollama "
                          "pull llama3.2-vision'");
    return true;
}

/* options_normalize bounded them; 0 (absent) is the default. */
static uint32_t option_u32(const json_t *options, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(options, key));
    return v > 0 && v <= (1 << 24) ? (uint32_t)v : 0;
}

/* num_gpu as ollama takes it: the layers to put on a GPU, 0 none; absent or negative, as
 * many as fit. Without a usable GPU the runner says so in one log line and uses the CPU. */
static int option_num_gpu(const json_t *options)
{
    const json_t *v = json_object_get(options, "num_gpu");
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    json_int_t n = json_integer_value(v);
    return n <= 100000 ? (int)n : 100000;
}

load_request model_request_load(const model_ref *ref, const json_t *options)
{
    return (load_request){.ref = ref, .num_ctx = option_u32(options, "num_ctx"),
                          .num_batch = option_u32(options, "num_batch"),
                          .num_thread = (int)option_u32(options, "num_thread"),
                          .num_gpu = option_num_gpu(options)};
}
