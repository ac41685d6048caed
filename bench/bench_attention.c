/*
 * Micro-benchmark of a token's attention (not a test): block_attention over a cache of a type
 * laid out as a context lays it out (key tiles and value rows per KV head), for every layer
 * and KV head of a model shape, at several depths. One thread, one pool task after another;
 * prints milliseconds per token and GB/s of cache bytes read per token (keys and values of the
 * visible cells). At the larger depths the cache of all layers is larger than any L3, as in a
 * real decode. With a number of queries, the calls take that many tokens of a prompt at once
 * (the last ones before the depth), as forward_attention groups them, and the figures are per
 * token. On a shared machine the wall clock counts other processes' time slices: the
 * thread's CPU time per token is printed too, and each figure is the least of its passes.
 * Usage: bench_attention [seconds per figure] [f16|f32|q8_0|q4_0] [queries] [shape] [depth]
 * (a shape and depth alone, for quick comparisons); runs at the active level (CORRAL_CPU=avx2,
 * say).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blocks.h"
#include "huge_pages.h"
#include "cpu.h"

typedef struct bench_shape {
    const char *name;
    size_t n_layer, n_head, n_head_kv, head_dim;
} bench_shape;

/* the attention of the bench/ models: Llama-3.2-1B, Qwen2.5-0.5B and Gemma-3-1B's */
static const bench_shape shapes[] = {
    {"L1B", 16, 32, 8, 64},
    {"Q05B", 24, 14, 2, 64},
    {"MQA1B", 26, 4, 1, 256},
};

static const size_t depths[] = {512, 4096, 16384};

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A uniform value in [-1, 1). */
static float next_random(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

/* n_layer layers of one sequence: key tiles and value rows per KV head. */
typedef struct cache {
    corral_kv_type type;
    uint8_t *k, *v;
    size_t n_cells, head_k_bytes, head_v_bytes; /* per layer and KV head */
} cache;

static bool cache_init(cache *c, const bench_shape *s, size_t n_cells)
{
    c->n_cells = n_cells; /* a multiple of KV_KEY_TILE */
    c->head_k_bytes = n_cells / KV_KEY_TILE * kv_key_tile_bytes(c->type, s->head_dim);
    c->head_v_bytes = n_cells * kv_value_row_bytes(c->type, s->head_dim);
    size_t k_bytes = s->n_layer * s->n_head_kv * c->head_k_bytes;
    size_t v_bytes = s->n_layer * s->n_head_kv * c->head_v_bytes;
    c->k = alloc_huge(k_bytes);
    c->v = alloc_huge(v_bytes);
    if (!c->k || !c->v)
        return false;
    /* random bytes under 0x3c: every F32, F16 value and block scale a finite number under 1,
     * what the arithmetic sees is all that matters here */
    uint32_t state = 42;
    for (size_t i = 0; i < k_bytes; i++)
        c->k[i] = (uint8_t)((next_random(&state) + 1.0f) * 29.5f);
    for (size_t i = 0; i < v_bytes; i++)
        c->v[i] = (uint8_t)((next_random(&state) + 1.0f) * 29.5f);
    return true;
}

static void cache_free(cache *c)
{
    free(c->k);
    free(c->v);
}

typedef struct scratch {
    float *q, *out, *attention;
} scratch;

/* The attention of n_queries tokens over every layer and KV head. */
static void token_pass(const bench_shape *s, const cache *c, size_t n_queries, scratch *w)
{
    size_t group = s->n_head / s->n_head_kv, dk = s->head_dim, width = s->n_head * dk;
    attention_shape shape = {group, n_queries, c->n_cells - (n_queries - 1), dk, dk, 0,
                             1.0f / sqrtf((float)dk), 0.0f, NULL, NULL, 0};
    for (size_t il = 0; il < s->n_layer; il++)
        for (size_t kv_head = 0; kv_head < s->n_head_kv; kv_head++) {
            size_t head = il * s->n_head_kv + kv_head;
            block_attention(c->type, &shape, w->q + kv_head * group * dk, width,
                            c->k + head * c->head_k_bytes, c->v + head * c->head_v_bytes,
                            w->attention, w->out + kv_head * group * dk, width);
        }
}

static bool bench_at(const bench_shape *s, size_t n_cells, corral_kv_type type,
                     size_t n_queries, double seconds)
{
    size_t floats = n_queries * s->n_head * s->head_dim;
    attention_shape shape = {.n_heads = s->n_head / s->n_head_kv,
                             .n_queries = n_queries,
                             .head_dim_k = s->head_dim,
                             .head_dim_v = s->head_dim};
    cache c = {.type = type};
    scratch w = {
        .q = malloc(floats * sizeof(float)),
        .out = malloc(floats * sizeof(float)),
        .attention = malloc(attention_scratch_floats(&shape) * sizeof(float)),
    };
    bool ok = w.q && w.out && w.attention && cache_init(&c, s, n_cells);
    if (ok) {
        uint32_t state = 7;
        for (size_t i = 0; i < floats; i++)
            w.q[i] = next_random(&state);
        token_pass(s, &c, n_queries, &w); /* warm-up */
        double best_wall = INFINITY, best_cpu = INFINITY, start = clock_seconds(CLOCK_MONOTONIC);
        do {
            double wall = clock_seconds(CLOCK_MONOTONIC);
            double cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
            token_pass(s, &c, n_queries, &w);
            cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu;
            wall = clock_seconds(CLOCK_MONOTONIC) - wall;
            best_wall = wall < best_wall ? wall : best_wall;
            best_cpu = cpu < best_cpu ? cpu : best_cpu;
        } while (clock_seconds(CLOCK_MONOTONIC) - start < seconds);
        double per_token = best_wall / (double)n_queries, cpu_token = best_cpu / (double)n_queries;
        double bytes = (double)(s->n_layer * s->n_head_kv * (c.head_k_bytes + c.head_v_bytes));
        printf("%-5s %6zu %10.3f %10.3f %8.1f %8.1f %8.1f\n", s->name, n_cells, per_token * 1e3,
               cpu_token * 1e3, bytes / 1e6, bytes / per_token / 1e9, bytes / cpu_token / 1e9);
        fflush(stdout);
    }
    cache_free(&c);
    free(w.q);
    free(w.out);
    free(w.attention);
    return ok;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    corral_kv_type type = CORRAL_KV_F16;
    long n_queries = argc > 3 ? atol(argv[3]) : 1;
    if (!(seconds > 0.0) || (argc > 2 && !corral_kv_type_parse(argv[2], &type)) ||
        n_queries < 1 || n_queries > KV_KEY_TILE || argc > 6) {
        fprintf(stderr, "usage: bench_attention [seconds per figure] [f16|f32|q8_0|q4_0] "
                        "[queries, 1 to %d] [L1B|Q05B|MQA1B] [depth]\n", KV_KEY_TILE);
        return 2;
    }
    printf("attention of %ld token%s per call, %s cache, 1 thread, level %s\n", n_queries,
           n_queries > 1 ? "s" : "", corral_kv_type_name(type),
           cpu_level_name(cpu_active_level()));
    printf("%-5s %6s %10s %10s %8s %8s %8s\n", "shape", "depth", "ms/token", "cpu ms", "MB",
           "GB/s", "cpu GB/s");
    const char *only_shape = argc > 4 ? argv[4] : NULL;
    size_t only_depth = argc > 5 ? (size_t)atol(argv[5]) : 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++)
            if ((!only_shape || strcmp(only_shape, shapes[s].name) == 0) &&
                (!only_depth || only_depth == depths[d]) &&
                !bench_at(&shapes[s], depths[d], type, (size_t)n_queries, seconds)) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
    return 0;
}
