/*
 * Shared by the Vulkan forward tests: run a cmocka group on the device, or report the test
 * skipped (ctest's 77) on a machine without a usable Vulkan device.
 */
#ifndef CORRAL_TESTS_VULKAN_FIXTURE_H
#define CORRAL_TESTS_VULKAN_FIXTURE_H

#include <stddef.h>

struct CMUnitTest;

/* Runs the n tests (cmocka's group `name`), only those CORRAL_TEST_FILTER matches (cmocka's
 * pattern) when it is set, as ctest's narrower runs ask, and releases the devices after;
 * returns how many failed. Without a usable device it prints why and returns 77. */
int vulkan_fixture_run(const char *name, const struct CMUnitTest *tests, size_t n);

#define VULKAN_FIXTURE_RUN(tests)                                                                \
    vulkan_fixture_run(#tests, tests, sizeof(tests) / sizeof((tests)[0]))

#endif
