/*
 * peer_mtmd: a vision reference from llama.cpp's multimodal library (tools/mtmd), for a text
 * GGUF, its projector GGUF and one image. Like peer.c, it is not part of Corral's build: it
 * links llama.cpp's libraries, and is only run to make a fixture's reference.
 *
 *   peer_mtmd TEXT.gguf MMPROJ.gguf IMAGE PROMPT [-n N] [--fa on|off]
 *             [--dump-embd FILE] [--dump-logits FILE]
 *
 * PROMPT carries the marker <__media__> where the image goes; it is tokenized with the
 * vocabulary's special tokens on and parsed. Settings are the fixtures': one thread, F32 KV
 * cache, flash attention off in the text model and (unless --fa on) in the vision encoder,
 * every chunk evaluated as llama.cpp's helper does, then N (16) greedy steps of one token.
 *
 * Writes to stdout: the chunks mtmd made (text ids; an image's token count and position
 * count), embd_stats over every image's embedding, n_past_after_prompt, last_logits (every
 * logit of the prompt's last position), greedy_ids, greedy_gaps and, as a comment, the
 * smallest gap between the top two logits. --dump-embd writes the image embeddings
 * (float32 LE, rows of n_embd, images in prompt order); --dump-logits the last logits, one
 * per line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

static int argmax(const float *v, int n, float *gap)
{
    int best = 0, second = -1;
    for (int i = 1; i < n; i++) {
        if (v[i] > v[best]) {
            second = best;
            best = i;
        } else if (second < 0 || v[i] > v[second]) {
            second = i;
        }
    }
    *gap = second < 0 ? INFINITY : v[best] - v[second];
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: peer_mtmd TEXT.gguf MMPROJ.gguf IMAGE PROMPT [-n N] [--fa on|off] "
                        "[--dump-embd FILE] [--dump-logits FILE]\n");
        return 2;
    }
    const char *text_path = argv[1], *mmproj_path = argv[2], *image_path = argv[3];
    const char *prompt = argv[4], *embd_path = NULL, *logits_path = NULL;
    int n_predict = 16;
    bool vision_fa = false;
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n_predict = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fa") && i + 1 < argc) vision_fa = !strcmp(argv[++i], "on");
        else if (!strcmp(argv[i], "--dump-embd") && i + 1 < argc) embd_path = argv[++i];
        else if (!strcmp(argv[i], "--dump-logits") && i + 1 < argc) logits_path = argv[++i];
        else {
            fprintf(stderr, "peer_mtmd: unknown argument %s\n", argv[i]);
            return 2;
        }
    }

    llama_log_set(quiet_log, NULL);
    mtmd_helper_log_set(quiet_log, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(text_path, mp);
    if (!model) {
        fprintf(stderr, "peer_mtmd: cannot load %s\n", text_path);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4096;
    cp.n_batch = 4096;
    cp.n_ubatch = 4096;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *lctx = llama_init_from_model(model, cp);
    if (!lctx) {
        fprintf(stderr, "peer_mtmd: cannot make a context\n");
        return 1;
    }

    struct mtmd_context_params mcp = mtmd_context_params_default();
    mcp.use_gpu = false;
    mcp.print_timings = false;
    mcp.n_threads = 1;
    mcp.warmup = false;
    mcp.flash_attn_type = vision_fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    mtmd_context *mctx = mtmd_init_from_file(mmproj_path, model, mcp);
    if (!mctx) {
        fprintf(stderr, "peer_mtmd: cannot load %s\n", mmproj_path);
        return 1;
    }
    struct mtmd_helper_bitmap_wrapper bw = mtmd_helper_bitmap_init_from_file(mctx, image_path, false);
    if (!bw.bitmap) {
        fprintf(stderr, "peer_mtmd: cannot read %s\n", image_path);
        return 1;
    }
    printf("image_decoded %u %u\n", mtmd_bitmap_get_nx(bw.bitmap), mtmd_bitmap_get_ny(bw.bitmap));

    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    struct mtmd_input_text text = { prompt, strlen(prompt), true, true };
    const mtmd_bitmap *bitmaps[1] = { bw.bitmap };
    if (mtmd_tokenize(mctx, chunks, &text, bitmaps, 1) != 0) {
        fprintf(stderr, "peer_mtmd: mtmd_tokenize failed\n");
        return 1;
    }

    const int n_embd = llama_model_n_embd_inp(model);
    FILE *embd_out = embd_path ? fopen(embd_path, "wb") : NULL;
    double e_sum = 0, e_sq = 0, e_abs = 0, e_min = INFINITY, e_max = -INFINITY;
    size_t e_n = 0;
    printf("prompt_json \"%s\"\n", prompt);
    for (size_t c = 0; c < mtmd_input_chunks_size(chunks); c++) {
        const mtmd_input_chunk *chunk = mtmd_input_chunks_get(chunks, c);
        if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token *ids = mtmd_input_chunk_get_tokens_text(chunk, &n);
            printf("chunk %zu text %zu:", c, n);
            for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
            printf("\n");
            continue;
        }
        size_t n_tok = mtmd_input_chunk_get_n_tokens(chunk);
        printf("chunk %zu image n_tokens %zu n_pos %d\n", c, n_tok,
               (int)mtmd_input_chunk_get_n_pos(chunk));
        if (mtmd_encode_chunk(mctx, chunk) != 0) {
            fprintf(stderr, "peer_mtmd: encode failed\n");
            return 1;
        }
        const float *embd = mtmd_get_output_embd(mctx);
        for (size_t i = 0; i < n_tok * (size_t)n_embd; i++) {
            double v = embd[i];
            e_sum += v, e_sq += v * v, e_abs += fabs(v), e_n++;
            if (v < e_min) e_min = v;
            if (v > e_max) e_max = v;
        }
        printf("embd_row0_head");
        for (int i = 0; i < 8 && i < n_embd; i++) printf(" %.9g", embd[i]);
        printf("\n");
        if (embd_out) fwrite(embd, sizeof(float), n_tok * (size_t)n_embd, embd_out);
    }
    if (embd_out) fclose(embd_out);
    if (e_n) {
        double mean = e_sum / e_n;
        printf("embd_stats n %zu n_embd %d min %.9g max %.9g mean %.9g std %.9g absmean %.9g sum %.9g\n",
               e_n, n_embd, e_min, e_max, mean, sqrt(e_sq / e_n - mean * mean), e_abs / e_n, e_sum);
    }

    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, (int32_t)cp.n_batch, true, &n_past) != 0) {
        fprintf(stderr, "peer_mtmd: evaluating the prompt failed\n");
        return 1;
    }
    printf("n_past_after_prompt %d\n", (int)n_past);

    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const float *logits = llama_get_logits_ith(lctx, -1);
    printf("last_logits");
    for (int i = 0; i < n_vocab; i++) printf(" %.9g", logits[i]);
    printf("\n");
    if (logits_path) {
        FILE *f = fopen(logits_path, "w");
        if (!f) return 1;
        for (int i = 0; i < n_vocab; i++) fprintf(f, "%.9g\n", logits[i]);
        fclose(f);
    }

    int *ids = calloc((size_t)n_predict + 1, sizeof(int));
    float *gaps = calloc((size_t)n_predict + 1, sizeof(float));
    float min_gap = INFINITY;
    for (int s = 0; s < n_predict; s++) {
        const float *l = llama_get_logits_ith(lctx, -1);
        ids[s] = argmax(l, n_vocab, &gaps[s]);
        if (gaps[s] < min_gap) min_gap = gaps[s];
        llama_token tok = ids[s];
        struct llama_batch b = llama_batch_get_one(&tok, 1);
        /* M-RoPE models need every position channel: the helper's batch does that for the
         * prompt; one text token at n_past has the same value in each. */
        if (mtmd_decode_use_mrope(mctx)) {
            static llama_pos pos[4];
            for (int k = 0; k < 4; k++) pos[k] = n_past;
            b.pos = pos;
        } else {
            static llama_pos pos1;
            pos1 = n_past;
            b.pos = &pos1;
        }
        if (llama_decode(lctx, b) != 0) {
            fprintf(stderr, "peer_mtmd: decode failed\n");
            return 1;
        }
        n_past++;
    }
    printf("greedy_ids");
    for (int s = 0; s < n_predict; s++) printf(" %d", ids[s]);
    printf("\ngreedy_gaps");
    for (int s = 0; s < n_predict; s++) printf(" %.6g", gaps[s]);
    printf("\n# greedy_min_top2_gap %.6g\n", min_gap);

    free(ids);
    free(gaps);
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(bw.bitmap);
    mtmd_free(mctx);
    llama_free(lctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
