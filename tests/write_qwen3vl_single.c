/*
 * write_qwen3vl_single TEXT.gguf MMPROJ.gguf OUT.gguf: the qwen3vl pair (deepstack layers 0
 * and 2), or a qwen35 pair (no deepstack), written as ollama's single file
 * (qwen3vl_single_fixture.h), for the integration tests, which import it as a user would a
 * model pulled from ollama's library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "qwen3vl_single_fixture.h"

static char **args;

static void write_it(void **state)
{
    (void)state;
    static const int32_t indexes[2] = {0, 2};
    qwen3vl_single_fixture_write(args[1], args[2], args[3], NULL, indexes, 2);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s TEXT.gguf MMPROJ.gguf OUT.gguf\n", argv[0]);
        return 2;
    }
    args = argv;
    const struct CMUnitTest tests[] = {cmocka_unit_test(write_it)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
