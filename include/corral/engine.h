/*
 * Corral's engine: the only header the runner, server and CLI may include from the engine.
 * It exposes files, models, contexts, tokenizers and sampling as opaque handles; tensor
 * types, kernels and GGUF internals stay behind it.
 */
#ifndef CORRAL_ENGINE_H
#define CORRAL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "corral/error.h"

/* ---- CPU dispatch ---- */

/* Lower the kernel level for this process: "scalar", "avx2" or "avx512". */
bool corral_cpu_set_level(const char *name, corral_error *err);
/* Name of the level kernels run at now, and of the highest the CPU supports. */
const char *corral_cpu_level(void);
const char *corral_cpu_detected_level(void);

/* ---- Model files (GGUF) ---- */

typedef struct corral_model_file corral_model_file;

corral_model_file *corral_model_file_open(const char *path, corral_error *err);
void corral_model_file_close(corral_model_file *file);

/* gguf-info: metadata (arrays abbreviated to max_array_items) and, optionally, tensors. */
void corral_model_file_print(const corral_model_file *file, FILE *out, bool with_tensors,
                             size_t max_array_items);

#endif
