/*
 * Shared by the vision tests (test_vision*.c) for the checks each makes against llama.cpp's
 * references in tests/fixtures/vision: a projector of its kind and a text model that fits it
 * loaded, embeddings against the reference's rows within a test's tolerances (the worst
 * element printed), the prompt's text chunks as the reference tokenized them, the last
 * logits and greedy tokens of that prompt around an image (from the reference's rows and
 * from ours), the same tower in the pair's projector and in ollama's single file, and
 * projector files spoiled one way each with their refusals. Each fails the current cmocka
 * test with a message saying what differs; the tolerances stay with the tests.
 */
#ifndef CORRAL_TESTS_VISION_CHECK_H
#define CORRAL_TESTS_VISION_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "vision_ref_fixture.h"

/* The projector at path, which must be a `projector` one (NULL: any). */
corral_mmproj *vision_load_mmproj(const char *path, const char *projector);

/* The text model at path, which mm's rows must fit. */
corral_model *vision_load_text(const char *path, const corral_mmproj *mm);

/* How far a test's embeddings may be from the reference's; a measure left 0 is not checked
 * (max always is). */
typedef struct vision_tolerance {
    float max;             /* the largest |ours - reference| */
    double mean;           /* the mean |ours - reference| */
    double rms_ratio;      /* RMS(ours - reference) / RMS(reference) */
    float near;            /* with near_percent: at most near_percent % of the values */
    unsigned near_percent; /* further than near from the reference's */
} vision_tolerance;

/* The reference's rows at path, which must be n_tokens x n_embd floats (malloc'd). */
float *vision_read_embd(const char *path, size_t n_tokens, uint32_t n_embd);

/* ours against ref (n_tokens rows of n_embd): the measures tol names printed on one line
 * after what, with the worst element's place and values, and each within tol. */
void vision_check_embd(const char *what, const float *ours, const float *ref, size_t n_tokens,
                       uint32_t n_embd, const vision_tolerance *tol);

/* A prompt's text before and after its image, as ids. */
typedef struct vision_prompt {
    int32_t before[VISION_MAX_IDS], after[VISION_MAX_IDS];
    size_t n_before, n_after;
} vision_prompt;

/* before then mm's image-begin mark (BOS added), and mm's image-end mark then after, through
 * m's vocabulary (special tokens parsed) into p: they must be the ids of ref's text chunks 0
 * and after_chunk. */
void vision_prompt_ids(vision_prompt *p, const corral_model *m, const corral_mmproj *mm,
                       const char *before, const char *after, const char *ref,
                       int after_chunk);

/* The logits of ctx's token at index (n_vocab of them): within tolerance of the numbers in
 * logits_path (the largest difference printed after what), then n_greedy greedy tokens,
 * each decoded in turn, as ref's greedy_ids line. */
void vision_check_logits(corral_context *ctx, size_t index, size_t n_vocab, const char *ref,
                         const char *logits_path, float tolerance, int n_greedy,
                         const char *what);

/* p's text before, embd and p's text after through m in a context of params, then
 * vision_check_logits on the last token. */
void vision_check_text(const corral_model *m, const corral_context_params *params,
                       const vision_prompt *p, const corral_image_embd *embd, const char *ref,
                       const char *logits_path, float tolerance, int n_greedy,
                       const char *what);

/* vision_check_text from the reference's rows (ref_rows, in embd's shape), then from embd,
 * each printed as what, then "from the reference's rows" or "from ours". */
void vision_check_texts(const corral_model *m, const corral_context_params *params,
                        const vision_prompt *p, const corral_image_embd *embd, float *ref_rows,
                        const char *ref, const char *logits_path, float tolerance, int n_greedy,
                        const char *what);

/* The projectors at pair_path and single_path (ollama's file of the same tower) take the
 * same image parameters and encode a fixed nx x ny pattern to the same embeddings, bit for
 * bit. */
void vision_check_same_tower(const char *pair_path, const char *single_path, uint32_t nx,
                             uint32_t ny);

/* A projector file spoiled one way: each field left NULL (or 0) changes nothing. */
typedef struct vision_variant {
    const char *drop_key;                /* a key left out */
    const char *bool_key;                /* a key (re)set to bool_value */
    bool bool_value;
    const char *u32_key;                 /* a key (re)set to u32_value */
    uint32_t u32_value;
    const char *array_key;               /* a key (re)set to the int32 array */
    const int32_t *array;
    size_t n_array;
    const char *rename_from, *rename_to; /* a tensor under another name */
    const char *flatten;                 /* a tensor declared one-dimensional */
    const char *drop_tensor;             /* a tensor left out */
} vision_variant;

/* The GGUF file at src with v's changes, written to dst. */
void vision_write_variant(const char *src, const char *dst, const vision_variant *v);

/* A projector spoiled one way, and what its refusal must name. */
typedef struct vision_refusal {
    vision_variant v;
    const char *message;
} vision_refusal;

/* Each case's variant of the GGUF file at src, written to dst (removed after), is refused
 * (vision_check_refused). */
void vision_check_refusals(const char *src, const char *dst, const vision_refusal *cases,
                           size_t n);

/* The projector at path (case i of a table) is refused, the message (printed) naming
 * message. */
void vision_check_refused(const char *path, const char *message, size_t i);

/* A scratch path for a test's written file: $TMPDIR (or /tmp)/corral-test-TEST-PID[-WHAT].gguf,
 * removed by the caller. */
void vision_temp_path(char *path, size_t size, const char *test, const char *what);

#endif
