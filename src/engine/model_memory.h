/*
 * What a model costs in memory when this engine runs it on this CPU, worked out from its GGUF
 * file alone (the server's scheduler plans with it before a runner loads anything). Internal
 * to the engine; the public face is corral_model_file_memory.
 */
#ifndef CORRAL_ENGINE_MODEL_MEMORY_H
#define CORRAL_ENGINE_MODEL_MEMORY_H

#include "corral/engine.h"
#include "gguf.h"

void model_memory_plan(const gguf_file *file, corral_model_memory *out);

#endif
