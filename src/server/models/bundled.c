/*
 * The demo model inside the binary (see bundled.h). The GGUF's bytes are copied into .rodata
 * by the assembler (.incbin of the file CMake names in CORRAL_BUNDLED_GGUF), so no 9 MB array
 * literal is compiled; CMake also passes the file's digest, CORRAL_BUNDLED_GGUF_DIGEST. The
 * template, parameters and license are this file's; /api/create's code builds the config and
 * the manifest from them, exactly as for a Modelfile.
 */
#include "server/models/bundled.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "server/models/create.h"

/* Local labels: the C declarations below resolve to them within this object only. */
__asm__(".pushsection .rodata.corral_bundled,\"a\"\n"
        ".balign 64\n"
        "tolstoy_gguf:\n"
        ".incbin \"" CORRAL_BUNDLED_GGUF "\"\n"
        "tolstoy_gguf_end:\n"
        ".balign 8\n"
        "tolstoy_gguf_size:\n"
        ".quad tolstoy_gguf_end - tolstoy_gguf\n"
        ".popsection\n");
extern const unsigned char tolstoy_gguf[];
extern const uint64_t tolstoy_gguf_size;

#define TOLSTOY_NAME "tiny-tolstoy"
#define TOLSTOY_FILE "tiny-tolstoy-f16.gguf"
#define WRITE_CHUNK_BYTES (1u << 20) /* one progress report per chunk */

#define TOLSTOY_TEMPLATE "{{ .Prompt }}" /* a base model: it continues the prompt's paragraph */

static const char tolstoy_license[] =
    "tiny-tolstoy: weights and tokenizer trained by the Corral project on Leo Tolstoy's\n"
    "War and Peace (the Project Gutenberg text, in the public domain).\n\n"
    "MIT License\n\n"
    "Copyright (c) 2026 The Corral authors\n\n"
    "Permission is hereby granted, free of charge, to any person obtaining a copy\n"
    "of this software and associated documentation files (the \"Software\"), to deal\n"
    "in the Software without restriction, including without limitation the rights\n"
    "to use, copy, modify, merge, publish, distribute, sublicense, and/or sell\n"
    "copies of the Software, and to permit persons to whom the Software is\n"
    "furnished to do so, subject to the following conditions:\n\n"
    "The above copyright notice and this permission notice shall be included in all\n"
    "copies or substantial portions of the Software.\n\n"
    "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR\n"
    "IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n"
    "FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE\n"
    "AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER\n"
    "LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,\n"
    "OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE\n"
    "SOFTWARE.\n";

bool bundled_has(const char *name)
{
    corral_model_name parsed, bundled;
    return corral_model_name_parse(name, &parsed, NULL) &&
           corral_model_name_parse(TOLSTOY_NAME, &bundled, NULL) &&
           corral_model_name_equal(&parsed, &bundled);
}

/* Report a status; false when the client's callback asks to cancel. */
static bool report(const corral_registry_options *opts, const char *status, const char *digest,
                   uint64_t total_bytes, uint64_t completed_bytes)
{
    if (!opts || !opts->progress)
        return true;
    corral_registry_progress p = {status, digest, total_bytes, completed_bytes};
    return opts->progress(opts->progress_ctx, &p);
}

static corral_registry_status cancelled(corral_error *err)
{
    corral_error_set(err, "cancelled");
    return CORRAL_REGISTRY_CANCELLED;
}

/* The GGUF blob, unless the store has it: written in chunks, reported as one layer. */
static corral_registry_status write_gguf(corral_store *store, const corral_registry_options *opts,
                                         corral_error *err)
{
    const char *digest = CORRAL_BUNDLED_GGUF_DIGEST;
    const uint64_t size = tolstoy_gguf_size;
    char status[32];
    snprintf(status, sizeof status, "pulling %.12s", digest + 7);
    uint64_t have = 0;
    if (corral_store_blob_stat(store, digest, &have, NULL) == CORRAL_STORE_OK && have == size) {
        corral_store_blob_touch(store, digest, NULL);
        return report(opts, status, digest, size, size) ? CORRAL_REGISTRY_OK : cancelled(err);
    }
    corral_blob_writer *w = corral_blob_writer_create(store, size, err);
    if (!w)
        return CORRAL_REGISTRY_IO;
    for (uint64_t done = 0; done < size;) {
        size_t n = size - done < WRITE_CHUNK_BYTES ? (size_t)(size - done) : WRITE_CHUNK_BYTES;
        if (!corral_blob_writer_write(w, tolstoy_gguf + done, n, err)) {
            corral_blob_writer_free(w);
            return CORRAL_REGISTRY_IO;
        }
        done += n;
        if (!report(opts, status, digest, size, done)) {
            corral_blob_writer_free(w);
            return cancelled(err);
        }
    }
    corral_store_status s = corral_blob_writer_finish(w, digest, size, err);
    corral_blob_writer_free(w);
    if (s == CORRAL_STORE_OK)
        return CORRAL_REGISTRY_OK;
    corral_error_prefix(err, "the copy of %s inside this binary", TOLSTOY_FILE);
    return s == CORRAL_STORE_INVALID ? CORRAL_REGISTRY_INVALID : CORRAL_REGISTRY_IO;
}

corral_registry_status bundled_pull(corral_store *store, const corral_registry_options *opts,
                                    corral_error *err)
{
    if (!report(opts, "pulling manifest", NULL, 0, 0))
        return cancelled(err);
    corral_registry_status status = write_gguf(store, opts, err);
    if (status != CORRAL_REGISTRY_OK)
        return status;
    if (!report(opts, "verifying sha256 digest", NULL, 0, 0) ||
        !report(opts, "writing manifest", NULL, 0, 0))
        return cancelled(err);
    /* Greedy with a repeat penalty reads well and gives the same answer every time; the
     * model almost never emits EOS, so num_predict ends the answer. */
    json_t *request = json_pack("{s:s, s:{s:s}, s:s, s:s, s:{s:f, s:f, s:i}}",
                                "model", TOLSTOY_NAME,
                                "files", TOLSTOY_FILE, CORRAL_BUNDLED_GGUF_DIGEST,
                                "template", TOLSTOY_TEMPLATE,
                                "license", tolstoy_license,
                                "parameters", "temperature", 0.0, "repeat_penalty", 1.2,
                                "num_predict", 100);
    json_t *create_progress = json_array();
    unsigned http_status = request && create_progress
                               ? create_model(store, request, NULL, create_progress, err)
                               : 500;
    if (!request || !create_progress)
        corral_error_set(err, "out of memory");
    json_decref(create_progress);
    json_decref(request);
    if (http_status != 200) {
        corral_error_prefix(err, "import %s", TOLSTOY_NAME);
        return http_status == 500 ? CORRAL_REGISTRY_IO : CORRAL_REGISTRY_INVALID;
    }
    report(opts, "success", NULL, 0, 0); /* the model is in place: too late to cancel */
    return CORRAL_REGISTRY_OK;
}
