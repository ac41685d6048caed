/*
 * Micro-benchmark of one generated token's attention (not a test): block_attention over an
 * F16 cache laid out as a context lays it out (key tiles and value rows per KV head), for
 * every layer and KV head of a model shape, at several depths. One thread, one pool task after
 * another; prints milliseconds per token and GB/s of cache bytes read (keys and values of the
 * visible cells). At the larger depths the cache of all layers is larger than any L3, as in a
 * real decode.
 * Usage: bench_attention [seconds per figure]; runs at the active level (CORRAL_CPU=avx2, say).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "blocks.h"
#include "huge_pages.h"
#include "quant.h"

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

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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
    uint16_t *k, *v;
    size_t n_cells, layer_halves; /* halves of keys, and of values, per layer */
} cache;

static bool cache_init(cache *c, const bench_shape *s, size_t n_cells)
{
    c->n_cells = n_cells; /* a multiple of KV_KEY_TILE */
    c->layer_halves = s->n_head_kv * s->head_dim * n_cells;
    c->k = alloc_huge(s->n_layer * c->layer_halves * 2);
    c->v = alloc_huge(s->n_layer * c->layer_halves * 2);
    if (!c->k || !c->v)
        return false;
    uint32_t state = 42;
    for (size_t i = 0; i < s->n_layer * c->layer_halves; i++) {
        c->k[i] = quant_f32_to_f16(next_random(&state));
        c->v[i] = quant_f32_to_f16(next_random(&state));
    }
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

/* One token's attention over every layer and KV head. */
static void token_pass(const bench_shape *s, const cache *c, scratch *w)
{
    size_t group = s->n_head / s->n_head_kv, dk = s->head_dim, head_halves = dk * c->n_cells;
    attention_shape shape = {group, c->n_cells, dk, dk, 0, 1.0f / sqrtf((float)dk), 0.0f};
    for (size_t il = 0; il < s->n_layer; il++)
        for (size_t kv_head = 0; kv_head < s->n_head_kv; kv_head++) {
            size_t offset = il * c->layer_halves + kv_head * head_halves;
            block_attention(true, &shape, w->q + kv_head * group * dk, (uint8_t *)(c->k + offset),
                            (uint8_t *)(c->v + offset), w->attention,
                            w->out + kv_head * group * dk);
        }
}

static bool bench_at(const bench_shape *s, size_t n_cells, double seconds)
{
    attention_shape shape = {.n_heads = s->n_head / s->n_head_kv,
                             .head_dim_v = s->head_dim};
    cache c = {0};
    scratch w = {
        .q = malloc(s->n_head * s->head_dim * sizeof(float)),
        .out = malloc(s->n_head * s->head_dim * sizeof(float)),
        .attention = malloc(attention_scratch_floats(&shape) * sizeof(float)),
    };
    bool ok = w.q && w.out && w.attention && cache_init(&c, s, n_cells);
    if (ok) {
        uint32_t state = 7;
        for (size_t i = 0; i < s->n_head * s->head_dim; i++)
            w.q[i] = next_random(&state);
        token_pass(s, &c, &w); /* warm-up */
        size_t passes = 0;
        double start = now_seconds(), elapsed;
        do {
            token_pass(s, &c, &w);
            passes++;
            elapsed = now_seconds() - start;
        } while (elapsed < seconds);
        double per_token = elapsed / (double)passes;
        double bytes = (double)(s->n_layer * c.layer_halves * 2 * 2);
        printf("%-5s %6zu %10.3f %8.1f %8.1f\n", s->name, n_cells, per_token * 1e3, bytes / 1e6,
               bytes / per_token / 1e9);
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
    if (!(seconds > 0.0)) {
        fprintf(stderr, "usage: bench_attention [seconds per figure]\n");
        return 2;
    }
    printf("attention of one token, F16 cache, 1 thread, level %s\n",
           cpu_level_name(cpu_active_level()));
    printf("%-5s %6s %10s %8s %8s\n", "shape", "depth", "ms/token", "MB", "GB/s");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++)
            if (!bench_at(&shapes[s], depths[d], seconds)) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
    return 0;
}
