/*
 * PEFT LoRA adapter to GGUF (see hf_adapter.h): adapter_config.json's scaling read and
 * checked, the lora_A/lora_B pairs gathered under their base tensors' GGUF names, and each
 * written as F32, B's rows permuted where the base's Llama Q/K rows are.
 */
#include "convert/hf_adapter.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert/hf_family.h"
#include "convert/safetensors.h"
#include "gguf.h"
#include "quant_half.h"
#include "tensor_type.h"

#define CONFIG_MAX_BYTES ((uint64_t)1 << 20)
#define PEFT_PREFIX "base_model.model."
#define LORA_A_SUFFIX ".lora_A.weight"
#define LORA_B_SUFFIX ".lora_B.weight"

/* One adapted matrix: its GGUF name and PEFT's two factors. */
typedef struct adapter_pair {
    char name[GGUF_MAX_NAME_BYTES + 1];
    const safetensors_tensor *a, *b;
    uint32_t permute_heads; /* > 0: B's rows in Llama's Q/K order, with this many heads */
} adapter_pair;

/* What the conversion needs of the base model. */
typedef struct base_model {
    char arch_name[64];
    hf_params p; /* arch, n_layer, n_head, n_head_kv: enough for names and permutation */
} base_model;

typedef struct adapter {
    corral_error *err;
    base_model base;
    float alpha;
    safetensors_file *weights;
    adapter_pair *pairs;
    size_t n_pairs;
} adapter;

bool hf_is_adapter_file(const char *name)
{
    return strcmp(name, HF_ADAPTER_CONFIG) == 0 || strcmp(name, HF_ADAPTER_WEIGHTS) == 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const hf_file *find_file(const hf_file *files, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(files[i].name, name) == 0)
            return &files[i];
    return NULL;
}


/* The base architectures whose adapters are converted: those whose projections keep their
 * checkpoint names and shapes in GGUF (others split, fuse or reorder matrices that an
 * adapter's A and B would have to follow). */
#define ADAPTER_BASES "llama, qwen2, qwen3, qwen3moe, gemma, gemma2, gemma3, phi3"

static bool adapter_base_converted(const char *gguf_name)
{
    static const char *const bases[] = {"llama", "qwen2", "qwen3", "qwen3moe",
                                        "gemma", "gemma2", "gemma3", "phi3"};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        if (strcmp(bases[i], gguf_name) == 0)
            return true;
    return false;
}
static hf_status read_base(adapter *ad, const char *path)
{
    corral_error why = {{0}};
    gguf_file *f = gguf_open(path, &why);
    if (!f) {
        corral_error_set(ad->err, "the base model: %s", why.message);
        return HF_INVALID;
    }
    gguf_str arch = {"", 0};
    hf_params *p = &ad->base.p;
    bool ok = gguf_get_str(f, "general.architecture", &arch, &why) &&
              arch.size < sizeof ad->base.arch_name;
    if (ok) {
        memcpy(ad->base.arch_name, arch.data, arch.size);
        ad->base.arch_name[arch.size] = '\0';
        p->arch = hf_family_by_gguf_name(ad->base.arch_name);
    }
    hf_status status = HF_INVALID;
    if (!ok) {
        corral_error_set(ad->err, "the base model has no architecture: %s", why.message);
    } else if (p->arch && p->arch->family == FAMILY_QWEN35) {
        /* the model's linear attention matrices are split and their value heads reordered on
         * the way to GGUF; an adapter's B would have to follow, which this converter does not */
        corral_error_set(ad->err, "Corral does not convert adapters for %s models (Qwen 3.5, "
                         "Qwen3-Next): their linear attention's matrices change shape in GGUF",
                         ad->base.arch_name);
    } else if (!p->arch || !adapter_base_converted(ad->base.arch_name)) {
        corral_error_set(ad->err, "Corral converts adapters for models of architectures %s, "
                         "not '%s'", ADAPTER_BASES, ad->base.arch_name);
    } else {
        char key[96];
        snprintf(key, sizeof key, "%s.block_count", ad->base.arch_name);
        ok = gguf_get_u32(f, key, &p->n_layer, &why);
        snprintf(key, sizeof key, "%s.attention.head_count", ad->base.arch_name);
        ok = ok && gguf_get_u32(f, key, &p->n_head, &why);
        p->n_head_kv = p->n_head;
        snprintf(key, sizeof key, "%s.attention.head_count_kv", ad->base.arch_name);
        ok = ok && gguf_get_u32_opt(f, key, &p->n_head_kv, &why);
        snprintf(key, sizeof key, "%s.expert_count", ad->base.arch_name);
        ok = ok && gguf_get_u32_opt(f, key, &p->n_expert, &why);
        if (ok && p->n_head && p->n_head_kv)
            status = HF_OK;
        else
            corral_error_set(ad->err, "the base model: %s", ok ? "no attention heads"
                                                               : why.message);
    }
    gguf_close(f);
    return status;
}

/* adapter_config.json: lora_alpha, and no scaling a GGUF adapter cannot express. */
static hf_status read_config(adapter *ad, const hf_file *file)
{
    struct stat st;
    if (stat(file->path, &st) != 0) {
        corral_error_set(ad->err, HF_ADAPTER_CONFIG ": %s", strerror(errno));
        return HF_IO;
    }
    if ((uint64_t)st.st_size > CONFIG_MAX_BYTES) {
        corral_error_set(ad->err, HF_ADAPTER_CONFIG " is larger than %llu bytes",
                         (unsigned long long)CONFIG_MAX_BYTES);
        return HF_INVALID;
    }
    json_error_t jerr;
    json_t *config = json_load_file(file->path, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(config)) {
        corral_error_set(ad->err, HF_ADAPTER_CONFIG " is not a JSON object%s%.200s",
                         config ? "" : ": ", config ? "" : jerr.text);
        json_decref(config);
        return HF_INVALID;
    }
    const json_t *type = json_object_get(config, "peft_type");
    const json_t *alpha = json_object_get(config, "lora_alpha");
    const json_t *alphas = json_object_get(config, "alpha_pattern");
    double a = json_number_value(alpha);
    const char *refusal = NULL;
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "LORA") != 0))
        refusal = "peft_type is not \"LORA\": only LoRA adapters convert";
    else if (!json_is_number(alpha) || !(a > 0) || a > 3.4e38)
        refusal = "lora_alpha must be a positive number";
    else if (json_is_true(json_object_get(config, "use_dora")))
        refusal = "use_dora: DoRA adapters do not convert to GGUF LoRA adapters";
    else if (json_is_true(json_object_get(config, "use_rslora")))
        refusal = "use_rslora: a GGUF adapter scales by alpha / rank, not rsLoRA's "
                  "alpha / sqrt(rank)";
    else if (json_object_size(alphas) > 0)
        refusal = "alpha_pattern: a GGUF adapter has one alpha for every matrix";
    if (refusal)
        corral_error_set(ad->err, HF_ADAPTER_CONFIG ": %s", refusal);
    ad->alpha = (float)a;
    json_decref(config);
    return refusal ? HF_INVALID : HF_OK;
}

/* Whether a GGUF name is a base matrix adapters change: attention, feed-forward, output. */
static bool adaptable(const base_model *base, const char *name)
{
    if (strcmp(name, "output.weight") == 0)
        return true;
    return strncmp(name, "blk.", 4) == 0 && !ends_with(name, "_norm.weight") &&
           !ends_with(name, ".ffn_gate_inp.weight") && hf_family_known_tensor(&base->p, name);
}

static adapter_pair *pair_named(adapter *ad, const char *name)
{
    for (size_t i = 0; i < ad->n_pairs; i++)
        if (strcmp(ad->pairs[i].name, name) == 0)
            return &ad->pairs[i];
    adapter_pair *p = &ad->pairs[ad->n_pairs++];
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

/* One tensor of adapter_model.safetensors into its pair. */
static hf_status add_tensor(adapter *ad, const safetensors_tensor *t)
{
    const char *name = t->name;
    bool is_a = ends_with(name, LORA_A_SUFFIX), is_b = ends_with(name, LORA_B_SUFFIX);
    if (!is_a && !is_b) {
        corral_error_set(ad->err, "tensor '%.200s' is not a LoRA matrix (*%s or *%s): only "
                         "LoRA's factors convert", name, LORA_A_SUFFIX, LORA_B_SUFFIX);
        return HF_INVALID;
    }
    if (strncmp(name, PEFT_PREFIX, strlen(PEFT_PREFIX)) == 0)
        name += strlen(PEFT_PREFIX);
    /* an adapter of a multimodal model's language model names the text model's tensors */
    char hf_name[SAFETENSORS_MAX_NAME_BYTES + 16];
    size_t stem = strlen(name) - strlen(LORA_A_SUFFIX);
    if (strncmp(name, "model.language_model.", 21) == 0)
        snprintf(hf_name, sizeof hf_name, "model.%.*s.weight", (int)(stem - 21), name + 21);
    else
        snprintf(hf_name, sizeof hf_name, "%.*s.weight", (int)stem, name);
    char gguf_name[GGUF_MAX_NAME_BYTES + 1];
    hf_family_rename(ad->base.p.arch, hf_name, gguf_name, sizeof gguf_name);
    if (!adaptable(&ad->base, gguf_name)) {
        corral_error_set(ad->err, "tensor '%.200s' adapts '%.200s', which is not an attention, "
                         "feed-forward or output matrix of a %s model with %u layers", t->name,
                         hf_name, ad->base.arch_name, ad->base.p.n_layer);
        return HF_INVALID;
    }
    if (t->n_dims != 2 || t->shape[0] == 0 || t->shape[1] == 0 || t->dtype == SAFETENSORS_U8 ||
        t->dtype == SAFETENSORS_I64) {
        corral_error_set(ad->err, "tensor '%.200s' is not a matrix of numbers", t->name);
        return HF_INVALID;
    }
    adapter_pair *p = pair_named(ad, gguf_name);
    const safetensors_tensor **slot = is_a ? &p->a : &p->b;
    if (*slot) {
        corral_error_set(ad->err, "tensor '%.200s' is in the adapter twice", t->name);
        return HF_INVALID;
    }
    *slot = t;
    return HF_OK;
}

/* Every pair whole, its rank shared, Llama's Q/K rows splitting into heads. */
static hf_status check_pairs(adapter *ad)
{
    if (ad->n_pairs == 0) {
        corral_error_set(ad->err, HF_ADAPTER_WEIGHTS " has no LoRA matrices");
        return HF_INVALID;
    }
    for (size_t i = 0; i < ad->n_pairs; i++) {
        adapter_pair *p = &ad->pairs[i];
        if (!p->a || !p->b) {
            corral_error_set(ad->err, "the adapter of '%s' has no lora_%s", p->name,
                             p->a ? "B" : "A");
            return HF_INVALID;
        }
        if (p->a->shape[0] != p->b->shape[1]) {
            corral_error_set(ad->err, "the adapter of '%s': lora_A [%llu, %llu] and lora_B "
                             "[%llu, %llu] differ in rank", p->name,
                             (unsigned long long)p->a->shape[0],
                             (unsigned long long)p->a->shape[1],
                             (unsigned long long)p->b->shape[0],
                             (unsigned long long)p->b->shape[1]);
            return HF_INVALID;
        }
        bool q = ends_with(p->name, ".attn_q.weight"), k = ends_with(p->name, ".attn_k.weight");
        if (ad->base.p.arch->family != FAMILY_LLAMA || (!q && !k))
            continue;
        uint32_t heads = q ? ad->base.p.n_head : ad->base.p.n_head_kv;
        uint64_t rows = p->b->shape[0];
        if (rows % heads || (rows / heads) % 2) {
            corral_error_set(ad->err, "the adapter of '%s': %llu rows do not split into %u "
                             "heads of an even size", p->name, (unsigned long long)rows, heads);
            return HF_INVALID;
        }
        p->permute_heads = heads;
    }
    return HF_OK;
}

static float element_f32(const safetensors_tensor *t, uint64_t i)
{
    uint16_t h;
    float f;
    switch (t->dtype) {
    case SAFETENSORS_F32: memcpy(&f, t->data + 4 * i, 4); return f;
    case SAFETENSORS_F16: memcpy(&h, t->data + 2 * i, 2); return quant_f16_to_f32(h);
    case SAFETENSORS_BF16: memcpy(&h, t->data + 2 * i, 2); return quant_bf16_to_f32(h);
    case SAFETENSORS_U8: /* refused when read */
    case SAFETENSORS_I64: break;
    }
    return 0;
}

/*
 * A matrix as F32 rows into out. Hugging Face keeps each head's rotated halves apart; GGUF's
 * llama pairs them up, so output row 2i+s of a head is its source row s*D/2 + i.
 */
static void matrix_f32(const safetensors_tensor *t, uint32_t permute_heads, float *out)
{
    uint64_t rows = t->shape[0], cols = t->shape[1];
    uint64_t d = permute_heads ? rows / permute_heads : 0;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t src = r;
        if (permute_heads) {
            uint64_t head = r / d, j = r % d;
            src = head * d + (j % 2) * (d / 2) + j / 2;
        }
        for (uint64_t c = 0; c < cols; c++)
            out[r * cols + c] = element_f32(t, src * cols + c);
    }
}

static hf_status write_adapter(adapter *ad, const char *out_path)
{
    corral_error *err = ad->err;
    gguf_writer *w = gguf_writer_create();
    const char *arch = ad->base.arch_name;
    bool ok = w && gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), err) &&
              gguf_writer_add_str(w, "general.type", "adapter", 7, err) &&
              gguf_writer_add_u32(w, "general.file_type", 0, err) && /* all F32 */
              gguf_writer_add_str(w, "adapter.type", "lora", 4, err) &&
              gguf_writer_add_f32(w, "adapter.lora.alpha", ad->alpha, err);
    uint64_t largest = 0;
    for (size_t i = 0; ok && i < ad->n_pairs; i++) {
        const adapter_pair *p = &ad->pairs[i];
        char name[GGUF_MAX_NAME_BYTES + 8];
        int64_t ne_a[2] = {(int64_t)p->a->shape[1], (int64_t)p->a->shape[0]};
        int64_t ne_b[2] = {(int64_t)p->b->shape[1], (int64_t)p->b->shape[0]};
        snprintf(name, sizeof name, "%s.lora_a", p->name);
        ok = gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne_a, err);
        snprintf(name, sizeof name, "%s.lora_b", p->name);
        ok = ok && gguf_writer_add_tensor(w, name, TENSOR_TYPE_F32, 2, ne_b, err);
        largest = p->a->n_elems > largest ? p->a->n_elems : largest;
        largest = p->b->n_elems > largest ? p->b->n_elems : largest;
    }
    if (!w || !ok) {
        if (!w)
            corral_error_set(err, "out of memory");
        gguf_writer_free(w);
        return w ? HF_INVALID : HF_IO;
    }
    /* each element came from at least 2 bytes of the mapped file: the product fits */
    float *buf = malloc((size_t)largest * sizeof *buf);
    ok = buf && gguf_writer_begin(w, out_path, err);
    if (!buf)
        corral_error_set(err, "out of memory");
    for (size_t i = 0; ok && i < ad->n_pairs; i++) {
        const adapter_pair *p = &ad->pairs[i];
        matrix_f32(p->a, 0, buf);
        ok = gguf_writer_write_tensor(w, buf, (size_t)p->a->n_elems * sizeof *buf, err);
        matrix_f32(p->b, p->permute_heads, buf);
        ok = ok && gguf_writer_write_tensor(w, buf, (size_t)p->b->n_elems * sizeof *buf, err);
    }
    ok = ok && gguf_writer_finish(w, err);
    free(buf);
    gguf_writer_free(w); /* an unfinished output's temporary file goes with it */
    return ok ? HF_OK : HF_IO;
}

hf_status hf_adapter_convert(const hf_file *files, size_t n, const char *base_gguf_path,
                             const char *out_path, corral_error *err)
{
    adapter ad = {.err = err};
    const hf_file *config = find_file(files, n, HF_ADAPTER_CONFIG);
    const hf_file *weights = find_file(files, n, HF_ADAPTER_WEIGHTS);
    if (!config || !weights) {
        corral_error_set(err, "a LoRA adapter in safetensors needs " HF_ADAPTER_CONFIG " and "
                         HF_ADAPTER_WEIGHTS " (PEFT's files); %s is missing",
                         config ? HF_ADAPTER_WEIGHTS : HF_ADAPTER_CONFIG);
        return HF_INVALID;
    }
    hf_status status = read_config(&ad, config);
    if (status == HF_OK)
        status = read_base(&ad, base_gguf_path);
    if (status == HF_OK) {
        corral_error why = {{0}};
        if (!(ad.weights = safetensors_open(weights->path, &why))) {
            const char *msg = why.message; /* the reader names the path; say the file's name */
            size_t len = strlen(weights->path);
            corral_error_set(err, HF_ADAPTER_WEIGHTS "%.400s",
                             strncmp(msg, weights->path, len) == 0 ? msg + len : msg);
            status = HF_INVALID;
        }
    }
    size_t count = ad.weights ? safetensors_count(ad.weights) : 0;
    if (status == HF_OK && !(ad.pairs = calloc(count ? count : 1, sizeof *ad.pairs))) {
        corral_error_set(err, "out of memory");
        status = HF_IO;
    }
    for (size_t i = 0; status == HF_OK && i < count; i++)
        status = add_tensor(&ad, safetensors_at(ad.weights, i));
    if (status == HF_OK)
        status = check_pairs(&ad);
    if (status == HF_OK)
        status = write_adapter(&ad, out_path);
    free(ad.pairs);
    safetensors_close(ad.weights);
    return status;
}
