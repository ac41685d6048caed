/*
 * A runner's memory for the scheduler (memory_estimate.h): the engine's plan of the weights
 * (corral_model_file_memory) plus the KV cache, and the runner's cache of encoded images
 * (corral_mmproj_image_bytes) and clips (corral_audio_tower_clip_bytes). The scheduler
 * compares it with MemAvailable, which counts reclaimable page cache as free: so a model's
 * mapped weights count only as far as a token reads them, and its copies (repacks, converted
 * layouts) count whole.
 */
#include "server/sched/memory_estimate.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "audio/mel.h"
#include "runner/prompt_images.h"

static uint64_t meta_u64(const corral_model_file *f, const char *arch, const char *suffix,
                         uint64_t fallback)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    long i = corral_model_file_find_meta(f, key);
    if (i < 0 || corral_model_file_meta_type(f, (size_t)i) == CORRAL_META_ARRAY)
        return fallback;
    return corral_model_file_meta_uint(f, (size_t)i, 0);
}

/* Element il of a per-layer array key (an array of n_layer), else the scalar (or fallback). */
static uint64_t meta_layer_u64(const corral_model_file *f, const char *arch, const char *suffix,
                               uint64_t il, uint64_t n_layer, uint64_t fallback)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    long i = corral_model_file_find_meta(f, key);
    if (i >= 0 && corral_model_file_meta_type(f, (size_t)i) == CORRAL_META_ARRAY) {
        if (corral_model_file_meta_count(f, (size_t)i) != n_layer)
            return fallback;
        return corral_model_file_meta_elem_type(f, (size_t)i) == CORRAL_META_BOOL
                   ? corral_model_file_meta_bool(f, (size_t)i, il)
                   : corral_model_file_meta_uint(f, (size_t)i, il);
    }
    return meta_u64(f, arch, suffix, fallback);
}

/* Whether `<arch>.attention.cross_attention_layers` (mllama's) lists layer il: such a layer
 * attends to an image's states, not to earlier tokens, and keeps no cache. */
static bool cross_attention_layer(const corral_model_file *f, const char *arch, uint64_t il)
{
    char key[256];
    snprintf(key, sizeof key, "%s.attention.cross_attention_layers", arch);
    long i = corral_model_file_find_meta(f, key);
    if (i < 0 || corral_model_file_meta_type(f, (size_t)i) != CORRAL_META_ARRAY)
        return false;
    corral_meta_type elem = corral_model_file_meta_elem_type(f, (size_t)i);
    if (elem != CORRAL_META_INT && elem != CORRAL_META_UINT)
        return false;
    for (uint64_t j = 0; j < corral_model_file_meta_count(f, (size_t)i); j++)
        if (corral_model_file_meta_uint(f, (size_t)i, j) == il)
            return true;
    return false;
}

/*
 * The KV cache for num_ctx x n_parallel tokens: per layer and token, kv_heads rows of
 * key_length components (K) and as many of value_length (V), stored as the runner will store
 * them (F16 where a quantized type needs multiples of 32 the model lacks). The head count may
 * be per layer, sliding layers (sliding_window_pattern) may have heads of key_length_swa /
 * value_length_swa, the last shared_kv_layers layers keep no cache of their own (gemma4) and
 * cross-attention layers none at all (mllama), which hold an image's keys and values instead;
 * plus a recurrent model's states and their two checkpoints. UINT64_MAX: past 64 bits (the counts come from the file's
 * metadata).
 */
/* A sequence's recurrent states are held three times: as they are, as the runner's checkpoint
 * of them near the last prompt's end, and as its step checkpoint before each speculative
 * draft's batch (corral_seq_checkpoint), which the runners take by default (PROMPT_LOOKUP). */
#define STATE_COPIES 3u

static uint64_t kv_cache_bytes(const corral_model_file *f, uint32_t num_ctx, uint32_t n_parallel,
                               corral_kv_type kv_type)
{
    long a = corral_model_file_find_meta(f, "general.architecture");
    size_t len = 0;
    const char *arch_text = a >= 0 && corral_model_file_meta_type(f, (size_t)a) == CORRAL_META_STRING
                                ? corral_model_file_meta_string(f, (size_t)a, 0, &len) : "";
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(len < 63 ? len : 63), arch_text);
    uint64_t layers = meta_u64(f, arch, "block_count", 0);
    /* the multi-token prediction layers a converter appends after the trunk (qwen35, glm4moe)
     * are not loaded */
    uint64_t predict = meta_u64(f, arch, "nextn_predict_layers", 0);
    layers = predict < layers ? layers - predict : 0;
    uint64_t embd = meta_u64(f, arch, "embedding_length", 0);
    uint64_t heads = meta_u64(f, arch, "attention.head_count", 1);
    uint64_t key_dim = meta_u64(f, arch, "attention.key_length", heads ? embd / heads : 0);
    uint64_t value_dim = meta_u64(f, arch, "attention.value_length", key_dim);
    /* qwen35 and qwen3next: only every full_attention_interval-th layer caches keys and
     * values; the others keep a state per sequence in F32, the conv's last (conv_kernel - 1)
     * inputs of its 2 * key + value channels and a state_size^2 matrix per value head
     * (delta_net.c) */
    uint64_t v_heads = meta_u64(f, arch, "ssm.time_step_rank", 0), state = 0;
    char key[256];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    long per_layer = corral_model_file_find_meta(f, key);
    /* nemotron_h: a layer with neither KV heads nor an FFN width in feed_forward_length's
     * array is a Mamba2 layer; an FFN layer (no KV heads either) keeps nothing */
    snprintf(key, sizeof key, "%s.feed_forward_length", arch);
    long ffn = corral_model_file_find_meta(f, key);
    bool ffn_per_layer =
        ffn >= 0 && corral_model_file_meta_type(f, (size_t)ffn) == CORRAL_META_ARRAY;
    uint64_t mamba2_layers = 0;
    if (per_layer >= 0 && corral_model_file_meta_type(f, (size_t)per_layer) == CORRAL_META_ARRAY)
        for (uint64_t j = 0; j < corral_model_file_meta_count(f, (size_t)per_layer); j++)
            mamba2_layers += corral_model_file_meta_uint(f, (size_t)per_layer, j) == 0 &&
                             (!ffn_per_layer ||
                              j >= corral_model_file_meta_count(f, (size_t)ffn) ||
                              corral_model_file_meta_uint(f, (size_t)ffn, j) == 0);
    uint64_t short_taps = meta_u64(f, arch, "shortconv.l_cache", 0);
    if (mamba2_layers > 0 && short_taps > 0) {
        /* lfm2: its 0 entries are short-convolution layers, which keep per sequence in F32
         * the conv's last (l_cache - 1) inputs of embedding_length channels (arch_lfm2.c) */
        if (corral_model_file_meta_count(f, (size_t)per_layer) != layers || short_taps > 64 ||
            embd > (1ull << 24))
            return UINT64_MAX; /* the engine refuses such a file anyway */
        state = (short_taps - 1) * embd * sizeof(float);
        if (__builtin_mul_overflow(state, mamba2_layers, &state) ||
            __builtin_mul_overflow(state, (uint64_t)n_parallel * STATE_COPIES, &state))
            return UINT64_MAX;
    } else if (mamba2_layers > 0) {
        /* granitehybrid: a count per layer, 0 for a Mamba2 layer (skipped below), which keeps
         * per sequence in F32 the conv's last (conv_kernel - 1) inputs of inner + 2 * groups *
         * state_size channels and an inner x state_size scan state (mamba2.c) */
        uint64_t taps = meta_u64(f, arch, "ssm.conv_kernel", 1);
        uint64_t columns = meta_u64(f, arch, "ssm.state_size", 0);
        uint64_t groups = meta_u64(f, arch, "ssm.group_count", 0);
        uint64_t inner = meta_u64(f, arch, "ssm.inner_size", 0);
        if (corral_model_file_meta_count(f, (size_t)per_layer) != layers || columns > 4096 ||
            groups > 4096 || inner > (1ull << 24) || taps == 0 || taps > 64)
            return UINT64_MAX; /* the engine refuses such a file anyway */
        state = ((taps - 1) * (inner + 2 * groups * columns) + inner * columns) * sizeof(float);
        if (__builtin_mul_overflow(state, mamba2_layers, &state) ||
            __builtin_mul_overflow(state, (uint64_t)n_parallel * STATE_COPIES, &state))
            return UINT64_MAX;
    } else if (v_heads > 0 &&
               (strncmp(arch, "qwen35", 6) == 0 || strcmp(arch, "qwen3next") == 0)) {
        uint64_t interval = meta_u64(f, arch, "full_attention_interval", 4);
        uint64_t taps = meta_u64(f, arch, "ssm.conv_kernel", 1);
        uint64_t head = meta_u64(f, arch, "ssm.state_size", 0);
        uint64_t k_heads = meta_u64(f, arch, "ssm.group_count", 0);
        uint64_t attention = interval ? layers / interval : 0;
        uint64_t channels = (2 * k_heads + v_heads) * head;
        if (head > 4096 || v_heads > 4096 || k_heads > 4096 || taps == 0 || taps > 64)
            return UINT64_MAX; /* the engine refuses such a file anyway */
        state = ((taps - 1) * channels + v_heads * head * head) * sizeof(float);
        if (__builtin_mul_overflow(state, layers - attention, &state) ||
            __builtin_mul_overflow(state, (uint64_t)n_parallel * STATE_COPIES, &state))
            return UINT64_MAX;
        layers = attention;
    }
    uint64_t key_swa = meta_u64(f, arch, "attention.key_length_swa", key_dim);
    uint64_t value_swa = meta_u64(f, arch, "attention.value_length_swa", value_dim);
    uint64_t shared = meta_u64(f, arch, "attention.shared_kv_layers", 0);
    bool quantized = kv_type == CORRAL_KV_Q8_0 || kv_type == CORRAL_KV_Q4_0;
    if (quantized && (key_dim % 32 != 0 || value_dim % 32 != 0 || key_swa % 32 != 0 ||
                      value_swa % 32 != 0))
        kv_type = CORRAL_KV_F16;
    /* mllama: per sequence, an image's keys and values in every cross-attention layer, F32,
     * for the most rows its tower makes (max_num_tiles tiles of (image / patch)^2 + 1) */
    uint64_t tiles = meta_u64(f, arch, "vision.max_num_tiles", 0);
    uint64_t side = meta_u64(f, arch, "vision.image_size", 0);
    uint64_t patch = meta_u64(f, arch, "vision.patch_size", 0);
    uint64_t per_side = patch ? side / patch : 0;
    uint64_t n_cross = 0;
    for (uint64_t il = 0; il < layers; il++)
        n_cross += cross_attention_layer(f, arch, il);
    if (n_cross && tiles && per_side) {
        uint64_t kv_heads = meta_u64(f, arch, "attention.head_count_kv", heads), image;
        if (tiles > 64 || per_side > 4096 || kv_heads > 4096 || key_dim > 65536 ||
            value_dim > 65536)
            return UINT64_MAX; /* the engine refuses such a file anyway */
        image = tiles * (per_side * per_side + 1) * kv_heads * (key_dim + value_dim) *
                sizeof(float) * n_cross;
        if (__builtin_mul_overflow(image, (uint64_t)n_parallel, &image) ||
            __builtin_add_overflow(state, image, &state))
            return UINT64_MAX;
    }
    uint64_t total = 0; /* per position */
    for (uint64_t il = 0; il < layers && il + shared < layers; il++) {
        uint64_t kv_heads =
            meta_layer_u64(f, arch, "attention.head_count_kv", il, layers, heads);
        if (kv_heads == 0 || cross_attention_layer(f, arch, il))
            continue; /* a Mamba2 layer (its state is counted above), an FFN layer or a
                       * cross-attention layer */
        bool sliding = meta_layer_u64(f, arch, "attention.sliding_window_pattern", il, layers, 0);
        uint64_t layer = corral_kv_type_bytes(kv_type, sliding ? key_swa : key_dim) +
                         corral_kv_type_bytes(kv_type, sliding ? value_swa : value_dim);
        if (__builtin_mul_overflow(layer, kv_heads, &layer) ||
            __builtin_add_overflow(total, layer, &total))
            return UINT64_MAX;
    }
    if (__builtin_mul_overflow(total, (uint64_t)num_ctx, &total) ||
        __builtin_mul_overflow(total, (uint64_t)n_parallel, &total) ||
        __builtin_add_overflow(total, state, &total))
        return UINT64_MAX;
    return total;
}

uint64_t memory_estimate_model_bytes(const char *path, uint32_t num_ctx, uint32_t n_parallel,
                                     corral_kv_type kv_type)
{
    corral_model_file *f = corral_model_file_open(path, NULL);
    if (!f) {
        struct stat st;
        return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    corral_model_memory weights;
    corral_model_file_memory(f, &weights);
    uint64_t total = kv_cache_bytes(f, num_ctx, n_parallel, kv_type);
    corral_model_file_close(f);
    if (total == UINT64_MAX || __builtin_add_overflow(total, weights.copied_bytes, &total) ||
        __builtin_add_overflow(total, weights.token_bytes, &total))
        return UINT64_MAX;
    return total;
}

/* The last files' counts, by the file's identity: the scheduler estimates a runner for every
 * request, and loading a projector binds its tower (some kinds convert a matrix, tens of MB
 * for a large one). A file changed or replaced has another inode, size or time. A model file
 * that carries its own vision tower has two counts, its images' and its clips'; a text
 * model file has its clips' (0). */
#define REMEMBERED_COUNTS 16

typedef struct remembered_count {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool clips; /* the count of the file's clips, not its images' */
    uint64_t bytes;
    bool used;
} remembered_count;

static remembered_count remembered[REMEMBERED_COUNTS];
static size_t remembered_next;
static pthread_mutex_t remembered_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_count(const remembered_count *r, const struct stat *st, bool clips)
{
    return r->used && r->clips == clips && r->dev == st->st_dev && r->ino == st->st_ino &&
           r->size == st->st_size && r->mtime.tv_sec == st->st_mtim.tv_sec &&
           r->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static uint64_t times_cached(uint64_t one)
{
    uint64_t total;
    return __builtin_mul_overflow(one, (uint64_t)PROMPT_CACHED_IMAGES, &total) ? UINT64_MAX
                                                                               : total;
}

static uint64_t image_cache_bytes_of_file(const char *projector_path)
{
    corral_mmproj *mm = corral_mmproj_load(projector_path, NULL);
    if (!mm)
        return 0;
    uint64_t one = corral_mmproj_image_bytes(mm);
    corral_mmproj_free(mm);
    return times_cached(one);
}

/* A tower that does not load takes no clips in the runner: its count is 0 (the runner says
 * why). */
static uint64_t clip_cache_bytes_of_file(const char *model_path)
{
    corral_error err;
    bool absent;
    corral_audio_tower *tower = corral_audio_tower_load(model_path, &absent, &err);
    if (!tower)
        return 0;
    /* the cache's room is this many 30-second clips: a longer clip takes several's room */
    uint64_t one = corral_audio_tower_clip_bytes(tower,
                                                 audio_mel_frames(AUDIO_MEL_SEGMENT_SAMPLES));
    corral_audio_tower_free(tower);
    return times_cached(one);
}

static uint64_t cache_bytes(const char *path, bool clips)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    pthread_mutex_lock(&remembered_lock);
    for (size_t i = 0; i < REMEMBERED_COUNTS; i++)
        if (same_count(&remembered[i], &st, clips)) {
            uint64_t bytes = remembered[i].bytes;
            pthread_mutex_unlock(&remembered_lock);
            return bytes;
        }
    pthread_mutex_unlock(&remembered_lock);
    uint64_t bytes = clips ? clip_cache_bytes_of_file(path) : image_cache_bytes_of_file(path);
    pthread_mutex_lock(&remembered_lock);
    remembered[remembered_next] = (remembered_count){.dev = st.st_dev, .ino = st.st_ino,
                                                     .size = st.st_size, .mtime = st.st_mtim,
                                                     .clips = clips, .bytes = bytes,
                                                     .used = true};
    remembered_next = (remembered_next + 1) % REMEMBERED_COUNTS;
    pthread_mutex_unlock(&remembered_lock);
    return bytes;
}

uint64_t memory_estimate_image_cache_bytes(const char *projector_path)
{
    return cache_bytes(projector_path, false);
}

uint64_t memory_estimate_clip_cache_bytes(const char *model_path)
{
    return cache_bytes(model_path, true);
}
