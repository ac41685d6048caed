/*
 * Benchmark of image encoding (not a test): a SigLIP-400M-like tower with gemma3's projector,
 * as gemma3's real projector files have it (27 layers, width 1152, 16 heads, FFN 4304, patch
 * 14, 896 x 896 images: 4096 patches pooled into 256 tokens of width 2560), its matrices F16
 * as in those files, random weights built in memory. Encodes a random image at each thread
 * count and prints seconds per image (wall clock, and the CPU time of all its threads).
 * Usage: bench_vision [layers] [threads...]   (default: 27 layers, 1 and 2 threads), or
 * bench_vision mllama [threads...] (below); runs at the active level (CORRAL_CPU=avx2, say).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blocks.h"
#include "mmproj.h"
#include "quant.h"
#include "tensor_type.h"
#include "threadpool.h"

enum {
    IMAGE = 896, PATCH = 14, EMBD = 1152, HEADS = 16, FFN = 4304, TEXT = 2560, MERGE = 4,
    SIDE = IMAGE / PATCH, N_PATCHES = SIDE * SIDE,
};

static double seconds_of(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A uniform value in [-scale, scale). */
static float next_random(uint32_t *state, float scale)
{
    *state = *state * 1664525u + 1013904223u;
    return ((float)(*state >> 8) / (float)(1u << 23) - 1.0f) * scale;
}

/* A random F16 matrix of n_out rows of n_in, scaled as an initialisation would be. */
static weight random_matrix(size_t n_in, size_t n_out, uint32_t *state)
{
    uint16_t *data = malloc(n_in * n_out * sizeof *data);
    if (!data) {
        fprintf(stderr, "bench_vision: out of memory\n");
        exit(1);
    }
    float scale = 1.0f / (float)n_in;
    for (size_t i = 0; i < n_in * n_out; i++)
        data[i] = quant_f32_to_f16(next_random(state, scale * 1.7f));
    return (weight){.data = data, .type = TENSOR_TYPE_F16, .n_in = n_in, .n_out = n_out,
                    .row_bytes = n_in * sizeof *data, .ops = quant_ops_active(TENSOR_TYPE_F16)};
}

static weight random_vector(size_t n, float base, uint32_t *state)
{
    float *data = malloc(n * sizeof *data);
    if (!data) {
        fprintf(stderr, "bench_vision: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        data[i] = base + next_random(state, 0.05f);
    return (weight){.data = data, .type = TENSOR_TYPE_F32, .n_in = n, .n_out = 1,
                    .row_bytes = n * sizeof *data, .ops = quant_ops_active(TENSOR_TYPE_F32)};
}

/* A layer of mllama's tower: its products have no biases but the MLP's. */
static void random_layer(vision_layer *l, size_t E, size_t F, uint32_t *state)
{
    l->ln1 = random_vector(E, 1.0f, state);
    l->ln1_b = random_vector(E, 0.0f, state);
    l->ln2 = random_vector(E, 1.0f, state);
    l->ln2_b = random_vector(E, 0.0f, state);
    l->wq = random_matrix(E, E, state);
    l->wk = random_matrix(E, E, state);
    l->wv = random_matrix(E, E, state);
    l->wo = random_matrix(E, E, state);
    l->up = random_matrix(E, F, state);
    l->up_b = random_vector(F, 0.0f, state);
    l->down = random_matrix(F, E, state);
    l->down_b = random_vector(E, 0.0f, state);
}

/*
 * mllama (Llama 3.2 Vision 11B's tower): 4 tiles of 560 pixels, patch 14, 1601 rows a tile
 * padded to 1608, width 1280, 16 heads, FFN 5120, 32 local + 8 gated global layers, the
 * output and 4 kept states (5 x 1280) through mm.0 to 4096; and the text model's 8
 * cross-attention layers' key and value products (4096 -> 8 KV heads of 128 each) of those
 * rows, here through the tower's product (cross_attn.c runs them through the text model's).
 * One local and one global layer are timed over all 4 x 1608 rows, with the 4th tile a
 * padding tile (a 3-tile picture's mask: its rows see no padding), and the products once
 * each; the image's total is 32 local + 8 global + the products.
 */
enum {
    ML_TILE_ROWS = 1601, ML_PADDED = 1608, ML_TILES = 4, ML_EMBD = 1280, ML_HEADS = 16,
    ML_FFN = 5120, ML_LOCAL = 32, ML_GLOBAL = 8, ML_KEPT = 4, ML_TEXT = 4096, ML_KV = 1024,
    ML_CROSS = 8,
};

static double now_s(double *cpu_s)
{
    *cpu_s = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
    return seconds_of(CLOCK_MONOTONIC);
}

static int bench_mllama(int argc, char **argv)
{
    uint32_t state = 1;
    size_t n = ML_TILES * ML_PADDED, feat = ML_EMBD * (1 + ML_KEPT);
    corral_mmproj mm = {.kind = &projector_mllama};
    mm.hp = (vision_hparams){.image_size = 560, .patch_size = 14, .n_embd = ML_EMBD,
                             .n_ff = ML_FFN, .n_head = ML_HEADS, .n_layer = 1,
                             .n_embd_text = ML_TEXT, .eps = 1e-5f,
                             .norm = VISION_LAYER_NORM, .ffn = VISION_FFN_GELU_ERF};
    mm.patch_embd = random_matrix(3 * 14 * 14, ML_EMBD, &state);
    mm.layers = calloc(1, sizeof *mm.layers);
    vision_layer *global = calloc(1, sizeof *global);
    if (!mm.layers || !global)
        return 1;
    random_layer(mm.layers, ML_EMBD, ML_FFN, &state);
    random_layer(global, ML_EMBD, ML_FFN, &state);
    global->attn_out_gate = random_vector(1, 0.5f, &state);
    global->ffn_out_gate = random_vector(1, 0.5f, &state);
    weight mm0 = random_matrix(feat, ML_TEXT, &state), mm0_b = random_vector(ML_TEXT, 0, &state);
    weight wk = random_matrix(ML_TEXT, ML_KV, &state), wv = random_matrix(ML_TEXT, ML_KV, &state);
    uint8_t *padding = malloc(n);
    float *feats = malloc(n * feat * sizeof *feats);
    float *states = malloc(n * ML_TEXT * sizeof *states);
    float *kv = malloc(n * ML_KV * sizeof *kv);
    if (!padding || !feats || !states || !kv)
        return 1;
    for (size_t r = 0; r < n; r++)
        padding[r] = r / ML_PADDED >= 3 || r % ML_PADDED >= ML_TILE_ROWS;
    for (size_t i = 0; i < n * feat; i++)
        feats[i] = next_random(&state, 1.0f);
    printf("mllama tower (11B): %d tiles x %d rows, width %d, %d heads, FFN %d, %d local + %d "
           "global layers, mm.0 %zu -> %d, %d cross layers' K and V, F16, level %s\n",
           ML_TILES, ML_PADDED, ML_EMBD, ML_HEADS, ML_FFN, ML_LOCAL, ML_GLOBAL, feat, ML_TEXT,
           ML_CROSS, corral_cpu_level());
    int n_runs = argc > 2 ? argc - 2 : 2;
    for (int r = 0; r < n_runs; r++) {
        int threads = argc > 2 ? atoi(argv[2 + r]) : r + 1;
        if (threads < 1 || threads > 256) {
            fprintf(stderr, "usage: bench_vision mllama [threads 1..256...]\n");
            return 2;
        }
        corral_error err;
        threadpool *pool = threadpool_create((size_t)threads, &err);
        vision_run run;
        if (!pool || !vision_run_init(&run, &mm, pool, NULL, n,
                                      quant_act_row_bytes(mm0.type, feat), &err)) {
            fprintf(stderr, "bench_vision: %s\n", err.message);
            return 1;
        }
        for (size_t i = 0; i < n * ML_EMBD; i++)
            run.x[i] = next_random(&state, 1.0f);
        run.padding = padding;
        double c0, c1, c2, c3, c4;
        double t0 = now_s(&c0);
        vision_block(&run, 0);
        double t1 = now_s(&c1);
        vision_block_of(&run, global);
        double t2 = now_s(&c2);
        vision_matmul(pool, &mm0, &mm0_b, feats, n, states, run.act);
        double t3 = now_s(&c3);
        vision_matmul(pool, &wk, NULL, states, n, kv, run.act);
        vision_matmul(pool, &wv, NULL, states, n, kv, run.act);
        double t4 = now_s(&c4);
        double local = t1 - t0, glob = t2 - t1, proj = t3 - t2, cross = (t4 - t3) * ML_CROSS;
        double tower = ML_LOCAL * local + ML_GLOBAL * glob + proj;
        double tower_cpu = ML_LOCAL * (c1 - c0) + ML_GLOBAL * (c2 - c1) + (c3 - c2);
        printf("threads %d: local layer %.2f s, global layer %.2f s, mm.0 %.2f s -> tower "
               "%.1f s per image (%.1f CPU s); cross-attention K and V of 8 layers %.1f s "
               "(%.1f CPU s)\n", threads, local, glob, proj, tower, tower_cpu, cross,
               (c4 - c3) * ML_CROSS);
        vision_run_free(&run);
        threadpool_free(pool);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "mllama") == 0)
        return bench_mllama(argc, argv);
    uint32_t n_layer = argc > 1 ? (uint32_t)atoi(argv[1]) : 27;
    if (n_layer < 1 || n_layer > 64) {
        fprintf(stderr, "usage: bench_vision [layers 1..64] [threads...]\n");
        return 2;
    }
    uint32_t state = 1;
    corral_mmproj mm = {.kind = &projector_gemma3};
    mm.hp = (vision_hparams){.image_size = IMAGE, .patch_size = PATCH, .n_embd = EMBD,
                             .n_ff = FFN, .n_head = HEADS, .n_layer = n_layer,
                             .n_embd_text = TEXT, .eps = 1e-6f, .n_merge = MERGE,
                             .norm = VISION_LAYER_NORM, .ffn = VISION_FFN_GELU};
    mm.patch_embd = random_matrix(3 * PATCH * PATCH, EMBD, &state);
    mm.patch_b = random_vector(EMBD, 0.0f, &state);
    mm.pos_embd = random_matrix(EMBD, N_PATCHES, &state);
    mm.layers = calloc(n_layer, sizeof *mm.layers);
    if (!mm.layers)
        return 1;
    for (uint32_t il = 0; il < n_layer; il++) {
        vision_layer *l = &mm.layers[il];
        l->ln1 = random_vector(EMBD, 1.0f, &state);
        l->ln1_b = random_vector(EMBD, 0.0f, &state);
        l->ln2 = random_vector(EMBD, 1.0f, &state);
        l->ln2_b = random_vector(EMBD, 0.0f, &state);
        l->wq = random_matrix(EMBD, EMBD, &state);
        l->bq = random_vector(EMBD, 0.0f, &state);
        l->wk = random_matrix(EMBD, EMBD, &state);
        l->bk = random_vector(EMBD, 0.0f, &state);
        l->wv = random_matrix(EMBD, EMBD, &state);
        l->bv = random_vector(EMBD, 0.0f, &state);
        l->wo = random_matrix(EMBD, EMBD, &state);
        l->bo = random_vector(EMBD, 0.0f, &state);
        l->up = random_matrix(EMBD, FFN, &state);
        l->up_b = random_vector(FFN, 0.0f, &state);
        l->down = random_matrix(FFN, EMBD, &state);
        l->down_b = random_vector(EMBD, 0.0f, &state);
    }
    mm.post_ln = random_vector(EMBD, 1.0f, &state);
    mm.post_ln_b = random_vector(EMBD, 0.0f, &state);
    mm.soft_emb_norm = random_vector(EMBD, 1.0f, &state);
    /* the projection as the loader leaves it: F32 rows of EMBD */
    float *proj = malloc((size_t)TEXT * EMBD * sizeof *proj);
    float *pixels = malloc((size_t)IMAGE * IMAGE * 3 * sizeof *pixels);
    if (!proj || !pixels)
        return 1;
    for (size_t i = 0; i < (size_t)TEXT * EMBD; i++)
        proj[i] = next_random(&state, 0.05f);
    mm.input_proj = (weight){.data = proj, .type = TENSOR_TYPE_F32, .n_in = EMBD, .n_out = TEXT,
                             .row_bytes = EMBD * sizeof(float),
                             .ops = quant_ops_active(TENSOR_TYPE_F32)};
    for (size_t i = 0; i < (size_t)IMAGE * IMAGE * 3; i++)
        pixels[i] = next_random(&state, 1.0f);
    block_geglu_prepare();

    printf("SigLIP-like tower: %u layers, width %d, %d heads, FFN %d, %d x %d image, "
           "%d patches -> %d tokens, F16 matrices, level %s\n",
           n_layer, EMBD, HEADS, FFN, IMAGE, IMAGE, N_PATCHES,
           (SIDE / MERGE) * (SIDE / MERGE), corral_cpu_level());
    int default_threads[] = {1, 2};
    int n_runs = argc > 2 ? argc - 2 : 2;
    for (int r = 0; r < n_runs; r++) {
        int threads = argc > 2 ? atoi(argv[2 + r]) : default_threads[r];
        corral_image_embd out;
        corral_error err;
        double t0 = seconds_of(CLOCK_MONOTONIC), c0 = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
        if (!corral_mmproj_encode(&mm, pixels, IMAGE, IMAGE, threads, &out, &err)) {
            fprintf(stderr, "bench_vision: %s\n", err.message);
            return 1;
        }
        double seconds = seconds_of(CLOCK_MONOTONIC) - t0;
        double cpu = seconds_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
        /* CPU time too: on a shared machine the wall clock says more about the neighbours */
        printf("threads %d: %.2f s per image (%.3f s per layer), %.2f CPU s, %zu tokens\n",
               threads, seconds, seconds / n_layer, cpu, out.n_tokens);
        corral_image_embd_free(&out);
    }
    return 0;
}
