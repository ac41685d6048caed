/*
 * corral_registry_pull: fetch a manifest, then every blob it names that the store lacks, then
 * write the manifest's exact bytes (so its digest is the registry's). Reports ollama's
 * statuses: pulling manifest, pulling <12 hex>…, verifying sha256 digest, writing manifest,
 * success. A manifest is validated (digests, sizes, media types) before any blob is fetched.
 */
#include "registry/registry_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char manifest_accept[] = CORRAL_MEDIA_MANIFEST ", " CORRAL_MEDIA_MANIFEST_OCI;

/* The manifest's bytes, checked against Docker-Content-Digest when the registry sends one. */
static corral_registry_status fetch_manifest(reg_client *c, const corral_model_name *name,
                                             reg_response *resp, corral_error *err)
{
    char *url = reg_client_url(c, "manifests", name->tag);
    if (!url) {
        corral_error_set(err, "out of memory");
        return CORRAL_REGISTRY_FAILED;
    }
    reg_request req = REG_REQUEST_INIT;
    req.method = "GET";
    req.url = url;
    req.accept = manifest_accept;
    req.max_body_bytes = CORRAL_MANIFEST_MAX_BYTES;
    req.follow_redirects = true;
    corral_registry_status status = CORRAL_REGISTRY_OK;
    bool ok = reg_perform_retry(c, &req, resp, &status, err);
    free(url);
    if (!ok) {
        corral_error_prefix(err, "pull model manifest");
        return status;
    }
    if (resp->status == 404) {
        corral_error_set(err, "pull model manifest: file does not exist");
        return CORRAL_REGISTRY_NOT_FOUND;
    }
    if (resp->status != 200 || !resp->body) {
        reg_describe_failure(resp, "pull model manifest", err);
        return resp->status == 200 ? CORRAL_REGISTRY_INVALID : reg_status_of_reply(resp);
    }
    if (resp->content_digest && corral_digest_is_valid(resp->content_digest)) {
        char actual[CORRAL_DIGEST_BUF];
        corral_digest_of(resp->body, resp->body_len, actual);
        if (strcmp(actual, resp->content_digest) != 0) {
            corral_error_set(err, "pull model manifest: digest mismatch: the registry says %s, "
                                  "the bytes are %s", resp->content_digest, actual);
            return CORRAL_REGISTRY_INVALID;
        }
    }
    return CORRAL_REGISTRY_OK;
}

static corral_registry_status pull_blob(reg_client *c, corral_store *store,
                                        const corral_layer *layer, corral_error *err)
{
    uint64_t have = 0;
    if (corral_store_blob_stat(store, layer->digest, &have, NULL) == CORRAL_STORE_OK &&
        have == layer->size_bytes) {
        char status_text[32];
        reg_status_for_digest("pulling", layer->digest, status_text, sizeof status_text);
        corral_store_blob_touch(store, layer->digest, NULL);
        return reg_report(c, status_text, layer->digest, have, have) ? CORRAL_REGISTRY_OK
                                                                     : CORRAL_REGISTRY_CANCELLED;
    }
    return reg_download_blob(c, store, layer->digest, layer->size_bytes, err);
}

/* Report a status; a false from the callback becomes CANCELLED. */
static bool say(const reg_client *c, const char *status, corral_error *err)
{
    if (reg_report(c, status, NULL, 0, 0))
        return true;
    corral_error_set(err, "cancelled");
    return false;
}

corral_registry_status corral_registry_pull(corral_store *store, const char *name_text,
                                            const corral_registry_options *opts,
                                            corral_error *err)
{
    corral_error local_err;
    if (!err)
        err = &local_err;
    corral_model_name name;
    corral_registry_status status;
    reg_client *c = reg_client_open(name_text, opts, &name, &status, err);
    if (!c)
        return status;
    reg_response resp = {0};
    corral_manifest *m = NULL;
    if (!say(c, "pulling manifest", err)) {
        status = CORRAL_REGISTRY_CANCELLED;
        goto done;
    }
    if ((status = fetch_manifest(c, &name, &resp, err)) != CORRAL_REGISTRY_OK)
        goto done;
    if (!(m = corral_manifest_parse(resp.body, resp.body_len, err))) {
        corral_error_prefix(err, "pull model manifest");
        status = CORRAL_REGISTRY_INVALID;
        goto done;
    }
    if ((status = pull_blob(c, store, &m->config, err)) != CORRAL_REGISTRY_OK)
        goto done;
    for (size_t i = 0; i < m->n_layers; i++)
        if ((status = pull_blob(c, store, &m->layers[i], err)) != CORRAL_REGISTRY_OK)
            goto done;
    status = CORRAL_REGISTRY_CANCELLED;
    if (!say(c, "verifying sha256 digest", err) || !say(c, "writing manifest", err))
        goto done;
    if (corral_store_manifest_write_raw(store, &name, resp.body, resp.body_len, err) !=
        CORRAL_STORE_OK) {
        status = CORRAL_REGISTRY_IO;
        goto done;
    }
    reg_report(c, "success", NULL, 0, 0); /* the model is in place: too late to cancel */
    status = CORRAL_REGISTRY_OK;
done:
    corral_manifest_free(m);
    reg_response_clear(&resp);
    reg_client_free(c);
    return status;
}
