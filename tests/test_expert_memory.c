/*
 * What a mixture-of-experts model in ollama's own gptoss layout costs in anonymous memory:
 * its experts (gate and up rows interleaved in one tensor, MXFP4 in ollama's nibble order)
 * are converted once, straight into the layout the CPU level multiplies, so loading the
 * model and creating a context adds about one copy of the experts, as a file in ggml's
 * layout does, not a converted copy and then a packed one. The model is written here: the
 * fixture's vocabulary with experts large enough that the copies dominate what else a
 * context allocates; its weights are random, so only memory and finite logits are checked
 * (tests/test_forward.c checks the logits of the layout on the reference fixtures).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "address_sanitized.h"
#include "gptoss_fixture.h"

/* A kB field of /proc/self/status, in bytes. */
static uint64_t status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    unsigned long long kb = 0;
    size_t len = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            assert_int_equal(sscanf(line + len + 1, "%llu", &kb), 1);
            break;
        }
    fclose(f);
    return (uint64_t)kb * 1024;
}

/*
 * Loading the model and creating a context adds between 0.9 and 1.5 copies of the experts
 * to the process's anonymous memory, at every level: the packed copy where the level packs
 * them, the converted one where it does not (a converted copy that is then packed again
 * would be two). The context's other buffers are small beside them: a few percent of the
 * copy, with the packed copies rounded up to whole 2 MiB pages.
 */
static void test_ollama_gptoss_experts_cost_one_copy(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-expert-memory-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    size_t experts;
    gptoss_fixture_write(path, &experts);

    uint64_t before = status_bytes("RssAnon");
    corral_error err;
    corral_model *model = corral_model_load(path, &err);
    if (!model)
        fail_msg("%s", err.message);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_threads = 2;
    corral_context *ctx = corral_context_create(model, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    uint64_t added = status_bytes("RssAnon") - before;
    print_message("experts %zu bytes; anonymous memory added at load %llu bytes (%.2f copies)\n",
                  experts, (unsigned long long)added, (double)added / (double)experts);
    assert_true((double)added >= 0.9 * (double)experts);
#if !ADDRESS_SANITIZED
    assert_true((double)added <= 1.5 * (double)experts);
#endif

    corral_token ids[] = {51, 257, 300, 285};
    corral_batch batch = {.n_tokens = 4, .tokens = ids};
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("decode: %s", err.message);
    const float *logits = corral_get_logits(ctx, 3);
    for (uint32_t i = 0; i < corral_model_n_vocab(model); i++)
        assert_true(isfinite(logits[i]));
    corral_context_free(ctx);
    corral_model_free(model);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ollama_gptoss_experts_cost_one_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
