/* arch/nemotron-h-moe.gguf with latent experts, or folded ones (nemotron_latent_fixture.h). */
#include "nemotron_latent_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf.h"
#include "gguf_write_fixture.h"

enum { MAX_LAYERS = 16 };

/* The matrices of a latent expert layer: the down projection A [latent][n_embd], the up
 * projection B [n_embd][latent], each expert's up U_e [n_ff][latent] and down D_e
 * [latent][n_ff], rows after rows as the file holds them. */
enum matrix_kind { LATENT_DOWN, LATENT_UP, EXPERT_UP, EXPERT_DOWN };

/* The source's sizes, and which of its layers have experts. */
typedef struct fixture_dims {
    size_t n_embd, n_ff, n_expert;
    bool experts[MAX_LAYERS];
    uint32_t last; /* the last layer with experts */
} fixture_dims;

/* Element i of layer il's matrix of a kind with rows of n_in: uniform with variance 1 / n_in
 * (products keep their input's scale), rounded to F32; the same every run. */
static double element(uint32_t il, enum matrix_kind kind, size_t i, size_t n_in)
{
    uint64_t z = ((uint64_t)il << 56) ^ ((uint64_t)kind << 48) ^ (uint64_t)i;
    z += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
    double scale = kind == EXPERT_DOWN ? 0.5 : 1.0; /* the source's down matrices' */
    return (float)((2.0 * u - 1.0) * sqrt(3.0 / (double)n_in) * scale);
}

/* Layer il's latent: the last expert layer's may differ. */
static size_t layer_latent(const nemotron_latent_spec *spec, const fixture_dims *d, uint32_t il)
{
    return spec->last_width && il == d->last ? spec->last_width : spec->latent;
}

/* One tensor written in place of the source's or added: its shape and its F32 values. */
typedef struct made_tensor {
    char name[GGUF_MAX_NAME_BYTES + 1];
    int64_t ne[4];
    uint32_t n_dims;
    float *data;
    size_t n;
} made_tensor;

static void make_shape(made_tensor *t, uint32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2)
{
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->n = (size_t)(ne0 * ne1 * ne2);
    t->data = malloc(t->n * sizeof(float));
    assert_non_null(t->data);
}

/* Layer il's tensor of a kind as the spec's layout writes it. */
static void make_tensor(const nemotron_latent_spec *spec, const fixture_dims *d, uint32_t il,
                        enum matrix_kind kind, made_tensor *t)
{
    size_t E = d->n_embd, F = d->n_ff, n = d->n_expert, L = layer_latent(spec, d, il);
    size_t L_up = spec->up_width ? spec->up_width : L;
    bool ollama = spec->layout == NEMOTRON_LATENT_OLLAMA;
    bool folded = spec->layout == NEMOTRON_LATENT_FOLDED;
    static const char *const names[2][4] = {
        {"ffn_latent_down", "ffn_latent_up", "ffn_up_exps", "ffn_down_exps"},
        {"ffn_latent_in", "ffn_latent_out", "ffn_up_exps", "ffn_down_exps"}};
    snprintf(t->name, sizeof t->name, "blk.%u.%s.weight", il, names[ollama][kind]);
    switch (kind) {
    case LATENT_DOWN:
        make_shape(t, 2, (int64_t)E, (int64_t)L, 1);
        for (size_t i = 0; i < t->n; i++)
            t->data[i] = (float)element(il, LATENT_DOWN, i, E);
        break;
    case LATENT_UP:
        make_shape(t, 2, (int64_t)L_up, (int64_t)E, 1);
        for (size_t i = 0; i < t->n; i++)
            t->data[i] = (float)element(il, LATENT_UP, i, L_up);
        break;
    case EXPERT_UP: /* folded: U_e . A */
        make_shape(t, 3, (int64_t)(folded ? E : L), (int64_t)F, (int64_t)n);
        for (size_t e = 0; e < n; e++)
            for (size_t f = 0; f < F; f++) {
                size_t row = e * F + f;
                for (size_t c = 0; !folded && c < L; c++)
                    t->data[row * L + c] = (float)element(il, EXPERT_UP, row * L + c, L);
                for (size_t i = 0; folded && i < E; i++) {
                    double sum = 0.0;
                    for (size_t l = 0; l < L; l++)
                        sum += element(il, EXPERT_UP, row * L + l, L) *
                               element(il, LATENT_DOWN, l * E + i, E);
                    t->data[row * E + i] = (float)sum;
                }
            }
        break;
    case EXPERT_DOWN: /* folded: B . D_e */
        make_shape(t, 3, (int64_t)F, (int64_t)(folded ? E : L), (int64_t)n);
        for (size_t e = 0; e < n; e++) {
            for (size_t i = 0; !folded && i < L * F; i++)
                t->data[e * L * F + i] = (float)element(il, EXPERT_DOWN, e * L * F + i, F);
            for (size_t i = 0; folded && i < E; i++)
                for (size_t f = 0; f < F; f++) {
                    double sum = 0.0;
                    for (size_t l = 0; l < L; l++)
                        sum += element(il, LATENT_UP, i * L + l, L) *
                               element(il, EXPERT_DOWN, (e * L + l) * F + f, F);
                    t->data[(e * E + i) * F + f] = (float)sum;
                }
        }
        break;
    }
}

/* Declared in pass 0, its values written in pass 1. */
static bool write_made(gguf_writer *w, int pass, const made_tensor *t, corral_error *err)
{
    return pass == 0 ? gguf_writer_add_tensor(w, t->name, 0 /* F32 */, t->n_dims, t->ne, err)
                     : gguf_writer_write_tensor(w, t->data, t->n * sizeof(float), err);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The layer number of a blk.N.* name (MAX_LAYERS for another name). */
static uint32_t layer_of(const char *name)
{
    unsigned il;
    return sscanf(name, "blk.%u.", &il) == 1 && il < MAX_LAYERS ? il : MAX_LAYERS;
}

static fixture_dims read_dims(const gguf_file *in)
{
    fixture_dims d = {0};
    for (size_t i = 0; i < gguf_n_tensors(in); i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        if (!ends_with(t->name, ".ffn_up_exps.weight"))
            continue;
        uint32_t il = layer_of(t->name);
        assert_true(il < MAX_LAYERS);
        d.experts[il] = true;
        d.last = il > d.last ? il : d.last;
        d.n_embd = (size_t)t->ne[0];
        d.n_ff = (size_t)t->ne[1];
        d.n_expert = (size_t)t->ne[2];
    }
    assert_true(d.n_embd > 0);
    return d;
}

void nemotron_latent_fixture_write(const char *src, const char *dst,
                                   const nemotron_latent_spec *spec)
{
    bool folded = spec->layout == NEMOTRON_LATENT_FOLDED;
    assert_true(spec->latent > 0);
    assert_true(!folded || (!spec->up_width && !spec->last_width && !spec->without_up));
    corral_error err;
    gguf_file *in = gguf_open(src, &err);
    gguf_writer *w = gguf_writer_create();
    if (!in || !w)
        fail_msg("%s", in ? "out of memory" : err.message);
    fixture_dims d = read_dims(in);
    bool ok = true;
    for (size_t k = 0; ok && k < gguf_n_kv(in); k++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, k), &err);
    if (spec->layout == NEMOTRON_LATENT_LLAMA_CPP)
        ok = ok && gguf_writer_add_u32(w, "nemotron_h_moe.moe_latent_size",
                                       spec->key ? spec->key : spec->latent, &err);
    made_tensor mtp = {.name = "mtp.layers.0.mixer.experts.0.up_proj.weight"};
    make_shape(&mtp, 2, (int64_t)d.n_embd, (int64_t)d.n_ff, 1);
    memset(mtp.data, 0, mtp.n * sizeof(float));
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t k = 0; ok && k < gguf_n_tensors(in); k++) {
            const gguf_tensor *t = gguf_tensor_at(in, k);
            bool up = ends_with(t->name, ".ffn_up_exps.weight");
            if (!up && !ends_with(t->name, ".ffn_down_exps.weight")) {
                ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
                continue;
            }
            made_tensor made;
            make_tensor(spec, &d, layer_of(t->name), up ? EXPERT_UP : EXPERT_DOWN, &made);
            ok = write_made(w, pass, &made, &err);
            free(made.data);
        }
        for (uint32_t il = 0; ok && !folded && il < MAX_LAYERS; il++) {
            for (int kind = LATENT_DOWN; ok && d.experts[il] && kind <= LATENT_UP; kind++) {
                if (kind == LATENT_UP && spec->without_up)
                    continue;
                made_tensor made;
                make_tensor(spec, &d, il, (enum matrix_kind)kind, &made);
                ok = write_made(w, pass, &made, &err);
                free(made.data);
            }
        }
        if (spec->layout == NEMOTRON_LATENT_OLLAMA)
            ok = ok && write_made(w, pass, &mtp, &err);
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    free(mtp.data);
    gguf_close(in);
}
