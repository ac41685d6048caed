/*
 * The registry client: pull and push models over the OCI distribution API
 * between a remote registry and the local model store. Owns the wire protocol, registry auth
 * and resumable blob downloads; knows nothing of HTTP serving or the terminal.
 * Invariants: every digest from a registry is validated before a path is formed from it, and a
 * blob reaches the store only through corral_blob_writer, after its digest matched.
 */
#ifndef CORRAL_REGISTRY_REGISTRY_H
#define CORRAL_REGISTRY_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"
#include "store/store.h"

/*
 * Names: [http(s)://][host/][namespace/]model[:tag], defaults registry.ollama.ai, library,
 * latest. https unless the name says http:// (which needs insecure) or insecure is set with
 * no scheme (then http, as ollama does). Push needs an explicit namespace.
 *
 * Credentials for private registries (ollama has none, #9215), looked up by the name's host
 * (with its port, case-insensitively) and sent only to that host:
 *   - CORRAL_REGISTRY_AUTH="host=user:password [host2=user2:password2 ...]"
 *     (entries separated by white space; a password holding white space goes in the file);
 *   - else the file $CORRAL_REGISTRY_CREDENTIALS, default ~/.corral/credentials.json:
 *       {"registry.example.com:5000": {"username": "u", "password": "p"}}
 *     It must not be readable by group or others (chmod 600), or it is refused.
 * They answer a 401 with a Basic challenge, and go to a Bearer challenge's token realm,
 * which must be on the registry's own host (any other host is refused).
 */

/* What one progress report says. The server turns it into ollama's NDJSON statuses. */
typedef struct corral_registry_progress {
    const char *status;       /* "pulling manifest", "pulling 0123456789ab", "success", ... */
    const char *digest;       /* the blob a transfer status is about, else NULL */
    uint64_t total_bytes;     /* for transfer statuses; 0 otherwise */
    uint64_t completed_bytes;
} corral_registry_progress;

/* Called on the pulling/pushing thread: at each status change and about every 60 ms during a
 * transfer. Returning false cancels: a download nobody else waits for stops, leaving its
 * partial file for the next pull to resume. */
typedef bool (*corral_registry_progress_fn)(void *ctx, const corral_registry_progress *p);

typedef struct corral_registry_options {
    bool insecure;                       /* allow http */
    corral_registry_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    /* Tuning; 0 means the default in brackets. */
    uint64_t part_min_bytes;  /* [16 MiB] a blob splits into parts of at least this size */
    unsigned max_parts;       /* [8] parts, each on its own connection */
    unsigned stall_seconds;   /* [30] under 1 KiB/s for this long is a stall, retried */
    unsigned max_retries;     /* [6] failed attempts per request before giving up */
    unsigned backoff_ms;      /* [1000] first retry delay; it doubles each time, capped at 30 s */
} corral_registry_options;

typedef enum corral_registry_status {
    CORRAL_REGISTRY_OK = 0,
    CORRAL_REGISTRY_INVALID,      /* bad name, http without insecure, hostile reply, bad digest */
    CORRAL_REGISTRY_NOT_FOUND,    /* no such model, locally (push) or remotely (pull) */
    CORRAL_REGISTRY_UNAUTHORIZED, /* credentials missing or refused */
    CORRAL_REGISTRY_FAILED,       /* network or registry failure after the retries */
    CORRAL_REGISTRY_CANCELLED,    /* the progress callback asked to stop */
    CORRAL_REGISTRY_IO,           /* the local store failed */
} corral_registry_status;

/* Download name's manifest and every blob it references into store, then write the
 * manifest's exact bytes under name. Blobs already in the store are not fetched again. */
corral_registry_status corral_registry_pull(corral_store *store, const char *name,
                                            const corral_registry_options *opts,
                                            corral_error *err);

/* Bytes of blobs this process has downloaded from registries since it started (each byte once,
 * however many pulls waited for it; a resumed download counts only what it fetched). */
uint64_t corral_registry_downloaded_bytes(void);

/* Upload the blobs of name's manifest the registry lacks, then the manifest's bytes. */
corral_registry_status corral_registry_push(corral_store *store, const char *name,
                                            const corral_registry_options *opts,
                                            corral_error *err);

#endif
