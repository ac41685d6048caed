/*
 * Resolving a model name to its manifest and layers (see model_ref.h). Small layers are
 * read with a size cap: they come from disk that a registry filled, so they are input too.
 */
#include "server/models/model_ref.h"

#include "server/models/model_info.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SMALL_LAYER_BYTES (4u << 20)

/* ---- whether a model blob carries its own vision tower ---- */

/* Answers kept by blob digest: a blob's bytes never change under its digest, and opening a
 * GGUF's header (its vocabulary too) costs milliseconds that every request would pay. */
enum { VISION_CACHE_ENTRIES = 64 };

typedef struct vision_answer {
    char digest[CORRAL_DIGEST_BUF];
    bool vision;
} vision_answer;

static vision_answer vision_cache[VISION_CACHE_ENTRIES];
static size_t vision_cache_next; /* the entry a new answer replaces (round robin) */
static pthread_mutex_t vision_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* A model file that carries its own vision tower (ollama's single-file layout) is its own
 * projector. A file that does not open answers no here, and is not remembered; loading it
 * reports why. */
static bool model_carries_vision(const char *digest, const char *path)
{
    pthread_mutex_lock(&vision_cache_lock);
    for (size_t i = 0; i < VISION_CACHE_ENTRIES; i++)
        if (strcmp(vision_cache[i].digest, digest) == 0) {
            bool vision = vision_cache[i].vision;
            pthread_mutex_unlock(&vision_cache_lock);
            return vision;
        }
    pthread_mutex_unlock(&vision_cache_lock);

    corral_error err;
    corral_model_file *file = corral_model_file_open(path, &err);
    if (!file)
        return false;
    bool vision = corral_model_file_has_vision(file);
    corral_model_file_close(file);

    pthread_mutex_lock(&vision_cache_lock);
    vision_answer *slot = &vision_cache[vision_cache_next];
    vision_cache_next = (vision_cache_next + 1) % VISION_CACHE_ENTRIES;
    snprintf(slot->digest, sizeof slot->digest, "%s", digest);
    slot->vision = vision;
    pthread_mutex_unlock(&vision_cache_lock);
    return vision;
}

/* ---- reading a manifest's layers ---- */

static model_ref_status read_text_layer(const corral_store *store, const corral_manifest *m,
                                        const char *media_type, char **out, corral_error *err)
{
    *out = NULL;
    size_t total = 0;
    for (const corral_layer *l = corral_manifest_find_layer(m, media_type, NULL); l;
         l = corral_manifest_find_layer(m, media_type, l)) {
        char *text;
        size_t len;
        if (corral_store_blob_read(store, l->digest, MAX_SMALL_LAYER_BYTES, &text, &len, err) !=
            CORRAL_STORE_OK)
            return MODEL_REF_BROKEN;
        /* several layers of one type (licenses) are joined with a blank line */
        char *joined = realloc(*out, total + len + 3);
        if (!joined) {
            free(text);
            corral_error_set(err, "out of memory");
            return MODEL_REF_BROKEN;
        }
        if (total)
            memcpy(joined + total, "\n\n", 2), total += 2;
        memcpy(joined + total, text, len + 1);
        total += len;
        *out = joined;
        free(text);
    }
    return MODEL_REF_OK;
}

static model_ref_status read_json_layer(const corral_store *store, const corral_manifest *m,
                                        const char *media_type, json_t **out, corral_error *err)
{
    *out = NULL;
    char *text;
    if (read_text_layer(store, m, media_type, &text, err) != MODEL_REF_OK)
        return MODEL_REF_BROKEN;
    if (!text)
        return MODEL_REF_OK;
    json_error_t jerr;
    *out = json_loads(text, 0, &jerr);
    free(text);
    if (!*out) {
        corral_error_set(err, "%s layer is not valid JSON: %s", media_type, jerr.text);
        return MODEL_REF_BROKEN;
    }
    return MODEL_REF_OK;
}

model_ref_status model_ref_open(const corral_store *store, const char *name_text, model_ref **out,
                                corral_error *err)
{
    *out = NULL;
    corral_model_name name;
    if (!corral_model_name_parse(name_text, &name, err))
        return MODEL_REF_INVALID_NAME;
    model_ref *ref = calloc(1, sizeof *ref);
    if (!ref) {
        corral_error_set(err, "out of memory");
        return MODEL_REF_BROKEN;
    }
    model_ref_status status = MODEL_REF_BROKEN;
    corral_store_status s = corral_store_resolve(store, &name, &ref->name, err);
    if (s == CORRAL_STORE_OK)
        s = corral_store_manifest_read(store, &ref->name, &ref->manifest, ref->digest,
                                       &ref->modified, err);
    if (s == CORRAL_STORE_NOT_FOUND) {
        corral_error_set(err, "model '%s' not found", name_text);
        status = MODEL_REF_NOT_FOUND;
        goto fail;
    }
    if (s != CORRAL_STORE_OK)
        goto fail;
    corral_model_name_display(&ref->name, ref->display, sizeof ref->display);
    const corral_layer *model = corral_manifest_find_layer(ref->manifest, CORRAL_MEDIA_MODEL, NULL);
    if (model && !(ref->model_path = corral_store_blob_path(store, model->digest, err)))
        goto fail;
    const corral_layer *draft = corral_manifest_find_layer(ref->manifest, CORRAL_MEDIA_DRAFT, NULL);
    if (draft && !(ref->draft_path = corral_store_blob_path(store, draft->digest, err)))
        goto fail;
    for (size_t i = 0; i < ref->manifest->n_layers; i++) {
        const corral_layer *l = &ref->manifest->layers[i];
        if (strcmp(l->media_type, CORRAL_MEDIA_ADAPTER) != 0)
            continue;
        if (ref->n_adapters == MODEL_REF_MAX_ADAPTERS) {
            corral_error_set(err, "model '%s' has more than %d adapters", name_text,
                             MODEL_REF_MAX_ADAPTERS);
            goto fail;
        }
        if (!(ref->adapter_paths[ref->n_adapters] = corral_store_blob_path(store, l->digest, err)))
            goto fail;
        ref->n_adapters++;
    }
    const corral_layer *projector =
        corral_manifest_find_layer(ref->manifest, CORRAL_MEDIA_PROJECTOR, NULL);
    if (projector && !(ref->projector_path = corral_store_blob_path(store, projector->digest, err)))
        goto fail;
    if (!projector && ref->model_path && model_carries_vision(model->digest, ref->model_path) &&
        !(ref->projector_path = strdup(ref->model_path))) {
        corral_error_set(err, "out of memory");
        goto fail;
    }
    if (read_text_layer(store, ref->manifest, CORRAL_MEDIA_TEMPLATE, &ref->template_text, err) ||
        read_text_layer(store, ref->manifest, CORRAL_MEDIA_SYSTEM, &ref->system, err) ||
        read_text_layer(store, ref->manifest, CORRAL_MEDIA_LICENSE, &ref->license, err) ||
        read_json_layer(store, ref->manifest, CORRAL_MEDIA_PARAMS, &ref->params, err) ||
        read_json_layer(store, ref->manifest, CORRAL_MEDIA_MESSAGES, &ref->messages, err))
        goto fail;
    if (!(ref->config = model_info_read_config(store, ref->manifest, NULL)) &&
        !(ref->config = json_object())) {
        corral_error_set(err, "out of memory");
        goto fail;
    }
    *out = ref;
    return MODEL_REF_OK;
fail:
    model_ref_free(ref);
    return status;
}

void model_ref_free(model_ref *ref)
{
    if (!ref)
        return;
    corral_manifest_free(ref->manifest);
    free(ref->model_path);
    free(ref->draft_path);
    for (size_t i = 0; i < ref->n_adapters; i++)
        free(ref->adapter_paths[i]);
    free(ref->projector_path);
    free(ref->template_text);
    free(ref->system);
    free(ref->license);
    json_decref(ref->params);
    json_decref(ref->messages);
    json_decref(ref->config);
    free(ref);
}
