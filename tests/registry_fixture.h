/*
 * Registries for test_registry: Debian's real docker-registry started on a free 127.0.0.1 port
 * with a temporary storage directory (optionally behind htpasswd basic auth), and a tiny
 * in-test registry speaking just enough HTTP to exercise the bearer-token flow and hostile
 * manifests, which a real registry would never serve.
 */
#ifndef CORRAL_TESTS_REGISTRY_FIXTURE_H
#define CORRAL_TESTS_REGISTRY_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define REGISTRY_BINARY "/usr/bin/docker-registry"
#define REGISTRY_USER "tester"
#define REGISTRY_PASSWORD "s3cret"

typedef struct real_registry {
    pid_t pid;
    unsigned port;
    char dir[4096];      /* config, htpasswd, storage and log live here */
    char host[64];       /* "127.0.0.1:<port>" */
} real_registry;

/* A port nothing listens on now, and whether something answers on a port. */
unsigned registry_fixture_free_port(void);
bool registry_fixture_port_answers(unsigned port);

bool real_registry_available(void);
/* Start docker-registry; basic_auth puts it behind htpasswd (REGISTRY_USER/PASSWORD). Aborts
 * if it does not answer within 15 s. */
void real_registry_start(real_registry *r, bool basic_auth);
void real_registry_stop(real_registry *r);
/* Bytes the registry sent for GETs of digest's blob, counted from its access log, after the
 * log offset *mark (0 for all); *mark is moved to the end of the log. */
unsigned long long real_registry_blob_bytes_sent(const real_registry *r, const char *digest,
                                                 long *mark);
/* Path of the blob's data file in the registry's storage. */
const char *real_registry_blob_file(const real_registry *r, const char *digest);

/* The fake registry: serves one repository "test/fake" with a manifest and its blobs. */
typedef enum fake_mode {
    FAKE_BEARER,            /* manifests and blobs need "Bearer good-token" from /token */
    FAKE_BEARER_OTHER_HOST, /* as above, but the realm names localhost instead of 127.0.0.1 */
    FAKE_HOSTILE_MANIFEST,  /* no auth; the manifest's layer digest is set by the test */
    FAKE_STALL_ONCE,        /* no auth; the first blob GET sends half and then hangs */
    FAKE_SLOW,              /* no auth; blobs trickle out a byte every 20 ms */
} fake_mode;

typedef struct fake_registry fake_registry;

fake_registry *fake_registry_start(fake_mode mode);
void fake_registry_stop(fake_registry *f);
const char *fake_registry_host(const fake_registry *f);
/* For FAKE_HOSTILE_MANIFEST: the manifest body to serve (copied). */
void fake_registry_set_manifest(fake_registry *f, const char *manifest);
/* The manifest served by default. */
const char *fake_registry_manifest(const fake_registry *f);
unsigned fake_registry_token_requests(const fake_registry *f);
unsigned fake_registry_blob_requests(const fake_registry *f);
/* Blob bytes FAKE_SLOW has sent. */
unsigned fake_registry_bytes_sent(const fake_registry *f);
/* Blob answers FAKE_STALL_ONCE has given (the first one stalled). */
unsigned fake_registry_stalls(const fake_registry *f);

#endif
