/*
 * peer: the reference side of the architecture fixtures. It runs a GGUF through llama.cpp's
 * library (never through Corral) and writes what the .ref.txt files in tests/fixtures/arch hold: the
 * prompt's token ids, the logits at every prompt position, and 16 greedy steps with the logits
 * each was chosen from. Settings match the fixtures': F32 KV cache, flash attention off,
 * one thread, one batch for the prompt, then one token per decode.
 *
 * It is a developer tool, built by hand against a llama.cpp checkout (see README.md here);
 * Corral's build never links llama.cpp.
 *
 *   peer tokenize MODEL TEXT          token ids, one line, special tokens as the vocab says
 *   peer ref MODEL NAME TEXT [N_CTX]  the reference text on stdout; the context holds
 *                                     N_CTX cells (default: the prompt + 32), which llama.cpp
 *                                     rounds up to a multiple of 256
 *   peer embed MODEL NAME TEXT        an embedding model's reference: the prompt's ids and
 *                                     its vector pooled as the model says (after the dense
 *                                     projections a model has), raw and L2-normalised
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define GREEDY_STEPS 16
#define MAX_PROMPT 256

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static struct llama_model *load(const char *path)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model)
        fprintf(stderr, "peer: cannot load %s\n", path);
    return model;
}

static int tokenize(const struct llama_model *model, const char *text, llama_token *ids, int cap)
{
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n = llama_tokenize(vocab, text, (int32_t)strlen(text), ids, cap, true, true);
    if (n < 0)
        fprintf(stderr, "peer: the prompt needs %d tokens, more than %d\n", -n, cap);
    return n;
}

static void print_row(const float *row, int n)
{
    for (int i = 0; i < n; i++)
        printf("%s%.9g", i ? " " : "", row[i]);
    printf("\n");
}

/* The first index of the largest logit, and the gap to the second largest. */
static int argmax_gap(const float *row, int n, float *gap)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    float second = -FLT_MAX;
    for (int i = 0; i < n; i++)
        if (i != best && row[i] > second)
            second = row[i];
    *gap = row[best] - second;
    return best;
}

static struct llama_context *context(struct llama_model *model, int n_ctx)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    return llama_init_from_model(model, cp);
}

/* Decodes ids[0..n) as one batch at positions from pos, with logits for every token when all. */
static int decode(struct llama_context *ctx, const llama_token *ids, int n, int pos, int all)
{
    struct llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = pos + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = all || i == n - 1;
    }
    batch.n_tokens = n;
    int rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    if (rc != 0)
        fprintf(stderr, "peer: llama_decode returned %d\n", rc);
    return rc;
}

static int reference(const char *path, const char *name, const char *text, int n_ctx_asked)
{
    struct llama_model *model = load(path);
    if (!model)
        return 1;
    llama_token ids[MAX_PROMPT];
    int n = tokenize(model, text, ids, MAX_PROMPT);
    if (n <= 0)
        return 1;
    int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int n_ctx = n_ctx_asked > 0 ? n_ctx_asked : n + GREEDY_STEPS + 16;
    char arch[64] = "";
    llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);

    float *all = malloc(sizeof(float) * (size_t)n * (size_t)vocab);
    float *steps = malloc(sizeof(float) * GREEDY_STEPS * (size_t)vocab);
    if (!all || !steps)
        return 1;

    /* The whole prompt in one batch with every position's logits. */
    struct llama_context *ctx = context(model, n_ctx);
    if (!ctx || decode(ctx, ids, n, 0, 1) != 0)
        return 1;
    unsigned seq_ctx = llama_n_ctx_seq(ctx);
    for (int i = 0; i < n; i++)
        memcpy(all + (size_t)i * vocab, llama_get_logits_ith(ctx, i), sizeof(float) * vocab);
    llama_free(ctx);

    /* A fresh context: the prompt with only its last logits, then one token per decode. */
    ctx = context(model, n_ctx);
    if (!ctx || decode(ctx, ids, n, 0, 0) != 0)
        return 1;
    int greedy[GREEDY_STEPS];
    float min_gap = FLT_MAX;
    for (int s = 0; s < GREEDY_STEPS; s++) {
        const float *row = llama_get_logits_ith(ctx, -1);
        memcpy(steps + (size_t)s * vocab, row, sizeof(float) * vocab);
        float gap;
        greedy[s] = argmax_gap(row, vocab, &gap);
        if (gap < min_gap)
            min_gap = gap;
        if (s + 1 < GREEDY_STEPS && decode(ctx, &greedy[s], 1, n + s, 0) != 0)
            return 1;
    }
    llama_free(ctx);

    printf("# archref v1 %s: arch %s, model %s\n", name, arch, name);
    printf("# llama.cpp through tools/archref/peer.c: F32 KV cache, flash attention off, "
           "1 thread, n_ubatch 512\n");
    if (n_ctx_asked > 0) /* what picks context-dependent parts such as LongRoPE's factors */
        printf("# n_ctx %d (llama.cpp's per sequence: %u)\n", n_ctx_asked, seq_ctx);
    printf("# input_text: \"%s\"\n", text);
    printf("arch %s\nmodel %s.gguf\n", arch, name);
    printf("input_ids %d", n);
    for (int i = 0; i < n; i++)
        printf(" %d", ids[i]);
    printf("\n# greedy_min_top2_gap %g\ngreedy_ids %d", min_gap, GREEDY_STEPS);
    for (int s = 0; s < GREEDY_STEPS; s++)
        printf(" %d", greedy[s]);
    printf("\nlast_logits %d ", vocab);
    print_row(steps, vocab);
    printf("all_logits %d %d\n", n, vocab);
    for (int i = 0; i < n; i++)
        print_row(all + (size_t)i * vocab, vocab);
    printf("greedy_step_logits %d %d\n", GREEDY_STEPS, vocab);
    for (int s = 0; s < GREEDY_STEPS; s++)
        print_row(steps + (size_t)s * vocab, vocab);
    free(all);
    free(steps);
    llama_model_free(model);
    return 0;
}

static const char *pooling_name(enum llama_pooling_type type)
{
    switch (type) {
    case LLAMA_POOLING_TYPE_NONE: return "none";
    case LLAMA_POOLING_TYPE_MEAN: return "mean";
    case LLAMA_POOLING_TYPE_CLS: return "cls";
    case LLAMA_POOLING_TYPE_LAST: return "last";
    default: return "other";
    }
}

/* The prompt in one batch through an embedding context, its pooled vector printed raw and,
 * as llama-embedding does by default, divided by its L2 norm. */
static int embedding_reference(const char *path, const char *name, const char *text)
{
    struct llama_model *model = load(path);
    if (!model)
        return 1;
    llama_token ids[MAX_PROMPT];
    int n = tokenize(model, text, ids, MAX_PROMPT);
    if (n <= 0)
        return 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.embeddings = true;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx || decode(ctx, ids, n, 0, 1) != 0)
        return 1;
    const float *pooled = llama_get_embeddings_seq(ctx, 0);
    int n_embd = llama_model_n_embd_out(model);
    if (!pooled) {
        fprintf(stderr, "peer: no pooled embedding (pooling type none?)\n");
        return 1;
    }
    double norm = 0.0;
    for (int i = 0; i < n_embd; i++)
        norm += (double)pooled[i] * pooled[i];
    char arch[64] = "";
    llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
    printf("# archref v1 %s: arch %s, model %s\n", name, arch, name);
    printf("# llama.cpp through tools/archref/peer.c embed: embeddings on, flash attention off, "
           "1 thread, the prompt in one batch\n");
    printf("# input_text: \"%s\"\n", text);
    printf("arch %s\nmodel %s.gguf\n", arch, name);
    printf("input_ids %d", n);
    for (int i = 0; i < n; i++)
        printf(" %d", ids[i]);
    printf("\npooling %s\nembedding %d ", pooling_name(llama_pooling_type(ctx)), n_embd);
    for (int i = 0; i < n_embd; i++)
        printf("%s%.9g", i ? " " : "", (float)(pooled[i] / sqrt(norm)));
    printf("\nembedding_raw %d ", n_embd);
    print_row(pooled, n_embd);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

static int tokenize_command(const char *path, const char *text)
{
    struct llama_model *model = load(path);
    if (!model)
        return 1;
    llama_token ids[4096];
    int n = tokenize(model, text, ids, 4096);
    if (n < 0)
        return 1;
    for (int i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    llama_model_free(model);
    return 0;
}

int main(int argc, char **argv)
{
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    int rc = 2;
    if (argc == 4 && strcmp(argv[1], "tokenize") == 0)
        rc = tokenize_command(argv[2], argv[3]);
    else if ((argc == 5 || argc == 6) && strcmp(argv[1], "ref") == 0)
        rc = reference(argv[2], argv[3], argv[4], argc == 6 ? atoi(argv[5]) : 0);
    else if (argc == 5 && strcmp(argv[1], "embed") == 0)
        rc = embedding_reference(argv[2], argv[3], argv[4]);
    else
        fprintf(stderr, "usage: peer tokenize MODEL TEXT | peer ref MODEL NAME TEXT [N_CTX] | "
                        "peer embed MODEL NAME TEXT\n");
    llama_backend_free();
    return rc;
}
