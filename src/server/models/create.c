/*
 * /api/create (see create.h). Layers are collected in ollama's order — the base layers, then
 * the request's template, system, licenses, params and messages, each replacing its kind —
 * and reported as "using existing layer" / "creating new layer" once all are in the store.
 * Every field (template syntax and parameter types included), every source and the weights
 * to quantize are checked before the reply starts, so a refused request leaves nothing
 * behind. The work then runs in steps, one per chunk of output the reply asks for: each
 * quantization step converts a slice of a tensor, so a client that goes away stops it.
 */
#include "server/models/create.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/hf_adapter.h"
#include "convert/hf_convert.h"
#include "options/options.h"
#include "server/models/background_pull.h"
#include "server/models/model_info.h"
#include "server/models/model_ref.h"
#include "template/template.h"

#define MAX_LAYERS 256
#define GC_GRACE_S 3600 /* blobs uploaded for a create still in flight are younger than this */
#define QUANTIZE_DIGEST "0000000000000000000" /* ollama's placeholder digest for the bar */

typedef struct pending_layer {
    const char *media_type; /* a CORRAL_MEDIA_* constant or the base manifest's string */
    char digest[CORRAL_DIGEST_BUF];
    uint64_t size_bytes;
    const char *from;       /* base model's display name, or NULL */
    bool existed;           /* the blob was in the store before this create */
} pending_layer;

/* Where a job stands: quantization (when asked) comes before the request's own layers. */
typedef enum create_phase {
    PHASE_PULL,     /* the base model ('from') is being pulled */
    PHASE_CONVERT_BEGIN,
    PHASE_CONVERT,  /* a checkpoint among 'files' becomes a GGUF */
    PHASE_CONVERT_IMPORT, /* ... the model layer's blob, then what needed a model layer */
    PHASE_QUANTIZE_BEGIN,
    PHASE_QUANTIZE,
    PHASE_IMPORT,   /* the quantized file becomes the model's (or draft's) layer blob */
    PHASE_FINISH,   /* the request's layers, config and manifest */
    PHASE_DONE,
} create_phase;

/* One layer's rewrite, the model's (quantize) or the draft's (draft_quantize), opened (so its
 * weights checked) before the reply starts. */
typedef struct quantize_task {
    corral_quantizer *quantizer;
    const char *level;         /* canonical, e.g. "Q4_K_M" */
    uint64_t source_size;      /* of the blob being quantized: the bar's total */
    bool draft;
} quantize_task;

typedef struct create_job {
    corral_store *store;
    json_t *request;
    json_t *progress;          /* status objects not sent yet */
    corral_error *err;
    corral_model_name name;
    model_ref *base;
    pending_layer layers[MAX_LAYERS];
    size_t n_layers;
    json_t *config;
    create_phase phase;
    quantize_task quantize;    /* running, or the first of two (the model's) */
    quantize_task then_quantize; /* the draft's, when both are asked for */
    char *quantized_path;      /* the quantized GGUF before it enters the store */
    background_pull *pull;     /* of the base model, while PHASE_PULL */
    hf_converter *converter;   /* of a checkpoint among 'files', until PHASE_CONVERT_IMPORT */
    hf_file *checkpoint;       /* its files: names in request, blob paths owned */
    size_t n_checkpoint;
    char *converted_path;      /* the converted GGUF before it enters the store */
    /* a vision projector among 'files', checked against the model once that is known */
    const char *projector_name;
    char projector_digest[CORRAL_DIGEST_BUF];
    uint64_t projector_size;
} create_job;

/* The config keys that describe the model's GGUF (see model_info_config_add_gguf). */
static const char *const gguf_config_keys[] = {"model_format", "model_family", "model_families",
                                               "model_type", "file_type", "context_length",
                                               "embedding_length"};

/* ---- request checks ---- */

static bool is_valid_file_path(const char *path)
{
    /* Go's fs.ValidPath: relative, slash-separated, no empty, "." or ".." elements */
    if (!*path || strlen(path) > 4096)
        return false;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static unsigned check_string_field(const json_t *req, const char *key, corral_error *err)
{
    const json_t *v = json_object_get(req, key);
    if (v && !json_is_string(v) && !json_is_null(v)) {
        corral_error_set(err, "%s must be a string", key);
        return 400;
    }
    return 200;
}

/* The level asked for ("quantize", or its deprecated alias "quantization"), or NULL. */
static const char *requested_level(const json_t *req)
{
    const char *level = json_string_value(json_object_get(req, "quantize"));
    if (!level || !*level)
        level = json_string_value(json_object_get(req, "quantization"));
    return level && *level ? level : NULL;
}

/* "files" or "adapters": an object of relative file name to sha256 digest, or absent. */
static unsigned check_file_map(const json_t *req, const char *key, corral_error *err)
{
    const json_t *map = json_object_get(req, key);
    if (map && !json_is_object(map) && !json_is_null(map)) {
        corral_error_set(err, "%s must be an object of file name to sha256 digest", key);
        return 400;
    }
    const char *name;
    const json_t *digest;
    json_object_foreach((json_t *)map, name, digest) {
        if (!is_valid_file_path(name)) {
            corral_error_set(err, "invalid file path: '%.200s'", name);
            return 400;
        }
        if (!json_is_string(digest) || !corral_digest_check(json_string_value(digest), err))
            return 400;
    }
    return 200;
}

static unsigned check_request(const json_t *req, corral_error *err)
{
    static const char *const strings[] = {"model", "name", "from", "template", "system",
                                          "quantize", "quantization", "renderer", "parser",
                                          "requires"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if (check_string_field(req, strings[i], err) != 200)
            return 400;
    const char *quantize = requested_level(req);
    if (quantize && !corral_quantize_level(quantize)) {
        corral_error_set(err, "unsupported quantization type %.40s - supported types are %s",
                         quantize, CORRAL_QUANTIZE_LEVELS);
        return 400;
    }
    const json_t *files = json_object_get(req, "files");
    if (check_file_map(req, "files", err) != 200 || check_file_map(req, "adapters", err) != 200 ||
        check_file_map(req, "draft_files", err) != 200)
        return 400;
    const char *draft_quantize = json_string_value(json_object_get(req, "draft_quantize"));
    if (draft_quantize && *draft_quantize) {
        if (json_object_size(json_object_get(req, "draft_files")) == 0) {
            corral_error_set(err, "--draft-quantize requires a DRAFT model");
            return 400;
        }
        if (!corral_quantize_level(draft_quantize)) {
            corral_error_set(err, "unsupported quantization type %.40s - supported types are %s",
                             draft_quantize, CORRAL_QUANTIZE_LEVELS);
            return 400;
        }
    }
    const char *from = json_string_value(json_object_get(req, "from"));
    if ((!from || !*from) && json_object_size(files) == 0) {
        corral_error_set(err, "neither 'from' or 'files' was specified");
        return 400;
    }
    const json_t *license = json_object_get(req, "license");
    if (license && !json_is_string(license) && !json_is_null(license)) {
        size_t i;
        const json_t *item;
        bool ok = json_is_array(license);
        json_array_foreach(license, i, item) ok = ok && json_is_string(item);
        if (!ok) {
            corral_error_set(err, "license must be a string or an array of strings");
            return 400;
        }
    }
    json_t *params = options_normalize(json_object_get(req, "parameters"), err);
    if (!params)
        return 400;
    json_decref(params);
    const char *template_text = json_string_value(json_object_get(req, "template"));
    if (template_text && *template_text) {
        corral_error parse_err = {{0}};
        corral_template *tmpl =
            corral_template_parse_ollama(template_text, strlen(template_text), &parse_err);
        if (!tmpl) {
            corral_error_set(err, "template error: %s", parse_err.message);
            return 400;
        }
        corral_template_free(tmpl);
    }
    const json_t *messages = json_object_get(req, "messages");
    if (messages && !json_is_array(messages) && !json_is_null(messages)) {
        corral_error_set(err, "messages must be an array");
        return 400;
    }
    size_t i;
    const json_t *msg;
    json_array_foreach(messages, i, msg) {
        const char *role = json_string_value(json_object_get(msg, "role"));
        const json_t *content = json_object_get(msg, "content");
        if (!role || (content && !json_is_string(content))) {
            corral_error_set(err, "messages[%zu] must have a string role and content", i);
            return 400;
        }
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool")) {
            corral_error_set(err, "messages[%zu]: role must be one of \"system\", \"user\", "
                                  "\"assistant\" or \"tool\"", i);
            return 400;
        }
    }
    return 200;
}

/* ---- layers ---- */

static pending_layer *add_layer(create_job *job, const char *media_type, const char *digest,
                                uint64_t size_bytes, const char *from, bool existed)
{
    if (job->n_layers == MAX_LAYERS) {
        corral_error_set(job->err, "a model has at most %d layers", MAX_LAYERS);
        return NULL;
    }
    pending_layer *l = &job->layers[job->n_layers++];
    l->media_type = media_type;
    snprintf(l->digest, sizeof l->digest, "%s", digest);
    l->size_bytes = size_bytes;
    l->from = from;
    l->existed = existed;
    return l;
}

static void remove_layers(create_job *job, const char *media_type)
{
    size_t kept = 0;
    for (size_t i = 0; i < job->n_layers; i++) {
        const char *t = job->layers[i].media_type;
        bool drop = strcmp(t, media_type) == 0 ||
                    (strcmp(media_type, CORRAL_MEDIA_TEMPLATE) == 0 &&
                     strcmp(t, CORRAL_MEDIA_PROMPT) == 0);
        if (!drop)
            job->layers[kept++] = job->layers[i];
    }
    job->n_layers = kept;
}

/* Store text as a blob and append it as a layer of media_type. */
static unsigned add_text_layer(create_job *job, const char *media_type, const char *text,
                               size_t len)
{
    char digest[CORRAL_DIGEST_BUF];
    corral_digest_of(text, len, digest);
    bool existed = corral_store_blob_stat(job->store, digest, NULL, NULL) == CORRAL_STORE_OK;
    if (corral_store_blob_write(job->store, text, len, digest, job->err) != CORRAL_STORE_OK)
        return 500;
    return add_layer(job, media_type, digest, len, NULL, existed) ? 200 : 400;
}

static unsigned add_json_layer(create_job *job, const char *media_type, const json_t *value)
{
    /* 15 digits: 0.7 stays "0.7", as ollama's float32 values print */
    char *text = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    if (!text) {
        corral_error_set(job->err, "out of memory");
        return 500;
    }
    unsigned status = add_text_layer(job, media_type, text, strlen(text));
    free(text);
    return status;
}

/* ---- sources ---- */

static unsigned add_gguf_to_config(create_job *job, const char *path)
{
    corral_model_file *file = corral_model_file_open(path, job->err);
    if (!file)
        return 500;
    bool ok = model_info_config_add_gguf(job->config, file);
    corral_model_file_close(file);
    if (!ok) {
        corral_error_set(job->err, "out of memory");
        return 500;
    }
    return 200;
}

static unsigned use_base_model(create_job *job, const char *from)
{
    switch (model_ref_open(job->store, from, &job->base, job->err)) {
    case MODEL_REF_OK: break;
    case MODEL_REF_INVALID_NAME: return 400;
    case MODEL_REF_NOT_FOUND: return 404;
    case MODEL_REF_BROKEN: return 500;
    }
    const corral_manifest *m = job->base->manifest;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!add_layer(job, m->layers[i].media_type, m->layers[i].digest, m->layers[i].size_bytes,
                       job->base->display, true))
            return 400;
    json_t *base_config = model_info_read_config(job->store, m, job->err);
    if (!base_config)
        return 500;
    static const char *const inherited[] = {"renderer", "parser", "requires", "capabilities"};
    for (size_t i = 0; i < sizeof inherited / sizeof inherited[0]; i++) {
        json_t *v = json_object_get(base_config, inherited[i]);
        if (v)
            json_object_set(job->config, inherited[i], v);
    }
    json_decref(base_config);
    return job->base->model_path ? add_gguf_to_config(job, job->base->model_path) : 200;
}

/* The blob of an uploaded file: its path (NULL with the status in *status). */
static char *uploaded_blob(create_job *job, const char *name, const char *digest, uint64_t *size,
                           unsigned *status)
{
    corral_store_status s = corral_store_blob_stat(job->store, digest, size, job->err);
    if (s == CORRAL_STORE_NOT_FOUND) {
        corral_error_set(job->err, "blob %s for '%.200s' not found: upload it with POST "
                         "/api/blobs/%s first", digest, name, digest);
        *status = 404;
        return NULL;
    }
    if (s != CORRAL_STORE_OK) {
        *status = s == CORRAL_STORE_INVALID ? 400 : 500;
        return NULL;
    }
    char *path = corral_store_blob_path(job->store, digest, job->err);
    if (!path)
        *status = 400;
    return path;
}

/* Is it a vision projector (llama.cpp's mmproj files: architecture "clip")? */
static bool is_projector(const corral_model_file *file)
{
    static const char *const keys[] = {"general.architecture", "general.type"};
    static const char *const names[] = {"clip", "projector", "mmproj"};
    for (size_t k = 0; k < 2; k++) {
        long i = corral_model_file_find_meta(file, keys[k]);
        if (i < 0 || corral_model_file_meta_type(file, (size_t)i) != CORRAL_META_STRING)
            continue;
        size_t len;
        const char *value = corral_model_file_meta_string(file, (size_t)i, 0, &len);
        for (size_t n = 0; n < 3; n++)
            if (len == strlen(names[n]) && memcmp(value, names[n], len) == 0)
                return true;
    }
    return false;
}

/* What kind of GGUF this is, as ollama decides the layer type; NULL if Corral cannot use it. */
static const char *gguf_refusal(const corral_model_file *file)
{
    long i = corral_model_file_find_meta(file, "general.type");
    if (i >= 0 && corral_model_file_meta_type(file, (size_t)i) == CORRAL_META_STRING) {
        size_t len;
        const char *type = corral_model_file_meta_string(file, (size_t)i, 0, &len);
        if (len == 7 && memcmp(type, "adapter", 7) == 0)
            return "a LoRA adapter is not a model: give it as an adapter (ADAPTER in a "
                   "Modelfile, 'adapters' in /api/create)";
    }
    if (corral_model_file_find_meta(file, "split.count") >= 0)
        return "split GGUF files are not supported by Corral yet: merge them with "
               "llama.cpp's llama-gguf-split --merge";
    return NULL;
}

static void forget_gguf_config(json_t *config);

static unsigned use_gguf_file(create_job *job, const char *name, const char *digest,
                              bool *have_model)
{
    if (ends_with(name, ".bin") || ends_with(name, ".pth")) {
        corral_error_set(job->err, "'%.200s': Corral converts safetensors checkpoints, not "
                         "PyTorch weights: save the model with safetensors first", name);
        return 400;
    }
    if (ends_with(name, ".json") || ends_with(name, ".model") || ends_with(name, ".jinja"))
        return 200; /* side files of a checkpoint, without its weights: not needed */
    uint64_t size;
    unsigned status = 200;
    char *path = uploaded_blob(job, name, digest, &size, &status);
    if (!path)
        return status;
    corral_model_file *file = corral_model_file_open(path, job->err);
    if (!file) {
        free(path);
        corral_error_prefix(job->err, "'%.200s' is not a valid GGUF file", name);
        return 400;
    }
    /* a model carrying its own vision tower: checked as the runner will load it */
    corral_error tower_err = {{0}};
    bool carries_tower = corral_model_file_has_vision(file) && !is_projector(file);
    corral_mmproj *tower = carries_tower ? corral_mmproj_load(path, &tower_err) : NULL;
    bool tower_ok = !carries_tower || tower;
    corral_mmproj_free(tower);
    free(path);
    if (!tower_ok) {
        corral_model_file_close(file);
        corral_error_set(job->err, "'%.200s': its vision tower: %s", name, tower_err.message);
        return 400;
    }
    if (is_projector(file)) { /* checked against the model in use_projector */
        corral_model_file_close(file);
        if (job->projector_name) {
            corral_error_set(job->err, "more than one vision projector among 'files'");
            return 400;
        }
        job->projector_name = name;
        snprintf(job->projector_digest, sizeof job->projector_digest, "%s", digest);
        job->projector_size = size;
        return 200;
    }
    if (*have_model) {
        corral_model_file_close(file);
        corral_error_set(job->err, "more than one GGUF model file: Corral imports one GGUF "
                         "file per model");
        return 400;
    }
    const char *refusal = gguf_refusal(file);
    if (!refusal && job->base) /* the uploaded file describes the model now */
        forget_gguf_config(job->config);
    bool ok = !refusal && model_info_config_add_gguf(job->config, file);
    corral_model_file_close(file);
    if (refusal) {
        corral_error_set(job->err, "'%.200s': %s", name, refusal);
        return 400;
    }
    if (!ok) {
        corral_error_set(job->err, "out of memory");
        return 500;
    }
    *have_model = true;
    corral_store_blob_touch(job->store, digest, NULL);
    /* new weights replace a base model's; its GGUF-derived config goes with them */
    remove_layers(job, CORRAL_MEDIA_MODEL);
    return add_layer(job, CORRAL_MEDIA_MODEL, digest, size, NULL, true) ? 200 : 400;
}

static void forget_gguf_config(json_t *config)
{
    for (size_t i = 0; i < sizeof gguf_config_keys / sizeof gguf_config_keys[0]; i++)
        json_object_del(config, gguf_config_keys[i]);
}

static void report(create_job *job, const char *fmt, const char *arg);

/* A file in blobs/ for the engine to write, which then becomes a blob by rename
 * (adopt_scratch); what a crash leaves there the start-up housekeeping removes. */
static char *scratch_file(create_job *job, const char *prefix)
{
    size_t len = strlen(corral_store_root(job->store)) + strlen(prefix) + 32;
    char *path = malloc(len);
    if (!path) {
        corral_error_set(job->err, "out of memory");
        return NULL;
    }
    snprintf(path, len, "%s/blobs/%s-XXXXXX", corral_store_root(job->store), prefix);
    int fd = mkstemp(path);
    if (fd < 0) {
        corral_error_set(job->err, "cannot create %s: %s", path, strerror(errno));
        free(path);
        return NULL;
    }
    close(fd);
    return path;
}

/* The finished scratch file at *path made a blob without a copy (the store hashes it and
 * renames it into place); *path is freed and cleared once nothing is left there. Returns the
 * blob's path, or NULL with the error set. */
static char *adopt_scratch(create_job *job, char **path, char digest[CORRAL_DIGEST_BUF],
                           uint64_t *size, bool *existed)
{
    corral_store_status s = corral_store_blob_adopt(job->store, *path, digest, size, existed,
                                                    job->err);
    if (s != CORRAL_STORE_INVALID) { /* adopted or removed; an INVALID path job_free removes */
        free(*path);
        *path = NULL;
    }
    return s == CORRAL_STORE_OK ? corral_store_blob_path(job->store, digest, job->err) : NULL;
}

/*
 * A Hugging Face checkpoint among 'files' (ollama's CLI uploads a FROM directory's
 * *.safetensors, *.json, chat_template.jinja and tokenizer.model): everything the conversion
 * reads is checked here, before the reply (a bad checkpoint is a 400 that leaves nothing
 * behind); the GGUF is written in the job's steps (PHASE_CONVERT) and then becomes the model
 * layer. Files of another kind are refused; files the conversion does not read are ignored,
 * as ollama ignores them.
 */
static unsigned use_checkpoint(create_job *job, const json_t *files)
{
    size_t n = json_object_size(files);
    job->checkpoint = calloc(n, sizeof *job->checkpoint);
    if (!job->checkpoint) {
        corral_error_set(job->err, "out of memory");
        return 500;
    }
    unsigned status = 200;
    const char *name;
    const json_t *digest;
    json_object_foreach((json_t *)files, name, digest) {
        if (!hf_is_checkpoint_file(name)) {
            if (!ends_with(name, ".json") && !ends_with(name, ".jinja") &&
                !ends_with(name, ".model") && !ends_with(name, ".safetensors")) {
                corral_error_set(job->err, "'%.200s' is not part of a safetensors checkpoint: "
                                 "create a GGUF model apart from one", name);
                return 400;
            }
            continue;
        }
        uint64_t size;
        char *path = uploaded_blob(job, name, json_string_value(digest), &size, &status);
        if (!path)
            return status;
        /* name lives in job->request, path until job_free */
        job->checkpoint[job->n_checkpoint++] = (hf_file){name, path};
    }
    hf_status opened = hf_converter_open(job->checkpoint, job->n_checkpoint, &job->converter,
                                         job->err);
    if (opened != HF_OK)
        return opened == HF_INVALID ? 400 : 500;
    job->phase = PHASE_CONVERT_BEGIN;
    return 200;
}

static unsigned use_files(create_job *job, const json_t *files)
{
    const char *file_name;
    const json_t *file_digest;
    json_object_foreach((json_t *)files, file_name, file_digest)
        if (hf_is_weights_file(file_name))
            return use_checkpoint(job, files);
    bool have_model = false;
    const char *name;
    const json_t *digest;
    json_object_foreach((json_t *)files, name, digest) {
        unsigned status = use_gguf_file(job, name, json_string_value(digest), &have_model);
        if (status != 200)
            return status;
    }
    if (!have_model && !job->projector_name && json_object_size(files)) {
        corral_error_set(job->err, "no GGUF model file among 'files'");
        return 400;
    }
    return 200;
}

/* The model layer so far (the request's file or the base's), or NULL. */
static const pending_layer *model_layer(const create_job *job)
{
    const pending_layer *model = NULL;
    for (size_t i = 0; i < job->n_layers; i++)
        if (strcmp(job->layers[i].media_type, CORRAL_MEDIA_MODEL) == 0)
            model = &job->layers[i];
    return model;
}

/* Whether the GGUFs at a and b have one vocabulary, token for token; 400 with err if not. */
static unsigned same_vocabulary(const char *model_path, const char *draft_path, corral_error *err)
{
    corral_vocab *a = corral_vocab_open(model_path, err);
    corral_vocab *b = a ? corral_vocab_open(draft_path, err) : NULL;
    bool same = a && b && corral_vocab_same(a, b, err);
    corral_vocab_free(a);
    corral_vocab_free(b);
    return same ? 200 : 400;
}

/*
 * A draft model for speculative decoding (ollama's draft_files, a Modelfile's DRAFT): one GGUF
 * model with the model's vocabulary token for token, since the runner checks its guesses by
 * token id. It replaces a base model's draft; new weights keep the base's draft only if their
 * vocabulary is still its.
 */
static unsigned use_draft(create_job *job, const json_t *draft_files)
{
    const pending_layer *model = model_layer(job);
    const pending_layer *base_draft = NULL;
    for (size_t i = 0; i < job->n_layers; i++)
        if (strcmp(job->layers[i].media_type, CORRAL_MEDIA_DRAFT) == 0)
            base_draft = &job->layers[i];
    size_t n = json_object_size(draft_files);
    if (n == 0 && !base_draft)
        return 200;
    if (n > 1) {
        corral_error_set(job->err, "more than one draft model file: a model has one draft");
        return 400;
    }
    if (!model) {
        corral_error_set(job->err, "a draft model needs a model: give 'from' or 'files' too");
        return 400;
    }
    const char *name = "the base model's draft", *digest = base_draft ? base_draft->digest : "";
    uint64_t size = base_draft ? base_draft->size_bytes : 0;
    unsigned status = 200;
    char *path = NULL;
    if (n == 1) {
        void *iter = json_object_iter((json_t *)draft_files);
        name = json_object_iter_key(iter);
        digest = json_string_value(json_object_iter_value(iter));
        path = uploaded_blob(job, name, digest, &size, &status);
    } else {
        path = corral_store_blob_path(job->store, digest, job->err);
        status = path ? 200 : 500;
    }
    if (!path)
        return status;
    char *model_path = corral_store_blob_path(job->store, model->digest, job->err);
    corral_model_file *file = model_path ? corral_model_file_open(path, job->err) : NULL;
    const char *refusal = file ? gguf_refusal(file) : NULL;
    corral_model_file_close(file);
    corral_error why = {{0}};
    if (!model_path) {
        status = 500;
    } else if (!file) {
        corral_error_prefix(job->err, "'%.200s' is not a valid GGUF file", name);
        status = 400;
    } else if (refusal) {
        corral_error_set(job->err, "'%.200s': %s", name, refusal);
        status = 400;
    } else if (strcmp(digest, model->digest) == 0) {
        corral_error_set(job->err, "the draft model must not be the model itself");
        status = 400;
    } else if (same_vocabulary(model_path, path, &why) != 200) {
        corral_error_set(job->err, "'%.200s' cannot draft for this model: its vocabulary is "
                         "not the model's (%s)", name, why.message);
        status = 400;
    }
    free(model_path);
    free(path);
    if (status != 200)
        return status;
    corral_store_blob_touch(job->store, digest, NULL);
    char kept[CORRAL_DIGEST_BUF];
    snprintf(kept, sizeof kept, "%s", digest); /* the base's layer goes next */
    remove_layers(job, CORRAL_MEDIA_DRAFT);
    return add_layer(job, CORRAL_MEDIA_DRAFT, kept, size, NULL, true) ? 200 : 400;
}

/* The engine's message names files by their blob paths: say the uploaded name instead. */
static void name_the_file(corral_error *err, const char *path, const char *label)
{
    size_t len = strlen(path);
    if (strncmp(err->message, path, len) != 0)
        return;
    corral_error copy = *err;
    corral_error_set(err, "%s%s", label, copy.message + len);
}

/* Does 'adapters' hold a safetensors adapter (PEFT's files) rather than GGUF adapters? */
static bool is_peft_adapter(const json_t *adapters)
{
    const char *name;
    const json_t *digest;
    json_object_foreach((json_t *)adapters, name, digest)
        if (ends_with(name, ".safetensors"))
            return true;
    return false;
}

/*
 * A PEFT LoRA adapter among 'adapters' (an ADAPTER directory's adapter_config.json and
 * adapter_model.safetensors), converted for the model at model_path into a GGUF adapter that
 * is checked against the model and then becomes the adapter layer. Its other JSON files are
 * ignored, as a checkpoint's are; files of another kind are refused.
 */
static unsigned use_peft_adapter(create_job *job, const json_t *adapters,
                                 const char *model_path)
{
    hf_file files[2];
    size_t n = 0;
    unsigned status = 200;
    const char *name;
    const json_t *digest;
    json_object_foreach((json_t *)adapters, name, digest) {
        if (!hf_is_adapter_file(name)) {
            if (ends_with(name, ".json"))
                continue;
            corral_error_set(job->err, "'%.200s' is not part of a safetensors LoRA adapter ("
                             HF_ADAPTER_CONFIG " and " HF_ADAPTER_WEIGHTS ")", name);
            status = 400;
            break;
        }
        uint64_t size;
        char *path = uploaded_blob(job, name, json_string_value(digest), &size, &status);
        if (!path)
            break;
        files[n++] = (hf_file){name, path}; /* two names at most: is_adapter_file's */
    }
    char *out = status == 200 ? scratch_file(job, "corral-adapter") : NULL;
    if (status == 200 && !out)
        status = 500;
    if (out) {
        report(job, "%s", "converting adapter");
        hf_status converted = hf_adapter_convert(files, n, model_path, out, job->err);
        if (converted != HF_OK)
            status = converted == HF_INVALID ? 400 : 500;
    }
    /* checked before it enters the store, so that a refusal leaves nothing behind */
    if (status == 200 && !corral_lora_check(out, model_path, job->err)) {
        name_the_file(job->err, out, "the converted adapter");
        status = 400;
    }
    char adapter_digest[CORRAL_DIGEST_BUF];
    uint64_t size = 0;
    bool existed = false;
    char *path = status == 200 ? adopt_scratch(job, &out, adapter_digest, &size, &existed)
                               : NULL;
    if (status == 200 && !path)
        status = 500;
    free(path);
    if (out)
        unlink(out);
    free(out);
    for (size_t i = 0; i < n; i++)
        free((char *)files[i].path);
    if (status != 200)
        return status;
    return add_layer(job, CORRAL_MEDIA_ADAPTER, adapter_digest, size, NULL, existed) ? 200 : 400;
}

/*
 * LoRA adapters, each checked against the model layer (the request's file or the base's) as
 * the runner will apply it, so that an adapter for another model is a 400 naming the tensor
 * here rather than a runner that fails to load. They follow the base's own adapters.
 */
static unsigned use_adapters(create_job *job, const json_t *adapters)
{
    const pending_layer *model = model_layer(job);
    if (!model) {
        if (json_object_size(adapters) == 0)
            return 200;
        corral_error_set(job->err, "an adapter needs a base model: give 'from' or 'files' too");
        return 400;
    }
    unsigned status = 200;
    char *model_path = corral_store_blob_path(job->store, model->digest, job->err);
    if (!model_path)
        return 500;
    /* the base model's adapters, when 'files' gave it new weights: they must fit those too */
    for (size_t i = 0; job->base && json_object_size(json_object_get(job->request, "files")) &&
                       i < job->n_layers; i++) {
        if (strcmp(job->layers[i].media_type, CORRAL_MEDIA_ADAPTER) != 0)
            continue;
        char *path = corral_store_blob_path(job->store, job->layers[i].digest, job->err);
        if (!path) {
            free(model_path);
            return 500;
        }
        bool fits = corral_lora_check(path, model_path, job->err);
        if (!fits)
            name_the_file(job->err, path, "the base model's adapter");
        free(path);
        if (!fits) {
            free(model_path);
            return 400;
        }
    }
    if (is_peft_adapter(adapters)) {
        status = use_peft_adapter(job, adapters, model_path);
        free(model_path);
        return status;
    }
    const char *name;
    const json_t *digest_value;
    json_object_foreach((json_t *)adapters, name, digest_value) {
        const char *digest = json_string_value(digest_value);
        uint64_t size;
        char *path = uploaded_blob(job, name, digest, &size, &status);
        if (!path)
            break;
        bool fits = corral_lora_check(path, model_path, job->err);
        if (!fits) {
            char label[256];
            snprintf(label, sizeof label, "'%.200s'", name);
            name_the_file(job->err, path, label);
        }
        free(path);
        if (!fits) {
            status = 400;
            break;
        }
        corral_store_blob_touch(job->store, digest, NULL);
        if (!add_layer(job, CORRAL_MEDIA_ADAPTER, digest, size, NULL, true)) {
            status = 400;
            break;
        }
    }
    free(model_path);
    return status;
}

/*
 * The vision projector of 'files', checked as the runner will load it: its embeddings must
 * fit the model layer (the request's file or the base's). It replaces a base's projector.
 */
static unsigned use_projector(create_job *job)
{
    if (!job->projector_name)
        return 200;
    const pending_layer *model = NULL;
    for (size_t i = 0; i < job->n_layers; i++)
        if (strcmp(job->layers[i].media_type, CORRAL_MEDIA_MODEL) == 0)
            model = &job->layers[i];
    if (!model) {
        corral_error_set(job->err, "'%.200s': a vision projector needs a model: give the "
                         "model's GGUF in 'files' or 'from' too", job->projector_name);
        return 400;
    }
    char *model_path = corral_store_blob_path(job->store, model->digest, job->err);
    char *path = model_path ? corral_store_blob_path(job->store, job->projector_digest, job->err)
                            : NULL;
    if (!path) {
        free(model_path);
        return 500;
    }
    corral_error err = {{0}};
    corral_mmproj *mm = corral_mmproj_load(path, &err);
    corral_model *text = mm ? corral_model_load(model_path, &err) : NULL;
    bool fits = text && corral_mmproj_fits(mm, text, &err);
    corral_model_free(text);
    corral_mmproj_free(mm);
    free(path);
    free(model_path);
    if (!fits) {
        corral_error_set(job->err, "'%.200s': %s", job->projector_name, err.message);
        return 400;
    }
    corral_store_blob_touch(job->store, job->projector_digest, NULL);
    remove_layers(job, CORRAL_MEDIA_PROJECTOR);
    return add_layer(job, CORRAL_MEDIA_PROJECTOR, job->projector_digest, job->projector_size,
                     NULL, true) ? 200 : 400;
}

/* ---- the request's own layers ---- */

static unsigned set_text(create_job *job, const char *media_type, const char *text)
{
    remove_layers(job, media_type);
    return add_text_layer(job, media_type, text, strlen(text));
}

static unsigned add_licenses(create_job *job, const json_t *license)
{
    if (json_is_string(license))
        return json_string_length(license)
                   ? add_text_layer(job, CORRAL_MEDIA_LICENSE, json_string_value(license),
                                    json_string_length(license))
                   : 200;
    size_t i;
    const json_t *item;
    json_array_foreach(license, i, item) {
        unsigned status = add_text_layer(job, CORRAL_MEDIA_LICENSE, json_string_value(item),
                                         json_string_length(item));
        if (status != 200)
            return status;
    }
    return 200;
}

/* The request's parameters over the base model's (new keys win), as one params layer. */
static unsigned set_parameters(create_job *job, const json_t *parameters)
{
    json_t *params = options_normalize(parameters, job->err);
    if (!params)
        return 400;
    if (job->base && json_is_object(job->base->params)) {
        const char *key;
        json_t *value;
        json_object_foreach(job->base->params, key, value)
            if (!json_object_get(params, key))
                json_object_set(params, key, value);
    }
    unsigned status = 200;
    if (json_object_size(params)) {
        remove_layers(job, CORRAL_MEDIA_PARAMS);
        status = add_json_layer(job, CORRAL_MEDIA_PARAMS, params);
    }
    json_decref(params);
    return status;
}

static unsigned set_messages(create_job *job, const json_t *messages)
{
    if (json_array_size(messages) == 0)
        return 200;
    json_t *kept = json_array();
    size_t i;
    const json_t *msg;
    json_array_foreach(messages, i, msg) {
        const char *content = json_string_value(json_object_get(msg, "content"));
        json_array_append_new(kept, json_pack("{s:O,s:s}", "role", json_object_get(msg, "role"),
                                              "content", content ? content : ""));
    }
    remove_layers(job, CORRAL_MEDIA_MESSAGES);
    unsigned status = add_json_layer(job, CORRAL_MEDIA_MESSAGES, kept);
    json_decref(kept);
    return status;
}

static unsigned apply_request_layers(create_job *job, const json_t *req)
{
    const char *template_text = json_string_value(json_object_get(req, "template"));
    const char *system = json_string_value(json_object_get(req, "system"));
    unsigned status = 200;
    if (template_text && *template_text)
        status = set_text(job, CORRAL_MEDIA_TEMPLATE, template_text);
    if (status == 200 && system && *system)
        status = set_text(job, CORRAL_MEDIA_SYSTEM, system);
    if (status == 200)
        status = add_licenses(job, json_object_get(req, "license"));
    if (status == 200)
        status = set_parameters(job, json_object_get(req, "parameters"));
    /* kept in the config for clients that read them (ollama names its prompt renderer and
     * output parser here); the request's value replaces the base model's */
    static const char *const kept[] = {"renderer", "parser", "requires"};
    for (size_t i = 0; status == 200 && i < sizeof kept / sizeof kept[0]; i++) {
        const char *value = json_string_value(json_object_get(req, kept[i]));
        if (value && *value && json_object_set_new(job->config, kept[i], json_string(value)) != 0) {
            corral_error_set(job->err, "out of memory");
            status = 500;
        }
    }
    if (status == 200)
        status = set_messages(job, json_object_get(req, "messages"));
    return status;
}

/* ---- config and manifest ---- */

/* ConfigV2 in ollama's field order, with the fixed architecture/os and the layer digests. */
static json_t *final_config(const create_job *job)
{
    json_t *out = json_object();
    static const char *const keys[] = {"model_format", "model_family", "model_families",
                                       "model_type", "file_type", "renderer", "parser",
                                       "requires", "capabilities", "context_length",
                                       "embedding_length"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(job->config, keys[i]);
        if (v)
            json_object_set(out, keys[i], v);
        else if (i < 5)
            json_object_set_new(out, keys[i], i == 2 ? json_null() : json_string(""));
    }
    json_t *diff_ids = json_array();
    for (size_t i = 0; i < job->n_layers; i++)
        json_array_append_new(diff_ids, json_string(job->layers[i].digest));
    json_object_set_new(out, "architecture", json_string("amd64"));
    json_object_set_new(out, "os", json_string("linux"));
    json_object_set_new(out, "rootfs", json_pack("{s:s,s:o}", "type", "layers", "diff_ids",
                                                 diff_ids));
    return out;
}

static void report(create_job *job, const char *fmt, const char *arg)
{
    char status[160];
    snprintf(status, sizeof status, fmt, arg);
    json_array_append_new(job->progress, json_pack("{s:s}", "status", status));
}

static unsigned write_manifest(create_job *job, const corral_model_name *name)
{
    json_t *config = final_config(job);
    char *text = config ? json_dumps(config, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(config);
    if (!text) {
        corral_error_set(job->err, "out of memory");
        return 500;
    }
    char config_digest[CORRAL_DIGEST_BUF];
    size_t config_len = strlen(text);
    corral_store_status s = corral_store_blob_write(job->store, text, config_len, config_digest,
                                                    job->err);
    free(text);
    if (s != CORRAL_STORE_OK)
        return 500;
    corral_manifest *m = corral_manifest_create();
    if (!m) {
        corral_error_set(job->err, "out of memory");
        return 500;
    }
    bool ok = corral_manifest_set_config(m, CORRAL_MEDIA_CONFIG, config_digest, config_len,
                                         job->err);
    for (size_t i = 0; ok && i < job->n_layers; i++) {
        const pending_layer *l = &job->layers[i];
        ok = corral_manifest_add_layer(m, l->media_type, l->digest, l->size_bytes, l->from,
                                       job->err);
        report(job, l->existed ? "using existing layer %s" : "creating new layer %s", l->digest);
    }
    report(job, "%s", "writing manifest");
    corral_model_name stored;
    bool replacing = corral_store_resolve(job->store, name, &stored, NULL) == CORRAL_STORE_OK;
    if (ok)
        ok = corral_store_manifest_write(job->store, name, m, job->err) == CORRAL_STORE_OK;
    corral_manifest_free(m);
    if (!ok)
        return 500;
    /* layers only the replaced manifest used are garbage now, as after ollama's create */
    if (replacing)
        corral_store_gc(job->store, GC_GRACE_S, NULL, NULL);
    report(job, "%s", "success");
    return 200;
}

/* ---- quantization ---- */

/* The level a draft_quantize request asks for its draft model, or NULL. */
static const char *requested_draft_level(const json_t *req)
{
    const char *level = json_string_value(json_object_get(req, "draft_quantize"));
    return level && *level ? level : NULL;
}

/* The rewrite of the model's layer (draft false) or the draft's to level, into *task: its blob
 * must be F32/F16/BF16. No such layer leaves *task empty. */
static unsigned prepare_quantization(create_job *job, const char *level, bool draft,
                                     quantize_task *task)
{
    const char *media_type = draft ? CORRAL_MEDIA_DRAFT : CORRAL_MEDIA_MODEL;
    pending_layer *layer = NULL;
    for (size_t i = 0; i < job->n_layers; i++)
        if (strcmp(job->layers[i].media_type, media_type) == 0)
            layer = &job->layers[i];
    if (!layer)
        return 200; /* nothing to quantize, as in ollama */
    char *path = corral_store_blob_path(job->store, layer->digest, job->err);
    if (!path)
        return 500;
    task->quantizer = corral_quantizer_open(path, level, 0, job->err);
    free(path);
    if (!task->quantizer) {
        if (draft)
            corral_error_prefix(job->err, "the draft model");
        return 400;
    }
    task->level = corral_quantize_level(level);
    task->source_size = layer->size_bytes;
    task->draft = draft;
    return 200;
}

static void report_quantizing(create_job *job)
{
    char status[96];
    snprintf(status, sizeof status, "quantizing %s %s to %s",
             corral_quantizer_source_type(job->quantize.quantizer),
             job->quantize.draft ? "draft model" : "model", job->quantize.level);
    uint64_t done = corral_quantizer_bytes_done(job->quantize.quantizer);
    uint64_t total = corral_quantizer_bytes_total(job->quantize.quantizer);
    json_t *line = json_pack("{s:s,s:s,s:I}", "status", status, "digest", QUANTIZE_DIGEST,
                             "total", (json_int_t)job->quantize.source_size);
    if (line && done > 0) /* ollama omits zero values */
        json_object_set_new(line, "completed",
                            json_integer((json_int_t)((double)done / (double)total *
                                                      (double)job->quantize.source_size)));
    json_array_append_new(job->progress, line);
}

static unsigned begin_quantization(create_job *job)
{
    if (!(job->quantized_path = scratch_file(job, "corral-quantize")))
        return 500;
    if (!corral_quantizer_begin(job->quantize.quantizer, job->quantized_path, job->err))
        return 500;
    report_quantizing(job);
    return 200;
}

/* The quantized file replaces the layer it came from (in place, as ollama does); the model's
 * also replaces its config's description. */
static unsigned import_quantized(create_job *job)
{
    json_array_append_new(job->progress, json_pack("{s:s}", "status", "verifying conversion"));
    char digest[CORRAL_DIGEST_BUF];
    uint64_t size;
    bool existed;
    char *blob = adopt_scratch(job, &job->quantized_path, digest, &size, &existed);
    if (!blob)
        return 500;
    unsigned status = 200;
    if (!job->quantize.draft) {
        forget_gguf_config(job->config);
        status = add_gguf_to_config(job, blob);
    }
    free(blob);
    for (size_t i = 0; status == 200 && i < job->n_layers; i++) {
        pending_layer *l = &job->layers[i];
        if (strcmp(l->media_type,
                   job->quantize.draft ? CORRAL_MEDIA_DRAFT : CORRAL_MEDIA_MODEL) == 0) {
            snprintf(l->digest, sizeof l->digest, "%s", digest);
            l->size_bytes = size;
            l->from = NULL;
            l->existed = existed;
        }
    }
    return status;
}

/* ---- conversion of a checkpoint ---- */

static unsigned use_model_layer(create_job *job);

static void report_converting(create_job *job)
{
    json_t *line = json_pack("{s:s,s:I}", "status", "converting model", "total",
                             (json_int_t)hf_converter_bytes_total(job->converter));
    uint64_t done = hf_converter_bytes_done(job->converter);
    if (line && done > 0) /* ollama omits zero values */
        json_object_set_new(line, "completed", json_integer((json_int_t)done));
    json_array_append_new(job->progress, line);
}

static unsigned begin_conversion(create_job *job)
{
    if (!(job->converted_path = scratch_file(job, "corral-convert")))
        return 500;
    hf_status begun = hf_converter_begin(job->converter, job->converted_path, job->err);
    if (begun != HF_OK)
        return begun == HF_INVALID ? 400 : 500;
    report_converting(job);
    return 200;
}

/* The converted GGUF becomes the model layer (replacing a base's), with its config; then
 * what needed a model layer runs. */
static unsigned import_converted(create_job *job)
{
    char digest[CORRAL_DIGEST_BUF];
    uint64_t size;
    bool existed;
    char *blob = adopt_scratch(job, &job->converted_path, digest, &size, &existed);
    if (!blob)
        return 500;
    forget_gguf_config(job->config); /* a base model's: the checkpoint describes the model */
    unsigned status = add_gguf_to_config(job, blob);
    free(blob);
    if (status != 200)
        return status;
    remove_layers(job, CORRAL_MEDIA_MODEL);
    if (!add_layer(job, CORRAL_MEDIA_MODEL, digest, size, NULL, existed))
        return 400;
    return use_model_layer(job);
}

/* ---- the job ---- */

static void job_free(create_job *job)
{
    if (!job)
        return;
    background_pull_free(job->pull); /* a pull still running stops; its partial files stay */
    /* an unfinished output's temporary file goes too */
    corral_quantizer_free(job->quantize.quantizer);
    corral_quantizer_free(job->then_quantize.quantizer);
    hf_converter_free(job->converter);    /* so does an unfinished conversion's */
    for (size_t i = 0; i < job->n_checkpoint; i++)
        free((char *)job->checkpoint[i].path);
    free(job->checkpoint);
    if (job->converted_path)
        unlink(job->converted_path);
    free(job->converted_path);
    if (job->quantized_path)
        unlink(job->quantized_path);
    free(job->quantized_path);
    json_decref(job->config);
    json_decref(job->progress);
    json_decref(job->request);
    model_ref_free(job->base);
    free(job);
}

/* The request's own sources, once the base model (if any) is in the store. */
static unsigned use_sources(create_job *job)
{
    const json_t *req = job->request;
    const char *from = json_string_value(json_object_get(req, "from"));
    const json_t *files = json_object_get(req, "files");
    unsigned status = 200;
    if (from && *from)
        status = use_base_model(job, from);
    if (status == 200 && json_object_size(files)) {
        report(job, "%s", "parsing GGUF");
        status = use_files(job, files);
    }
    if (status == 200 && job->converter)
        return 200; /* what needs the model layer waits for the conversion (use_model_layer) */
    return status == 200 ? use_model_layer(job) : status;
}

/* What needs the model layer: projector, adapters and draft checked against it; quantization
 * of the model, or else of the draft (which otherwise follows the model's, import_quantized). */
static unsigned use_model_layer(create_job *job)
{
    const json_t *req = job->request;
    unsigned status = use_projector(job);
    if (status == 200)
        status = use_adapters(job, json_object_get(req, "adapters"));
    if (status == 200)
        status = use_draft(job, json_object_get(req, "draft_files"));
    if (status == 200 && requested_level(req))
        status = prepare_quantization(job, requested_level(req), false, &job->quantize);
    if (status == 200 && requested_draft_level(req))
        status = prepare_quantization(job, requested_draft_level(req), true,
                                      job->quantize.quantizer ? &job->then_quantize
                                                              : &job->quantize);
    if (status == 200 && job->quantize.quantizer)
        job->phase = PHASE_QUANTIZE_BEGIN;
    return status;
}

/* The pull's progress so far into job->progress, without its final "success": that word ends
 * the create. True once the pull has ended. */
static bool collect_pull_progress(create_job *job)
{
    size_t seen = json_array_size(job->progress);
    bool ended = background_pull_collect(job->pull, job->progress);
    for (size_t i = seen; i < json_array_size(job->progress);) {
        const char *status = json_string_value(json_object_get(json_array_get(job->progress, i),
                                                               "status"));
        if (status && strcmp(status, "success") == 0)
            json_array_remove(job->progress, i);
        else
            i++;
    }
    return ended;
}

/* The end of a base model's pull: its status, then the sources that needed the base. */
static unsigned finish_pull(create_job *job)
{
    const char *from = json_string_value(json_object_get(job->request, "from"));
    corral_registry_status pulled = background_pull_result(job->pull, job->err);
    background_pull_free(job->pull);
    job->pull = NULL;
    job->phase = PHASE_FINISH;
    switch (pulled) {
    case CORRAL_REGISTRY_OK: return use_sources(job);
    case CORRAL_REGISTRY_NOT_FOUND:
        corral_error_set(job->err, "model '%s' not found", from);
        return 404;
    case CORRAL_REGISTRY_INVALID: return 400;
    case CORRAL_REGISTRY_UNAUTHORIZED: return 401;
    case CORRAL_REGISTRY_FAILED: return 502; /* the registry, not this request, failed */
    case CORRAL_REGISTRY_CANCELLED:
    case CORRAL_REGISTRY_IO: break;
    }
    return 500;
}

/*
 * A base model that is not in the store is pulled, as ollama does. The pull starts before the
 * reply, and the reply waits for the manifest: a name no registry knows is refused with its
 * status (404) before anything streams, and only the blobs' download streams as progress.
 */
static unsigned start_pull(create_job *job, const char *from,
                           const corral_registry_options *pull_opts)
{
    corral_registry_options opts = {0};
    if (pull_opts)
        opts = *pull_opts;
    opts.insecure = opts.insecure || json_is_true(json_object_get(job->request, "insecure"));
    if (!(job->pull = background_pull_start(job->store, from, &opts, job->err)))
        return 500;
    job->phase = PHASE_PULL;
    for (;;) {
        size_t seen = json_array_size(job->progress);
        if (collect_pull_progress(job))
            return finish_pull(job);
        for (size_t i = seen; i < json_array_size(job->progress); i++)
            if (json_object_get(json_array_get(job->progress, i), "digest"))
                return 200; /* the manifest is in: its blobs are on their way */
    }
}

/* Everything that can make the request a bad one, before any reply or write: 200 with *out. */
static unsigned job_prepare(corral_store *store, const json_t *req,
                            const corral_registry_options *pull_opts, corral_error *err,
                            create_job **out)
{
    unsigned status = check_request(req, err);
    if (status != 200)
        return status;
    const char *name_text = json_string_value(json_object_get(req, "model"));
    if (!name_text || !*name_text)
        name_text = json_string_value(json_object_get(req, "name"));
    create_job *job = calloc(1, sizeof *job);
    if (!job || !(job->progress = json_array()) || !(job->config = json_object())) {
        job_free(job);
        corral_error_set(err, "out of memory");
        return 500;
    }
    job->store = store;
    job->request = json_incref((json_t *)req);
    job->err = err;
    job->phase = PHASE_FINISH;
    const char *from = json_string_value(json_object_get(req, "from"));
    if (!name_text || !corral_model_name_parse(name_text, &job->name, NULL)) {
        corral_error_set(err, "invalid model name");
        status = 400;
    } else if (from && *from) {
        model_ref *base = NULL;
        model_ref_status found = model_ref_open(store, from, &base, err);
        model_ref_free(base);
        if (found == MODEL_REF_NOT_FOUND)
            status = start_pull(job, from, pull_opts);
        else
            status = use_sources(job);
    } else {
        status = use_sources(job);
    }
    if (status != 200) {
        job_free(job);
        return status;
    }
    *out = job;
    return 200;
}

/* The next piece of work; its statuses are appended to job->progress. */
static unsigned job_step(create_job *job)
{
    bool done = false;
    unsigned status = 200;
    switch (job->phase) {
    case PHASE_PULL:
        if (collect_pull_progress(job))
            status = finish_pull(job);
        break;
    case PHASE_CONVERT_BEGIN:
        status = begin_conversion(job);
        job->phase = PHASE_CONVERT;
        break;
    case PHASE_CONVERT: {
        hf_status stepped = hf_converter_step(job->converter, &done, job->err);
        if (stepped != HF_OK)
            return stepped == HF_INVALID ? 400 : 500;
        report_converting(job);
        if (done) {
            hf_converter_free(job->converter);
            job->converter = NULL;
            job->phase = PHASE_CONVERT_IMPORT;
        }
        break;
    }
    case PHASE_CONVERT_IMPORT:
        job->phase = PHASE_FINISH; /* quantization, when asked, goes next */
        status = import_converted(job);
        break;
    case PHASE_QUANTIZE_BEGIN:
        status = begin_quantization(job);
        job->phase = PHASE_QUANTIZE;
        break;
    case PHASE_QUANTIZE:
        if (!corral_quantizer_step(job->quantize.quantizer, &done, job->err))
            return 500;
        report_quantizing(job);
        if (done) {
            corral_quantizer_free(job->quantize.quantizer);
            job->quantize.quantizer = NULL;
            job->phase = PHASE_IMPORT;
        }
        break;
    case PHASE_IMPORT:
        status = import_quantized(job);
        job->phase = PHASE_FINISH;
        if (status == 200 && job->then_quantize.quantizer) {
            job->quantize = job->then_quantize; /* the draft's turn */
            job->then_quantize = (quantize_task){0};
            job->phase = PHASE_QUANTIZE_BEGIN;
        }
        break;
    case PHASE_FINISH:
        status = apply_request_layers(job, job->request);
        if (status == 200)
            status = write_manifest(job, &job->name);
        job->phase = PHASE_DONE;
        break;
    case PHASE_DONE:
        break;
    }
    return status;
}

/* ---- the reply ---- */

/* A streamed reply: the job runs a step whenever every line so far has been sent. */
typedef struct create_stream {
    create_job *job;
    corral_error err;
    size_t next_line;  /* in job->progress */
    char *line;        /* being sent, with its newline */
    size_t line_len, line_pos;
    bool finished;
} create_stream;

static ssize_t stream_next(void *state, char *buf, size_t max)
{
    create_stream *s = state;
    while (s->line_pos == s->line_len) {
        free(s->line);
        s->line = NULL;
        s->line_len = s->line_pos = 0;
        json_t *progress = s->job->progress;
        if (s->next_line == json_array_size(progress)) {
            json_array_clear(progress);
            s->next_line = 0;
            if (s->finished)
                return 0;
            unsigned status = job_step(s->job);
            s->finished = s->job->phase == PHASE_DONE || status != 200;
            if (status != 200) /* the reply has begun: the error becomes its last line */
                json_array_append_new(progress, json_pack("{s:s}", "error", s->err.message));
            continue;
        }
        char *text = json_dumps(json_array_get(progress, s->next_line++), JSON_COMPACT);
        if (!text)
            return -1;
        s->line_len = strlen(text) + 1;
        if (!(s->line = realloc(text, s->line_len + 1))) {
            free(text);
            return -1;
        }
        s->line[s->line_len - 1] = '\n';
    }
    size_t n = s->line_len - s->line_pos < max ? s->line_len - s->line_pos : max;
    memcpy(buf, s->line + s->line_pos, n);
    s->line_pos += n;
    return (ssize_t)n;
}

static void stream_close(void *state)
{
    create_stream *s = state;
    job_free(s->job);
    free(s->line);
    free(s);
}

unsigned create_model(corral_store *store, const json_t *request,
                      const corral_registry_options *pull_opts, json_t *progress,
                      corral_error *err)
{
    create_job *job = NULL;
    unsigned status = job_prepare(store, request, pull_opts, err, &job);
    while (status == 200) {
        json_array_extend(progress, job->progress);
        json_array_clear(job->progress);
        if (job->phase == PHASE_DONE)
            break;
        status = job_step(job);
    }
    job_free(job);
    return status;
}

void create_reply(corral_store *store, const json_t *request,
                  const corral_registry_options *pull_opts, http_reply *reply)
{
    corral_error err = {{0}};
    if (json_is_false(json_object_get(request, "stream"))) {
        json_t *progress = json_array();
        unsigned status =
            progress ? create_model(store, request, pull_opts, progress, &err) : 500;
        if (status != 200)
            http_reply_error(reply, status, "%s", progress ? err.message : "out of memory");
        else
            http_reply_json(reply, 200, json_incref(json_array_get(progress,
                                                                   json_array_size(progress) - 1)));
        json_decref(progress);
        return;
    }
    create_stream *s = calloc(1, sizeof *s);
    unsigned status = s ? job_prepare(store, request, pull_opts, &s->err, &s->job) : 500;
    if (status == 200)
        http_reply_stream(reply, "application/x-ndjson", stream_next, stream_close, s);
    else
        http_reply_error(reply, status, "%s", s ? s->err.message : "out of memory");
    if (status != 200)
        free(s);
}
