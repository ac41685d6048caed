/*
 * write_onefile_fixture TEXT.gguf MMPROJ.gguf TOKENS_PER_IMAGE OUT.gguf [BAD_TENSOR]: the pair
 * merged into one GGUF in ollama's single-file vision layout (onefile_fixture.h), BAD_TENSOR
 * (ollama's name) flattened to the wrong shape, for the integration tests, which import it
 * as a user would a model pulled from ollama's library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "onefile_fixture.h"

static const char *const *args;
static int n_args;

static void write_it(void **state)
{
    (void)state;
    onefile_fixture_write(args[1], args[2], args[4], (uint32_t)strtoul(args[3], NULL, 10), NULL,
                          n_args == 6 ? args[5] : NULL);
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s TEXT.gguf MMPROJ.gguf TOKENS_PER_IMAGE OUT.gguf [BAD_TENSOR]\n",
                argv[0]);
        return 2;
    }
    args = (const char *const *)argv;
    n_args = argc;
    const struct CMUnitTest tests[] = {cmocka_unit_test(write_it)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
