/* The names ollama gives projector tensors (ollama_name_fixture.h). */
#include "ollama_name_fixture.h"

#include <stdio.h>
#include <string.h>

/* whole's name for a name it lists (n_whole pairs); else name with each piece of part
 * (n_part pairs) found in it replaced, into buf. */
static const char *renamed(const char *name, const char *const (*whole)[2], size_t n_whole,
                           const char *const (*part)[2], size_t n_part, char *buf, size_t size)
{
    for (size_t i = 0; i < n_whole; i++)
        if (strcmp(name, whole[i][0]) == 0)
            return whole[i][1];
    snprintf(buf, size, "%s", name);
    for (size_t i = 0; i < n_part; i++) {
        const char *at = strstr(name, part[i][0]);
        if (at)
            snprintf(buf, size, "%.*s%s%s", (int)(at - name), name, part[i][1],
                     at + strlen(part[i][0]));
    }
    return buf;
}

const char *ollama_name_fixture_llama4(const char *name, char *buf, size_t size)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.weight", "v.patch_embedding.weight"},
        {"v.class_embd", "v.class_embedding"},
        {"v.position_embd.weight", "v.positional_embedding_vlm"},
        {"v.pre_ln.weight", "v.layernorm_pre.weight"}, {"v.pre_ln.bias", "v.layernorm_pre.bias"},
        {"v.post_ln.weight", "v.layernorm_post.weight"},
        {"v.post_ln.bias", "v.layernorm_post.bias"},
        {"mm.model.mlp.1.weight", "v.vision_adapter.mlp.fc1.weight"},
        {"mm.model.mlp.2.weight", "v.vision_adapter.mlp.fc2.weight"},
        {"mm.model.fc.weight", "mm.linear_1.weight"},
    };
    static const char *const part[][2] = {{".ln1.", ".attn_norm."}, {".ln2.", ".ffn_norm."},
                                          {".attn_out.", ".attn_output."},
                                          {".ffn_up.", ".mlp.fc1."}, {".ffn_down.", ".mlp.fc2."}};
    return renamed(name, whole, sizeof whole / sizeof whole[0], part,
                   sizeof part / sizeof part[0], buf, size);
}

const char *ollama_name_fixture_pixtral(const char *name, char *buf, size_t size)
{
    static const char *const whole[][2] = {
        {"v.patch_embd.weight", "v.patch_conv.weight"},
        {"v.pre_ln.weight", "v.encoder_norm.weight"},
        {"mm.input_norm.weight", "mm.norm.weight"},
        {"mm.patch_merger.weight", "mm.patch_merger.merging_layer.weight"},
        {"mm.1.weight", "mm.linear_1.weight"}, {"mm.1.bias", "mm.linear_1.bias"},
        {"mm.2.weight", "mm.linear_2.weight"}, {"mm.2.bias", "mm.linear_2.bias"},
        {"v.token_embd.img_break", NULL},
    };
    static const char *const part[][2] = {
        {".ln1.", ".attn_norm."}, {".ln2.", ".ffn_norm."}, {".attn_out.", ".attn_output."}};
    return renamed(name, whole, sizeof whole / sizeof whole[0], part,
                   sizeof part / sizeof part[0], buf, size);
}
