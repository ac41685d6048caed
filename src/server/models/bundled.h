/*
 * Models shipped inside the corral binary: the demo model tiny-tolstoy, a small Llama trained
 * on War and Peace (MIT, tests/fixtures/PROVENANCE.md). A pull of that name imports it from
 * the binary into the store instead of asking a registry, so `corral run tiny-tolstoy` works
 * on a machine without a network. Knows nothing of HTTP.
 * Invariant: the embedded GGUF enters the store only through the verified blob writer, checked
 * against the digest the build computed from the file it embedded.
 */
#ifndef CORRAL_SERVER_BUNDLED_H
#define CORRAL_SERVER_BUNDLED_H

#include <stdbool.h>

#include "registry/registry.h"

/* Whether name (as a client spells it) is registry.ollama.ai/library/tiny-tolstoy:latest. */
bool bundled_has(const char *name);

/*
 * Write the bundled model into store as tiny-tolstoy:latest, replacing what is there, and
 * report ollama's pull statuses through opts->progress (may be NULL): "pulling manifest", the
 * GGUF layer's bytes, "verifying sha256 digest", "writing manifest", "success". A false from
 * the callback cancels before the manifest is written.
 */
corral_registry_status bundled_pull(corral_store *store, const corral_registry_options *opts,
                                    corral_error *err);

#endif
