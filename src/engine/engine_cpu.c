/* Public CPU-dispatch controls (corral/engine.h) over cpu.h. */
#include "corral/engine.h"
#include "cpu.h"

bool corral_cpu_set_level(const char *name, corral_error *err)
{
    return cpu_force_level(name, err);
}

const char *corral_cpu_level(void)
{
    return cpu_active_level_name();
}

const char *corral_cpu_detected_level(void)
{
    return cpu_level_name(cpu_detected_level());
}

bool corral_cpu_prefetches_single_stream(void)
{
    return cpu_prefetch_single_stream();
}
