/*
 * corral_registry_push: upload the blobs of a local model that the registry lacks (HEAD, then
 * POST an upload session and PUT the blob in one request with its digest), then PUT the
 * manifest's exact bytes. Reports ollama's statuses: retrieving manifest, pushing <12 hex>…,
 * pushing manifest, success. The name must carry a namespace: [host/]namespace/model:tag.
 */
#include "registry/registry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPORT_INTERVAL_NS 60000000LL

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The local manifest's bytes, bounded, as stored. */
static corral_registry_status read_manifest(corral_store *store, const corral_model_name *name,
                                            char **json, size_t *len, corral_error *err)
{
    corral_model_name stored;
    if (corral_store_resolve(store, name, &stored, err) != CORRAL_STORE_OK)
        return CORRAL_REGISTRY_NOT_FOUND;
    char *path = corral_store_manifest_path(store, &stored, err);
    if (!path)
        return CORRAL_REGISTRY_INVALID;
    corral_registry_status status = CORRAL_REGISTRY_IO;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        corral_error_set(err, "cannot read '%s': %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > CORRAL_MANIFEST_MAX_BYTES) {
        corral_error_set(err, "'%s' is not a manifest of at most %u bytes", path,
                         CORRAL_MANIFEST_MAX_BYTES);
        status = CORRAL_REGISTRY_INVALID;
    } else if (!(*json = malloc((size_t)st.st_size + 1))) {
        corral_error_set(err, "out of memory");
    } else if (read(fd, *json, (size_t)st.st_size) != st.st_size) {
        corral_error_set(err, "cannot read '%s'", path);
        free(*json);
        *json = NULL;
    } else {
        (*json)[st.st_size] = '\0';
        *len = (size_t)st.st_size;
        status = CORRAL_REGISTRY_OK;
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return status;
}

typedef struct upload_progress {
    const reg_client *c;
    const char *status_text;
    const corral_layer *layer;
    int64_t last_report_ns;
    bool cancelled;
} upload_progress;

static bool on_upload_progress(void *ctx, uint64_t downloaded, uint64_t uploaded)
{
    (void)downloaded;
    upload_progress *u = ctx;
    int64_t now = now_ns();
    if (now - u->last_report_ns < REPORT_INTERVAL_NS)
        return true;
    u->last_report_ns = now;
    u->cancelled = !reg_report(u->c, u->status_text, u->layer->digest, u->layer->size_bytes,
                               uploaded);
    return !u->cancelled;
}

/* Does the registry have the blob already? */
static corral_registry_status blob_exists(reg_client *c, const corral_layer *layer, bool *exists,
                                          corral_error *err)
{
    char *url = reg_client_url(c, "blobs", layer->digest);
    if (!url) {
        corral_error_set(err, "out of memory");
        return CORRAL_REGISTRY_FAILED;
    }
    reg_request req = REG_REQUEST_INIT;
    req.method = "HEAD";
    req.url = url;
    req.follow_redirects = true;
    reg_response resp = {0};
    corral_registry_status status = CORRAL_REGISTRY_OK;
    if (reg_perform_retry(c, &req, &resp, &status, err)) {
        *exists = resp.status == 200;
        if (resp.status != 200 && resp.status != 404) {
            reg_describe_failure(&resp, "check blob", err);
            status = reg_status_of_reply(&resp);
        }
    }
    reg_response_clear(&resp);
    free(url);
    return status;
}

/* POST an upload session; its URL (with ?digest=) into *put_url. */
static corral_registry_status start_upload(reg_client *c, const corral_layer *layer,
                                           char **put_url, corral_error *err)
{
    char *url = reg_client_url(c, "blobs", "uploads/");
    if (!url) {
        corral_error_set(err, "out of memory");
        return CORRAL_REGISTRY_FAILED;
    }
    reg_request req = REG_REQUEST_INIT;
    req.method = "POST";
    req.url = url;
    reg_response resp = {0};
    corral_registry_status status = CORRAL_REGISTRY_OK;
    if (reg_perform_retry(c, &req, &resp, &status, err)) {
        if (resp.status != 202) {
            reg_describe_failure(&resp, "start upload", err);
            status = reg_status_of_reply(&resp);
        } else if (!resp.location ||
                   !(*put_url = reg_resolve_url(url, resp.location, "digest", layer->digest))) {
            corral_error_set(err, "start upload: the registry sent no usable upload location");
            status = CORRAL_REGISTRY_INVALID;
        }
    }
    reg_response_clear(&resp);
    free(url);
    return status;
}

/* The whole blob in one PUT (monolithic upload). */
static corral_registry_status upload_blob(reg_client *c, corral_store *store,
                                          const corral_layer *layer, const char *status_text,
                                          bool *retry, corral_error *err)
{
    *retry = false;
    char *put_url = NULL;
    corral_registry_status status = start_upload(c, layer, &put_url, err);
    if (status != CORRAL_REGISTRY_OK)
        return status;
    char *path = corral_store_blob_path(store, layer->digest, err);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size != layer->size_bytes) {
        if (path)
            corral_error_set(err, "blob %s is missing or has the wrong size in the store",
                             layer->digest);
        status = CORRAL_REGISTRY_IO;
        goto done;
    }
    upload_progress progress = {c, status_text, layer, 0, false};
    reg_request req = REG_REQUEST_INIT;
    req.method = "PUT";
    req.url = put_url;
    req.content_type = "application/octet-stream";
    req.body_fd = fd;
    req.body_fd_len = layer->size_bytes;
    req.xfer = on_upload_progress;
    req.xfer_ctx = &progress;
    reg_response resp = {0};
    if (!reg_perform(c, &req, &resp, &status, err)) {
        *retry = resp.transport_failed && !resp.aborted;
        if (progress.cancelled) {
            corral_error_set(err, "cancelled");
            status = CORRAL_REGISTRY_CANCELLED;
        }
    } else if (resp.status != 201 && resp.status != 204) {
        reg_describe_failure(&resp, "upload blob", err);
        status = reg_status_of_reply(&resp);
        *retry = resp.status >= 500 || resp.status == 429;
    }
    reg_response_clear(&resp);
done:
    if (fd >= 0)
        close(fd);
    free(path);
    free(put_url);
    return status;
}

static corral_registry_status push_blob(reg_client *c, corral_store *store,
                                        const corral_layer *layer, corral_error *err)
{
    char status_text[32];
    reg_status_for_digest("pushing", layer->digest, status_text, sizeof status_text);
    if (!reg_report(c, status_text, layer->digest, layer->size_bytes, 0))
        return CORRAL_REGISTRY_CANCELLED;
    bool exists = false;
    corral_registry_status status = blob_exists(c, layer, &exists, err);
    for (unsigned attempt = 1; status == CORRAL_REGISTRY_OK && !exists; attempt++) {
        bool retry;
        status = upload_blob(c, store, layer, status_text, &retry, err);
        if (status == CORRAL_REGISTRY_OK || !retry || attempt >= c->opts.max_retries)
            break;
        reg_backoff(c, attempt);
        status = CORRAL_REGISTRY_OK;
    }
    if (status == CORRAL_REGISTRY_OK &&
        !reg_report(c, status_text, layer->digest, layer->size_bytes, layer->size_bytes))
        status = CORRAL_REGISTRY_CANCELLED;
    return status;
}

static corral_registry_status put_manifest(reg_client *c, const corral_model_name *name,
                                           const corral_manifest *m, const char *json,
                                           size_t len, corral_error *err)
{
    char *url = reg_client_url(c, "manifests", name->tag);
    if (!url) {
        corral_error_set(err, "out of memory");
        return CORRAL_REGISTRY_FAILED;
    }
    reg_request req = REG_REQUEST_INIT;
    req.method = "PUT";
    req.url = url;
    req.content_type = m->media_type;
    req.body = json;
    req.body_len = len;
    reg_response resp = {0};
    corral_registry_status status = CORRAL_REGISTRY_OK;
    if (reg_perform_retry(c, &req, &resp, &status, err) && resp.status != 201 &&
        resp.status != 200) {
        reg_describe_failure(&resp, "push manifest", err);
        status = reg_status_of_reply(&resp);
    }
    reg_response_clear(&resp);
    free(url);
    return status;
}

corral_registry_status corral_registry_push(corral_store *store, const char *name_text,
                                            const corral_registry_options *opts,
                                            corral_error *err)
{
    corral_error local_err;
    if (!err)
        err = &local_err;
    err->message[0] = '\0';
    const char *after_scheme = strstr(name_text, "://");
    after_scheme = after_scheme ? after_scheme + 3 : name_text;
    if (!strchr(after_scheme, '/')) {
        corral_error_set(err, "invalid model name '%.100s': push needs "
                              "[host/]namespace/model:tag", name_text);
        return CORRAL_REGISTRY_INVALID;
    }
    corral_model_name name;
    corral_registry_status status;
    reg_client *c = reg_client_open(name_text, opts, &name, &status, err);
    if (!c)
        return status;
    char *json = NULL;
    size_t len = 0;
    corral_manifest *m = NULL;
    status = CORRAL_REGISTRY_CANCELLED;
    if (!reg_report(c, "retrieving manifest", NULL, 0, 0))
        goto done;
    if ((status = read_manifest(store, &name, &json, &len, err)) != CORRAL_REGISTRY_OK)
        goto done;
    if (!(m = corral_manifest_parse(json, len, err))) {
        status = CORRAL_REGISTRY_INVALID;
        goto done;
    }
    if ((status = push_blob(c, store, &m->config, err)) != CORRAL_REGISTRY_OK)
        goto done;
    for (size_t i = 0; i < m->n_layers; i++)
        if ((status = push_blob(c, store, &m->layers[i], err)) != CORRAL_REGISTRY_OK)
            goto done;
    status = CORRAL_REGISTRY_CANCELLED;
    if (!reg_report(c, "pushing manifest", NULL, 0, 0))
        goto done;
    if ((status = put_manifest(c, &name, m, json, len, err)) != CORRAL_REGISTRY_OK)
        goto done;
    reg_report(c, "success", NULL, 0, 0);
done:
    if (status == CORRAL_REGISTRY_CANCELLED && !err->message[0])
        corral_error_set(err, "cancelled");
    corral_manifest_free(m);
    free(json);
    reg_client_free(c);
    return status;
}
