/*
 * Model management routes, with ollama's status codes: GET/HEAD /api/tags, POST /api/show,
 * POST /api/copy, DELETE /api/delete, HEAD/POST /api/blobs/:digest (uploads streamed through
 * a body sink into the store's verified blob writer, never held in memory) and POST
 * /api/create. None of these needs the scheduler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api/api_time.h"
#include "server/models/create.h"
#include "server/models/model_info.h"
#include "server/models/model_ref.h"
#include "server/models/modelfile_text.h"
#include "server/http/body.h"
#include "server/server.h"
#include "options/options.h"
#include "server/http/request_fields.h"
#include "template/template.h"

/* ---- helpers ---- */

/* The request body as a JSON object; on failure the reply is sent and NULL returned. */
static json_t *read_body(const http_request *req, http_reply *reply)
{
    char message[256];
    json_t *body = http_body_object(req, message, sizeof message);
    if (!body)
        http_reply_error(reply, 400, "%s", message);
    return body;
}

/* A string field, "" when absent; NULL (reply sent) when present with another type. */
static const char *string_field(const json_t *body, const char *key, http_reply *reply)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v))
        return "";
    if (!json_is_string(v)) {
        http_reply_error(reply, 400, "%s must be a string", key);
        return NULL;
    }
    return json_string_value(v);
}

/* `model`, or its deprecated alias `name`. */
static const char *model_field(const json_t *body, http_reply *reply)
{
    const char *model = string_field(body, "model", reply);
    if (model && !*model)
        model = string_field(body, "name", reply);
    return model;
}

static unsigned model_ref_http_status(model_ref_status status)
{
    switch (status) {
    case MODEL_REF_OK: return 200;
    case MODEL_REF_INVALID_NAME: return 400;
    case MODEL_REF_NOT_FOUND: return 404;
    case MODEL_REF_BROKEN: break;
    }
    return 500;
}

/* ---- /api/tags ---- */

/* The GGUF of a manifest, or NULL if it has none or it does not open (the entry still lists). */
static corral_model_file *open_model_layer(const corral_store *store, const corral_manifest *m)
{
    const corral_layer *layer = corral_manifest_find_layer(m, CORRAL_MEDIA_MODEL, NULL);
    char *path = layer ? corral_store_blob_path(store, layer->digest, NULL) : NULL;
    corral_model_file *file = path ? corral_model_file_open(path, NULL) : NULL;
    free(path);
    return file;
}

static char *read_template_layer(const corral_store *store, const corral_manifest *m)
{
    const corral_layer *layer = corral_manifest_find_layer(m, CORRAL_MEDIA_TEMPLATE, NULL);
    char *text = NULL;
    size_t len;
    if (layer)
        corral_store_blob_read(store, layer->digest, CORRAL_TEMPLATE_MAX_SOURCE_BYTES, &text,
                               &len, NULL);
    return text;
}

static json_t *tags_entry(const corral_store *store, const corral_store_entry *e)
{
    json_t *config = model_info_read_config(store, e->manifest, NULL);
    if (!config)
        config = json_object(); /* a broken config: list the model with empty details */
    corral_model_file *file = open_model_layer(store, e->manifest);
    if (file)
        model_info_config_add_gguf(config, file); /* fills only what the config lacks */
    char *template_text = read_template_layer(store, e->manifest);
    json_t *entry = json_pack("{s:s,s:s,s:o,s:I,s:s,s:o,s:o}", "name", e->display, "model",
                              e->display, "modified_at", api_local_time(e->modified), "size",
                              (json_int_t)e->size_bytes, "digest", e->digest_hex, "details",
                              model_info_details(config, NULL), "capabilities",
                              model_info_capabilities(config, file, template_text));
    if (entry && !model_info_add_projector_capability(json_object_get(entry, "capabilities"),
                                                      store, e->manifest)) {
        json_decref(entry);
        entry = NULL;
    }
    free(template_text);
    corral_model_file_close(file);
    json_decref(config);
    return entry;
}

static void handle_tags(void *ctx, const http_request *req, http_reply *reply)
{
    (void)req;
    server *srv = ctx;
    corral_store_entry *entries;
    size_t n;
    corral_error err = {{0}};
    if (corral_store_list(srv->store, &entries, &n, &err) != CORRAL_STORE_OK) {
        http_reply_error(reply, 500, "%s", err.message);
        return;
    }
    json_t *models = json_array();
    for (size_t i = 0; models && i < n; i++) {
        json_t *entry = tags_entry(srv->store, &entries[i]);
        if (!entry || json_array_append_new(models, entry) != 0) {
            json_decref(models);
            models = NULL;
        }
    }
    corral_store_list_free(entries, n);
    if (!models) {
        http_reply_error(reply, 500, "out of memory");
        return;
    }
    http_reply_json(reply, 200, json_pack("{s:o}", "models", models));
}

/* ---- /api/show ---- */

/* A model with a projector: "vision" (and "audio" for a projector with an audio encoder)
 * among its capabilities and the projector file's metadata as projector_info, as ollama shows
 * them. False with err. */
static bool add_projector(json_t *resp, const corral_store *store, const model_ref *ref,
                          bool verbose, corral_error *err)
{
    /* a model that carries its own tower: its capabilities say vision already, and its
     * metadata is model_info (ollama shows no projector_info for such a model) */
    if (!ref->projector_path ||
        (ref->model_path && strcmp(ref->projector_path, ref->model_path) == 0))
        return true;
    corral_model_file *file = corral_model_file_open(ref->projector_path, err);
    if (!file)
        return false;
    json_t *info = model_info_kv(file, verbose);
    corral_model_file_close(file);
    if (!info || json_object_set_new(resp, "projector_info", info) != 0 ||
        !model_info_add_projector_capability(json_object_get(resp, "capabilities"), store,
                                             ref->manifest)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    return true;
}

/* options: the request's, checked (an object, maybe empty). */
static json_t *show_response(const corral_store *store, model_ref *ref, const json_t *body,
                             const json_t *options, corral_error *err)
{
    bool verbose = json_is_true(json_object_get(body, "verbose"));
    const char *system = json_string_value(json_object_get(body, "system"));
    if (system && *system) { /* ollama shows the request's system in place of the model's */
        free(ref->system);
        ref->system = strdup(system);
    }
    json_t *config = model_info_read_config(store, ref->manifest, err);
    if (!config)
        return NULL;
    corral_model_file *file = NULL;
    if (ref->model_path && !(file = corral_model_file_open(ref->model_path, err))) {
        json_decref(config);
        return NULL;
    }
    if (file)
        model_info_config_add_gguf(config, file);
    json_t *messages = json_array();
    size_t i;
    json_t *msg;
    json_array_foreach(ref->messages, i, msg)
        json_array_append_new(messages, json_pack("{s:O?,s:O?}", "role",
                                                  json_object_get(msg, "role"), "content",
                                                  json_object_get(msg, "content")));
    char *parameters = modelfile_parameters_text(ref->params);
    /* The request's options go over the model's in the modelfile, not in parameters, as
     * ollama shows them: its CLI sends the parameters a session /set, so /show modelfile
     * (and the Modelfile a user copies from it) has them. */
    if (json_object_size(options) > 0 &&
        ((!ref->params && !(ref->params = json_object())) ||
         json_object_update(ref->params, (json_t *)options) != 0)) {
        free(parameters);
        json_decref(messages);
        corral_model_file_close(file);
        json_decref(config);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    char *modelfile = modelfile_generate(ref);
    json_t *resp = json_pack(
        "{s:s,s:o,s:o,s:o,s:o}", "modelfile", modelfile ? modelfile : "", "details",
        model_info_details(config, NULL), "model_info",
        file ? model_info_kv(file, verbose) : json_object(), "capabilities",
        model_info_capabilities(config, file, ref->template_text), "modified_at",
        api_local_time(ref->modified));
    /* the texts a model may lack are left out when empty, as ollama's omitempty does */
    const char *const texts[][2] = {{"license", ref->license},
                                    {"parameters", parameters},
                                    {"template", ref->template_text},
                                    {"system", ref->system}};
    for (size_t k = 0; resp && k < sizeof texts / sizeof texts[0]; k++)
        if (texts[k][1] && *texts[k][1] &&
            json_object_set_new(resp, texts[k][0], json_string(texts[k][1])) != 0) {
            json_decref(resp);
            resp = NULL;
        }
    if (resp && json_array_size(messages) && json_object_set(resp, "messages", messages) != 0) {
        json_decref(resp);
        resp = NULL;
    }
    json_decref(messages);
    free(parameters);
    free(modelfile);
    /* every tensor's name, type and shape, verbose or not: ollama sends them always (only
     * its CLI keeps them for --verbose), and clients that show a model's layers read them */
    if (resp && file)
        json_object_set_new(resp, "tensors", model_info_tensors(file));
    if (resp && !add_projector(resp, store, ref, verbose, err)) {
        json_decref(resp);
        resp = NULL;
    }
    static const char *const kept[] = {"requires", "renderer", "parser"};
    for (size_t i = 0; resp && i < sizeof kept / sizeof kept[0]; i++) {
        const char *value = json_string_value(json_object_get(config, kept[i]));
        if (value && *value)
            json_object_set_new(resp, kept[i], json_string(value));
    }
    corral_model_file_close(file);
    json_decref(config);
    if (!resp)
        corral_error_set(err, "out of memory");
    return resp;
}

static void handle_show(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    json_t *body = read_body(req, reply);
    if (!body)
        return;
    const char *name = model_field(body, reply);
    if (!name)
        goto done;
    if (!*name) {
        http_reply_error(reply, 400, "model is required");
        goto done;
    }
    model_ref *ref;
    corral_error err = {{0}};
    /* typed as a generation's options are, though show only prints them */
    json_t *options = options_normalize(json_object_get(body, "options"), &err);
    if (!options) {
        http_reply_error(reply, 400, "%s", err.message);
        goto done;
    }
    model_ref_status status = model_ref_open(srv->store, name, &ref, &err);
    if (status != MODEL_REF_OK) {
        json_decref(options);
        http_reply_error(reply, model_ref_http_status(status), "%s", err.message);
        goto done;
    }
    json_t *resp = show_response(srv->store, ref, body, options, &err);
    json_decref(options);
    model_ref_free(ref);
    /* GitHub Copilot Chat labels each model by general.basename, which many GGUFs share
     * across sizes and variants (or lack): it gets the name it asked for there, as ollama
     * gives it. */
    static const char copilot[] = "GitHubCopilotChat/";
    if (resp && req->user_agent && strncmp(req->user_agent, copilot, sizeof copilot - 1) == 0)
        json_object_set_new(json_object_get(resp, "model_info"), "general.basename",
                            json_string(name));
    if (resp)
        http_reply_json(reply, 200, resp);
    else
        http_reply_error(reply, 500, "%s", err.message);
done:
    json_decref(body);
}

/* ---- /api/copy, /api/delete ---- */

/* name_text parsed and, if a manifest of it exists in another spelling, that spelling. */
static bool parse_existing_name(const corral_store *store, const char *name_text,
                                corral_model_name *name)
{
    if (!corral_model_name_parse(name_text, name, NULL))
        return false;
    corral_model_name stored;
    if (corral_store_resolve(store, name, &stored, NULL) == CORRAL_STORE_OK)
        *name = stored;
    return true;
}

static void handle_copy(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    json_t *body = read_body(req, reply);
    if (!body)
        return;
    const char *source = string_field(body, "source", reply);
    const char *destination = source ? string_field(body, "destination", reply) : NULL;
    corral_model_name src, dst;
    corral_error err = {{0}};
    if (!source || !destination) /* the reply is sent */
        goto done;
    if (!parse_existing_name(srv->store, source, &src))
        http_reply_error(reply, 400, "source \"%s\" is invalid", source);
    else if (!parse_existing_name(srv->store, destination, &dst))
        http_reply_error(reply, 400, "destination \"%s\" is invalid", destination);
    else {
        corral_store_status s = corral_store_manifest_copy(srv->store, &src, &dst, &err);
        if (s == CORRAL_STORE_OK)
            http_reply_empty(reply, 200);
        else if (s == CORRAL_STORE_NOT_FOUND)
            http_reply_error(reply, 404, "model \"%s\" not found", source);
        else
            http_reply_error(reply, s == CORRAL_STORE_INVALID ? 400 : 500, "%s", err.message);
    }
done:
    json_decref(body);
}

static void handle_delete(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    json_t *body = read_body(req, reply);
    if (!body)
        return;
    const char *name_text = model_field(body, reply);
    corral_model_name name;
    corral_error err = {{0}};
    if (!name_text) /* the reply is sent */
        goto done;
    if (!parse_existing_name(srv->store, name_text, &name))
        http_reply_error(reply, 400, "name \"%s\" is invalid", name_text);
    else {
        /* removes the manifest, then the blobs no other manifest references */
        corral_store_status s = corral_store_manifest_delete(srv->store, &name, &err);
        if (s == CORRAL_STORE_OK)
            http_reply_empty(reply, 200);
        else if (s == CORRAL_STORE_NOT_FOUND)
            http_reply_error(reply, 404, "model '%s' not found", name_text);
        else
            http_reply_error(reply, 500, "%s", err.message);
    }
done:
    json_decref(body);
}

/* ---- /api/blobs/:digest ---- */

static void handle_blob_head(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    corral_error err = {{0}};
    switch (corral_store_blob_stat(srv->store, req->path_param, NULL, &err)) {
    case CORRAL_STORE_OK:
        http_reply_empty(reply, 200);
        break;
    case CORRAL_STORE_NOT_FOUND:
        http_reply_error(reply, 404, "blob \"%s\" not found", req->path_param);
        break;
    case CORRAL_STORE_INVALID:
        http_reply_error(reply, 400, "%s", err.message);
        break;
    case CORRAL_STORE_IO:
        http_reply_error(reply, 500, "%s", err.message);
        break;
    }
}

/* An upload in progress: the writer, or nothing when the blob already exists (then the
 * body is read and dropped, and the reply is 200). */
typedef struct blob_upload {
    corral_blob_writer *writer;
    char digest[CORRAL_DIGEST_BUF];
} blob_upload;

static void *blob_upload_begin(void *ctx, const char *digest, unsigned *status,
                               corral_error *err)
{
    server *srv = ctx;
    corral_store_status s = corral_store_blob_stat(srv->store, digest, NULL, err);
    if (s == CORRAL_STORE_INVALID || s == CORRAL_STORE_IO) {
        *status = s == CORRAL_STORE_INVALID ? 400 : 500;
        return NULL;
    }
    blob_upload *up = calloc(1, sizeof *up);
    if (!up) {
        *status = 500;
        corral_error_set(err, "out of memory");
        return NULL;
    }
    snprintf(up->digest, sizeof up->digest, "%s", digest);
    if (s == CORRAL_STORE_NOT_FOUND &&
        !(up->writer = corral_blob_writer_create(srv->store, UINT64_MAX, err))) {
        free(up);
        *status = 500;
        return NULL;
    }
    return up;
}

/* A full disk is 507 Insufficient Storage, as WebDAV defines it; other failures 500. */
static unsigned writer_failure_status(const corral_blob_writer *w)
{
    return corral_blob_writer_out_of_space(w) ? 507 : 500;
}

static bool blob_upload_write(void *state, const char *data, size_t size, unsigned *status,
                              corral_error *err)
{
    blob_upload *up = state;
    if (!up->writer || corral_blob_writer_write(up->writer, data, size, err))
        return true;
    *status = writer_failure_status(up->writer);
    return false;
}

static void blob_upload_abort(void *state)
{
    blob_upload *up = state;
    corral_blob_writer_free(up->writer); /* removes the temp file */
    free(up);
}

static void handle_blob_upload(void *ctx, const http_request *req, http_reply *reply)
{
    (void)ctx;
    blob_upload *up = req->sink_state;
    if (!up->writer) {
        http_reply_empty(reply, 200);
    } else {
        corral_error err = {{0}};
        switch (corral_blob_writer_finish(up->writer, up->digest, CORRAL_BLOB_SIZE_UNKNOWN, &err)) {
        case CORRAL_STORE_OK:
            http_reply_empty(reply, 201);
            break;
        case CORRAL_STORE_INVALID:
            http_reply_error(reply, 400, "%s", err.message);
            break;
        default:
            http_reply_error(reply, writer_failure_status(up->writer), "%s", err.message);
            break;
        }
    }
    blob_upload_abort(up);
}

static const http_body_sink blob_upload_sink = {
    .begin = blob_upload_begin,
    .write = blob_upload_write,
    .abort = blob_upload_abort,
};

/* ---- /api/create ---- */

static void handle_create(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    json_t *body = read_body(req, reply);
    if (!body)
        return;
    corral_error err = {{0}};
    if (!request_fields_check(REQUEST_API_CREATE, body, &err))
        http_reply_error(reply, 400, "%s", err.message);
    else
        create_reply(srv->store, body,
                     &(corral_registry_options){.max_parts = srv->config.max_transfer_streams},
                     reply);
    json_decref(body);
}

static const http_route routes[] = {
    {"GET", "/api/tags", false, handle_tags, NULL},
    {"POST", "/api/show", false, handle_show, NULL},
    {"POST", "/api/copy", false, handle_copy, NULL},
    {"DELETE", "/api/delete", false, handle_delete, NULL},
    {"HEAD", "/api/blobs/", true, handle_blob_head, NULL},
    {"POST", "/api/blobs/", true, handle_blob_upload, &blob_upload_sink},
    {"POST", "/api/create", false, handle_create, NULL},
};

const route_table routes_models = {routes, sizeof routes / sizeof routes[0]};
