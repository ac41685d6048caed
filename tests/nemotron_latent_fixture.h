/*
 * Shared by the tests of Nemotron 3 Super's latent experts (test_forward, test_memory_estimate):
 * arch/nemotron-h-moe.gguf with its routed experts replaced by latent ones, as llama.cpp's
 * converter or ollama's writes them, or by the same experts folded to full width. The routed
 * experts are linear around their ReLU², so a latent layer with down projection A, up
 * projection B and experts U_e, D_e computes what a full-width one with experts U_e . A and
 * B . D_e does: the two files must give the same logits.
 */
#ifndef CORRAL_TESTS_NEMOTRON_LATENT_FIXTURE_H
#define CORRAL_TESTS_NEMOTRON_LATENT_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

enum nemotron_latent_layout {
    /* llama.cpp's: blk.N.ffn_latent_down / ffn_latent_up and moe_latent_size */
    NEMOTRON_LATENT_LLAMA_CPP,
    /* ollama's: blk.N.ffn_latent_in / ffn_latent_out, no key, and a multi-token prediction
     * tensor (mtp.*) that nothing loads */
    NEMOTRON_LATENT_OLLAMA,
    /* no latent: the experts folded to full width */
    NEMOTRON_LATENT_FOLDED,
};

/* What to write; the fields after layout make hostile files, 0 or false where not wanted. */
typedef struct nemotron_latent_spec {
    enum nemotron_latent_layout layout;
    uint32_t latent;      /* the down projections' width, which the experts take and give */
    uint32_t key;         /* llama.cpp's layout: moe_latent_size if not 0, else latent */
    uint32_t up_width;    /* the width the up projections take, if not 0 */
    uint32_t last_width;  /* the last expert layer's latent (projections and experts), if not 0 */
    bool without_up;      /* the up projections left out */
} nemotron_latent_spec;

/* The file spec describes, made from src (the path of arch/nemotron-h-moe.gguf) and written
 * to dst; the same A, B, U_e and D_e (pseudo-random, the same every run) for every layout.
 * Fails the current cmocka test on an error. */
void nemotron_latent_fixture_write(const char *src, const char *dst,
                                   const nemotron_latent_spec *spec);

#endif
