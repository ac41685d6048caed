/*
 * Shared by the Vulkan forward tests: run a cmocka group on the device, or report the test
 * skipped (ctest's 77) on a machine without a usable Vulkan device; and the contexts they
 * compare, on the CPU or the device.
 */
#ifndef CORRAL_TESTS_VULKAN_FIXTURE_H
#define CORRAL_TESTS_VULKAN_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

struct CMUnitTest;

/* A one-thread context with gpu_layers on the device (0: the CPU alone, -1: every layer that
 * fits); fails the test when it cannot be made. */
corral_context *vulkan_fixture_context(const corral_model *m, int gpu_layers, uint32_t n_seq,
                                       uint32_t n_batch, uint32_t n_ctx, corral_kv_type kv);

/* Runs the n tests (cmocka's group `name`): those CORRAL_TEST_FILTER matches when it is set,
 * as ctest's narrower runs ask, less those CORRAL_TEST_SKIP matches (each a comma-separated
 * list of glob patterns), and releases the devices after; returns how many failed, and fails
 * when the patterns leave no test. Without a usable device it prints why and returns 77. */
int vulkan_fixture_run(const char *name, const struct CMUnitTest *tests, size_t n);

#define VULKAN_FIXTURE_RUN(tests)                                                                \
    vulkan_fixture_run(#tests, tests, sizeof(tests) / sizeof((tests)[0]))

#endif
