/* Running a Vulkan test group or skipping it without a device, and the contexts it compares
 * (vulkan_fixture.h). */
#include "vulkan_fixture.h"

#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corral/engine.h"

/* Whether name matches one of the comma-separated glob patterns. */
static bool name_matches(const char *name, const char *patterns)
{
    char pattern[128];
    for (const char *p = patterns; *p;) {
        size_t len = strcspn(p, ",");
        if (len > 0 && len < sizeof pattern) {
            memcpy(pattern, p, len);
            pattern[len] = '\0';
            if (fnmatch(pattern, name, 0) == 0)
                return true;
        }
        p += len + (p[len] == ',');
    }
    return false;
}

int vulkan_fixture_run(const char *name, const struct CMUnitTest *tests, size_t n)
{
    corral_gpu_info gpus[16];
    size_t n_gpus;
    corral_error err = {{0}};
    bool any = false;
    if (corral_gpu_list(gpus, 16, &n_gpus, &err))
        for (size_t i = 0; i < n_gpus; i++)
            any = any || gpus[i].usable;
    if (!any) {
        printf("skipped: no usable Vulkan device (%s)\n", err.message[0] ? err.message : "none");
        return 77;
    }
    /* Comma-separated glob patterns: CORRAL_TEST_FILTER the tests to run (tests/CMakeLists.txt
     * runs parts again under other settings), CORRAL_TEST_SKIP those to leave out (the GPU
     * check sends the fixtures in parts, bench/gpu_remote.sh, and a part lacks some files). */
    const char *filter = getenv("CORRAL_TEST_FILTER");
    const char *skip = getenv("CORRAL_TEST_SKIP");
    struct CMUnitTest *kept = calloc(n ? n : 1, sizeof *kept);
    if (!kept)
        return 1;
    size_t n_kept = 0;
    for (size_t i = 0; i < n; i++)
        if ((!filter || name_matches(tests[i].name, filter)) &&
            (!skip || !name_matches(tests[i].name, skip)))
            kept[n_kept++] = tests[i];
    if (n_kept == 0) { /* a pattern that matches nothing must not pass */
        printf("no test of %s matches CORRAL_TEST_FILTER and CORRAL_TEST_SKIP\n", name);
        free(kept);
        corral_gpu_release();
        return 1;
    }
    int failed = _cmocka_run_group_tests(name, kept, n_kept, NULL, NULL);
    free(kept);
    corral_gpu_release();
    return failed;
}

corral_context *vulkan_fixture_context(const corral_model *m, int gpu_layers, uint32_t n_seq,
                                       uint32_t n_batch, uint32_t n_ctx, corral_kv_type kv)
{
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.n_seq = n_seq;
    p.n_threads = 1;
    p.kv_type = kv;
    p.n_gpu_layers = gpu_layers;
    corral_error err = {{0}};
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("context: %s", err.message);
    return ctx;
}
