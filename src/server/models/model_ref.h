/*
 * A model as the server sees it: a name resolved in the store to its manifest and the parts
 * a request needs — the GGUF blob path, the LoRA adapter, draft model and projector blob paths, the TEMPLATE, SYSTEM, PARAMS (JSON options),
 * LICENSE and MESSAGES layers, and the config blob.
 */
#ifndef CORRAL_SERVER_MODEL_REF_H
#define CORRAL_SERVER_MODEL_REF_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "store/store.h"

#define MODEL_REF_MAX_ADAPTERS 16

typedef struct model_ref {
    corral_model_name name;          /* as stored */
    char display[CORRAL_NAME_STRING_MAX];
    corral_manifest *manifest;
    char digest[CORRAL_DIGEST_BUF];  /* of the manifest bytes */
    struct timespec modified;
    char *model_path;                /* the GGUF blob; NULL if the manifest has no model layer */
    char *adapter_paths[MODEL_REF_MAX_ADAPTERS]; /* LoRA adapter blobs, in manifest order */
    size_t n_adapters;
    char *draft_path;                /* a draft model for speculative decoding, NULL if none */
    char *projector_path;            /* the vision projector blob; NULL: the model sees no images */
    char *template_text;             /* TEMPLATE layer, NULL if none */
    char *system;                    /* SYSTEM layer, NULL if none */
    char *license;                   /* LICENSE layers joined, NULL if none */
    json_t *params;                  /* PARAMS layer (object), NULL if none */
    json_t *messages;                /* MESSAGES layer (array), NULL if none */
    json_t *config;                  /* the config blob (object); {} when unreadable: the
                                        capability check reports that one */
} model_ref;

typedef enum model_ref_status {
    MODEL_REF_OK,
    MODEL_REF_INVALID_NAME, /* 400 */
    MODEL_REF_NOT_FOUND,    /* 404 */
    MODEL_REF_BROKEN,       /* 500: a layer is missing or unreadable */
} model_ref_status;

/* Resolve name_text in the store and read its small layers. */
model_ref_status model_ref_open(const corral_store *store, const char *name_text, model_ref **out,
                                corral_error *err);
void model_ref_free(model_ref *ref);

#endif
