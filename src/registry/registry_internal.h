/*
 * What the files of src/registry/ share: the client for one repository on one registry (its
 * base URL, options with defaults filled in, and the Authorization it has earned), single HTTP
 * requests over libcurl with bounded replies, the auth flow, credentials and blob downloads.
 * Authorization is only ever sent to the registry's own host.
 */
#ifndef CORRAL_REGISTRY_REGISTRY_INTERNAL_H
#define CORRAL_REGISTRY_REGISTRY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry/registry.h"

/* Replies read into memory: error bodies, token replies, upload answers. */
#define REG_SMALL_REPLY_MAX (64u << 10)

typedef struct reg_client {
    corral_registry_options opts; /* defaults filled in */
    char scheme[8];               /* "http" or "https" */
    char host[CORRAL_NAME_HOST_MAX + 1];
    char repository[2 * CORRAL_NAME_PART_MAX + 2]; /* "namespace/model" */
    pthread_mutex_t lock;         /* guards authorization: parts share one client */
    char *authorization;          /* header value earned from a challenge, or NULL */
} reg_client;

/* name's client; scheme is "http" or "https" (decided by the caller from the name). */
reg_client *reg_client_create(const corral_model_name *name, const char *scheme,
                              const corral_registry_options *opts, corral_error *err);
/* The client for a name as a user typed it: http:// needs opts->insecure (else "insecure
 * protocol http"); insecure without a scheme means http, as in ollama. */
reg_client *reg_client_open(const char *text, const corral_registry_options *opts,
                            corral_model_name *name, corral_registry_status *status,
                            corral_error *err);
/* An independent copy (for a download that may outlive the pull that started it). */
reg_client *reg_client_clone(reg_client *c, corral_error *err);
void reg_client_free(reg_client *c);

/* "{scheme}://{host}/v2/{repository}/{kind}/{reference}", malloc'ed (NULL: out of memory). */
char *reg_client_url(const reg_client *c, const char *kind, const char *reference);

/* Report progress through the options' callback; false means the caller wants to stop. */
bool reg_report(const reg_client *c, const char *status, const char *digest, uint64_t total,
                uint64_t completed);

/* ---- one request (transport.c) ---- */

/* Response body consumer; returns false to abort the transfer. */
typedef bool (*reg_sink_fn)(void *ctx, const char *data, size_t len);
/* Transfer progress; returns false to abort. */
typedef bool (*reg_xfer_fn)(void *ctx, uint64_t downloaded, uint64_t uploaded);

typedef struct reg_request {
    const char *method;       /* GET, HEAD, POST, PUT */
    const char *url;
    const char *accept;       /* NULL: none */
    const char *content_type; /* of the body; NULL: none */
    bool has_range;           /* Range: bytes=range_first-range_last */
    uint64_t range_first, range_last;
    const char *body;         /* upload from memory... */
    size_t body_len;
    int body_fd;              /* ...or from a file (when body is NULL and body_fd >= 0) */
    uint64_t body_fd_len;
    reg_sink_fn sink;         /* a 2xx body goes here; NULL: into response.body */
    bool require_partial;     /* a 200 (Range ignored) is refused: only 206 goes to sink */
    void *sink_ctx;
    size_t max_body_bytes;    /* cap of response.body; 0: REG_SMALL_REPLY_MAX */
    reg_xfer_fn xfer;
    void *xfer_ctx;
    bool follow_redirects;
    const char *authorization; /* instead of the client's (e.g. Basic for a token realm) */
} reg_request;

#define REG_REQUEST_INIT {.body_fd = -1}

typedef struct reg_response {
    long status;
    char *body; /* NUL-terminated, malloc'ed; NULL when empty */
    size_t body_len;
    char *location;
    char *www_authenticate;
    char *content_digest;      /* Docker-Content-Digest */
    bool stalled;              /* the low-speed limit cut the transfer */
    bool aborted;              /* a sink, xfer callback or size cap stopped it */
    bool transport_failed;     /* no HTTP reply (connection, TLS, stall, abort) */
    bool unknown_host;         /* the host name did not resolve: retrying will not help */
} reg_response;

void reg_response_clear(reg_response *r);

/* One HTTP exchange: no retries, no answer to a 401. false on a transport failure. */
bool reg_send_once(reg_client *c, const reg_request *req, reg_response *resp, corral_error *err);

/* Send req once; a 401 answers the challenge and sends it once more. false on a transport
 * failure or a refused challenge (err says which; *status says what kind). */
bool reg_perform(reg_client *c, const reg_request *req, reg_response *resp,
                 corral_registry_status *status, corral_error *err);

/* reg_perform, retried with backoff after transport failures, 5xx, 408 and 429. true with
 * the reply otherwise (the caller judges its status). */
bool reg_perform_retry(reg_client *c, const reg_request *req, reg_response *resp,
                       corral_registry_status *status, corral_error *err);

/* err = "<what>: <registry's message or HTTP status>". */
void reg_describe_failure(const reg_response *resp, const char *what, corral_error *err);

/* The status for a reply that was not what we wanted. */
corral_registry_status reg_status_of_reply(const reg_response *resp);

/* Sleep before retry number attempt (1, 2, ...): backoff_ms doubling, capped at 30 s. */
void reg_backoff(const reg_client *c, unsigned attempt);

/* url's host name (no port), lowercased, into buf; false if url does not parse. */
bool reg_url_hostname(const char *url, char *buf, size_t cap);

/* location resolved against base (absolute or relative), malloc'ed; NULL if it is not an
 * http(s) URL. query (may be NULL) is appended, URL-encoded, as "key=value". */
char *reg_resolve_url(const char *base, const char *location, const char *query_key,
                      const char *query_value);

/* ---- auth (auth.c, credentials.c) ---- */

/* Answer a 401's WWW-Authenticate challenge: sets c->authorization. */
corral_registry_status reg_auth_answer(reg_client *c, const char *challenge, corral_error *err);

/* host's credentials (malloc'ed) from the environment or the credentials file. true with
 * *user NULL when there are none; false with err when the configuration is broken. */
bool reg_credentials_find(const char *host, char **user, char **password, corral_error *err);

/* ---- blobs (download.c) ---- */

/* Fetch digest (size_bytes long) into the store, sharing a download already running for
 * it, reporting "pulling <12 hex>" progress. */
corral_registry_status reg_download_blob(reg_client *c, corral_store *store, const char *digest,
                                         uint64_t size_bytes, corral_error *err);

/* "pulling 0123456789ab" style status: prefix + the first 12 hex digits of digest. */
void reg_status_for_digest(const char *prefix, const char *digest, char *buf, size_t cap);

#endif
