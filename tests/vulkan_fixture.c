/* Running a Vulkan test group or skipping it without a device (vulkan_fixture.h). */
#include "vulkan_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "corral/engine.h"

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
    const char *filter = getenv("CORRAL_TEST_FILTER");
    if (filter)
        cmocka_set_test_filter(filter);
    int failed = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
    corral_gpu_release();
    return failed;
}
