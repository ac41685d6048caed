/*
 * The model store: the public face of src/store/. Owns ollama's on-disk layout under one root:
 * model names and their manifest paths, manifests (read, validate, write, list, copy, delete),
 * content-addressed blobs (stat, streaming verified writes, adoption of a file written in
 * blobs/, garbage collection) and start-up housekeeping. Knows nothing of HTTP, GGUF or
 * registries. Invariants: a digest or name is validated before any path is formed from it;
 * every file reaches its final name only by rename after fsync, and a blob only under the
 * digest of its bytes.
 */
#ifndef CORRAL_STORE_STORE_H
#define CORRAL_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "corral/error.h"

/* ---- outcomes ---------------------------------------------------------------------------- */

/* What a store operation came to; the server maps these to 200 / 404 / 400 / 500. */
typedef enum corral_store_status {
    CORRAL_STORE_OK = 0,
    CORRAL_STORE_NOT_FOUND, /* no such model or blob */
    CORRAL_STORE_INVALID,   /* bad name, digest or manifest; digest or size mismatch */
    CORRAL_STORE_IO,        /* the file system failed (message has the path and errno text) */
} corral_store_status;

/* ---- names: [scheme://][host/][namespace/]model[:tag] ------------------------------------ */

#define CORRAL_NAME_DEFAULT_HOST "registry.ollama.ai"
#define CORRAL_NAME_DEFAULT_NAMESPACE "library"
#define CORRAL_NAME_DEFAULT_TAG "latest"
#define CORRAL_NAME_HOST_MAX 350u
#define CORRAL_NAME_PART_MAX 80u
/* Longest "host/namespace/model:tag", with its NUL. */
#define CORRAL_NAME_STRING_MAX (CORRAL_NAME_HOST_MAX + 3 * (CORRAL_NAME_PART_MAX + 1) + 1)

/* A fully qualified model name; only corral_model_name_parse makes a valid one. */
typedef struct corral_model_name {
    char host[CORRAL_NAME_HOST_MAX + 1];
    char namespace[CORRAL_NAME_PART_MAX + 1];
    char model[CORRAL_NAME_PART_MAX + 1];
    char tag[CORRAL_NAME_PART_MAX + 1];
} corral_model_name;

/*
 * Parse s with ollama's rules and defaults (registry.ollama.ai, library, latest); an
 * http:// or https:// scheme before a host is dropped. The spelling is kept as given.
 * false with err "invalid model name" (plus which part is wrong) on any bad part.
 */
bool corral_model_name_parse(const char *s, corral_model_name *out, corral_error *err);

/* Every part a valid part of its kind (for names built by hand or read back from disk). */
bool corral_model_name_is_valid(const corral_model_name *name);

/* Same model, ignoring ASCII case part by part (ollama's EqualFold). */
bool corral_model_name_equal(const corral_model_name *a, const corral_model_name *b);

/* "host/namespace/model:tag" into buf (CORRAL_NAME_STRING_MAX bytes is always enough). */
void corral_model_name_full(const corral_model_name *name, char *buf, size_t cap);

/* ollama's DisplayShortest: "model:tag", "ns/model:tag" or "host/ns/model:tag". */
void corral_model_name_display(const corral_model_name *name, char *buf, size_t cap);

/* ---- digests: "sha256:" + 64 lowercase hex ----------------------------------------------- */

#define CORRAL_DIGEST_LEN 71u /* strlen("sha256:") + 64 */
#define CORRAL_DIGEST_BUF (CORRAL_DIGEST_LEN + 1)

/* Exactly "sha256:" + 64 lowercase hex digits and nothing else. */
bool corral_digest_is_valid(const char *digest);

/* As above, with err "invalid digest format: '<printable prefix of digest>'". */
bool corral_digest_check(const char *digest, corral_error *err);

/* The digest of len bytes, as "sha256:<hex>" into out. */
void corral_digest_of(const void *data, size_t len, char out[CORRAL_DIGEST_BUF]);

/* ---- manifests (Docker v2 schema 2, as ollama writes them) ------------------------------- */

#define CORRAL_MEDIA_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define CORRAL_MEDIA_MANIFEST_OCI "application/vnd.oci.image.manifest.v1+json"
#define CORRAL_MEDIA_CONFIG "application/vnd.docker.container.image.v1+json"
#define CORRAL_MEDIA_MODEL "application/vnd.ollama.image.model"
#define CORRAL_MEDIA_TEMPLATE "application/vnd.ollama.image.template"
#define CORRAL_MEDIA_PROMPT "application/vnd.ollama.image.prompt" /* legacy name of template */
#define CORRAL_MEDIA_SYSTEM "application/vnd.ollama.image.system"
#define CORRAL_MEDIA_PARAMS "application/vnd.ollama.image.params"
#define CORRAL_MEDIA_LICENSE "application/vnd.ollama.image.license"
#define CORRAL_MEDIA_MESSAGES "application/vnd.ollama.image.messages"
#define CORRAL_MEDIA_ADAPTER "application/vnd.ollama.image.adapter"
#define CORRAL_MEDIA_PROJECTOR "application/vnd.ollama.image.projector"
#define CORRAL_MEDIA_DRAFT "application/vnd.ollama.image.draft"

/* A manifest file larger than this is refused unread; a media type longer than this too. */
#define CORRAL_MANIFEST_MAX_BYTES (4u << 20)
#define CORRAL_MEDIA_TYPE_MAX 255u

typedef struct corral_layer {
    char *media_type;
    char digest[CORRAL_DIGEST_BUF];
    uint64_t size_bytes;
    char *from; /* optional: the model this layer came from; NULL if absent */
    char *name; /* optional: file or tensor name; NULL if absent */
} corral_layer;

typedef struct corral_manifest {
    char *media_type;
    corral_layer config;
    corral_layer *layers;
    size_t n_layers;
} corral_manifest;

/* An empty manifest (docker media type, no config digest yet, no layers) to build on. */
corral_manifest *corral_manifest_create(void);
void corral_manifest_free(corral_manifest *m);

/* Validate and parse manifest JSON (len ≤ CORRAL_MANIFEST_MAX_BYTES). NULL with err saying
 * what is wrong ("layers[2]: digest: invalid digest format: ..."). Unknown keys are ignored. */
corral_manifest *corral_manifest_parse(const char *json, size_t len, corral_error *err);

/* The JSON ollama writes for m (keys in ollama's order, "from"/"name" only when set).
 * Returns a malloc'ed NUL-terminated string (length in *len) or NULL with err set. */
char *corral_manifest_serialize(const corral_manifest *m, size_t *len, corral_error *err);

/* Set the config / append a layer; from may be NULL. false with err on a bad digest or
 * media type, leaving m unchanged. */
bool corral_manifest_set_config(corral_manifest *m, const char *media_type, const char *digest,
                                uint64_t size_bytes, corral_error *err);
bool corral_manifest_add_layer(corral_manifest *m, const char *media_type, const char *digest,
                               uint64_t size_bytes, const char *from, corral_error *err);

/*
 * The next layer of media_type after `after` (NULL: from the first), or NULL. Looking for
 * CORRAL_MEDIA_TEMPLATE also finds the legacy CORRAL_MEDIA_PROMPT.
 */
const corral_layer *corral_manifest_find_layer(const corral_manifest *m, const char *media_type,
                                               const corral_layer *after);

/* Sum of the layer sizes including the config (what /api/tags reports as size). */
uint64_t corral_manifest_total_size(const corral_manifest *m);

/* ---- the store --------------------------------------------------------------------------- */

/*
 * The root a server should use: $CORRAL_MODELS, else $OLLAMA_MODELS, else
 * $HOME/.corral/models. false with err if none can be formed or it does not fit in cap.
 */
bool corral_store_default_root(char *buf, size_t cap, corral_error *err);

/*
 * A store is just its root and is read-only after open, so threads may share one. Two
 * processes may share a root too: every write is a rename of a complete file.
 */
typedef struct corral_store corral_store;

/* Open the store at root, creating root, manifests/ and blobs/ if missing. */
corral_store *corral_store_open(const char *root, corral_error *err);
void corral_store_close(corral_store *store);
const char *corral_store_root(const corral_store *store);

/* Start-up housekeeping, once per server start (ollama does the same):
 * blob files named "sha256:<hex>" are renamed to "sha256-<hex>"; files in blobs/ that are not
 * valid blob names (our temp files, ollama's "-partial" downloads) and older than min_age_s
 * are removed; empty directories under manifests/ are removed. *n_removed (may be NULL)
 * counts removed files. */
corral_store_status corral_store_prune_partials(corral_store *store, uint64_t min_age_s,
                                                size_t *n_removed, corral_error *err);

/*
 * Remove every blob no valid manifest references and whose mtime is older than min_age_s.
 * The grace period protects blobs uploaded for a create that has not written its manifest
 * yet (ollama uses 1 h at start-up). A manifest that does not parse stops the collection
 * (CORRAL_STORE_INVALID) rather than risk deleting the blobs it names.
 */
corral_store_status corral_store_gc(corral_store *store, uint64_t min_age_s, size_t *n_removed,
                                    corral_error *err);

/* -- manifests by name. Names match case-insensitively; the spelling on disk wins. -- */

/* The stored spelling of name into *stored: OK, or NOT_FOUND. */
corral_store_status corral_store_resolve(const corral_store *store, const corral_model_name *name,
                                         corral_model_name *stored, corral_error *err);

/* Path of name's manifest file (whether or not it exists), malloc'ed; NULL on a bad name. */
char *corral_store_manifest_path(const corral_store *store, const corral_model_name *name,
                                 corral_error *err);

/* Read and validate name's manifest. *raw_digest (may be NULL) gets the sha256 of the file's
 * bytes and *modified (may be NULL) its mtime. NOT_FOUND: err "model 'x' not found". */
corral_store_status corral_store_manifest_read(const corral_store *store,
                                               const corral_model_name *name,
                                               corral_manifest **out,
                                               char raw_digest[CORRAL_DIGEST_BUF],
                                               struct timespec *modified, corral_error *err);

/*
 * Write m as name's manifest, atomically. Every blob it references (layers and config) must
 * already be in the store with its stated size (else INVALID, naming the layer). If another
 * spelling of name exists, that file is replaced, so no two manifests differ only in case;
 * a server wanting ollama's "a model with that name already exists" calls resolve first.
 */
corral_store_status corral_store_manifest_write(corral_store *store, const corral_model_name *name,
                                                const corral_manifest *m, corral_error *err);

/* As above with the exact bytes to store (a pulled manifest keeps the registry's digest);
 * they are validated as a manifest first. */
corral_store_status corral_store_manifest_write_raw(corral_store *store,
                                                    const corral_model_name *name,
                                                    const char *json, size_t len,
                                                    corral_error *err);

/* Copy src's manifest bytes to dst (blobs are shared). NOT_FOUND if src is missing. */
corral_store_status corral_store_manifest_copy(corral_store *store, const corral_model_name *src,
                                               const corral_model_name *dst, corral_error *err);

/* Remove name's manifest, then those of its blobs no other manifest references, then empty
 * directories. NOT_FOUND if there is no such model. */
corral_store_status corral_store_manifest_delete(corral_store *store,
                                                 const corral_model_name *name,
                                                 corral_error *err);

/* One installed model, for /api/tags. */
typedef struct corral_store_entry {
    corral_model_name name;                     /* as spelled on disk */
    char display[CORRAL_NAME_STRING_MAX];       /* ollama's shortest form, e.g. "llama3:latest" */
    struct timespec modified;                   /* manifest mtime */
    uint64_t size_bytes;                        /* layers + config */
    char digest_hex[65];                        /* sha256 of the manifest bytes, no prefix */
    corral_manifest *manifest;                  /* parsed, owned by the list */
} corral_store_entry;

/* Every valid manifest under manifests/, newest first. Files that are not valid manifests at
 * valid name paths are skipped (as ollama does), never fatal. */
corral_store_status corral_store_list(const corral_store *store, corral_store_entry **entries,
                                      size_t *n_entries, corral_error *err);
void corral_store_list_free(corral_store_entry *entries, size_t n_entries);

/* -- blobs -- */

/* OK with *size_bytes (may be NULL), NOT_FOUND, or INVALID for a bad digest. */
corral_store_status corral_store_blob_stat(const corral_store *store, const char *digest,
                                           uint64_t *size_bytes, corral_error *err);

/* Path of digest's blob for reading (whether or not it exists), malloc'ed; NULL on a bad
 * digest. */
char *corral_store_blob_path(const corral_store *store, const char *digest, corral_error *err);

/* Set a blob's mtime to now, as ollama does when a blob is reused, so a GC grace period
 * counts from its latest use. */
corral_store_status corral_store_blob_touch(corral_store *store, const char *digest,
                                            corral_error *err);

/* A whole small blob (template, system, params, license, config JSON) in memory, at most
 * max_bytes (else INVALID). *out is malloc'ed and NUL-terminated; length in *len. */
corral_store_status corral_store_blob_read(const corral_store *store, const char *digest,
                                           size_t max_bytes, char **out, size_t *len,
                                           corral_error *err);

/* Store len bytes as a blob (a no-op if it exists) and give its digest. */
corral_store_status corral_store_blob_write(corral_store *store, const void *data, size_t len,
                                            char digest[CORRAL_DIGEST_BUF], corral_error *err);

/*
 * Streaming blob writer, for uploads that must never sit in memory:
 *   w = create(store, max_bytes) → write(w, chunk)… → finish(w, expected digest, size) → free(w)
 * Bytes are hashed as they go into a temp file in blobs/. finish checks the size (unless
 * CORRAL_BLOB_SIZE_UNKNOWN) and the digest, fsyncs, renames into place and fsyncs blobs/;
 * on a mismatch the temp file is removed and no blob appears. free removes the temp file of
 * a writer that did not finish, so free alone is the abort.
 */
#define CORRAL_BLOB_SIZE_UNKNOWN UINT64_MAX

/*
 * A finished file that something wrote straight into blobs/ (a conversion's or
 * quantization's output) made a blob without copying it: hashed as it is read, fsynced and
 * renamed to its digest's name, then blobs/ fsynced; when that blob exists already the file is
 * removed and the blob's mtime renewed (*existed). Either way nothing stays at path, on
 * failure too, and a blob appears whole or not at all. A path that is not a regular file
 * directly inside blobs/ is refused (INVALID) and left alone.
 */
corral_store_status corral_store_blob_adopt(corral_store *store, const char *path,
                                            char digest[CORRAL_DIGEST_BUF],
                                            uint64_t *size_bytes, bool *existed,
                                            corral_error *err);

typedef struct corral_blob_writer corral_blob_writer;

/* max_bytes caps the blob (a write past it fails); UINT64_MAX for no cap. */
corral_blob_writer *corral_blob_writer_create(corral_store *store, uint64_t max_bytes,
                                              corral_error *err);
bool corral_blob_writer_write(corral_blob_writer *w, const void *data, size_t len,
                              corral_error *err);
/* Bytes written so far. */
uint64_t corral_blob_writer_size(const corral_blob_writer *w);
/* Whether the write or finish that failed did so because the file system is full. */
bool corral_blob_writer_out_of_space(const corral_blob_writer *w);
/* INVALID with err "digest mismatch: expected sha256:…, got sha256:…" or a size mismatch. */
corral_store_status corral_blob_writer_finish(corral_blob_writer *w, const char *expected_digest,
                                              uint64_t expected_size_bytes, corral_error *err);
void corral_blob_writer_free(corral_blob_writer *w);

#endif
