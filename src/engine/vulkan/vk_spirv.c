/* Reading a shader's storage buffers' sets, bindings and access from its SPIR-V (vk_spirv.h). */
#include "vk_spirv.h"

#include <stdlib.h>
#include <string.h>

/* The SPIR-V specification's numbers this reads. */
enum {
    SPIRV_MAGIC = 0x07230203,
    SPIRV_HEADER_WORDS = 5,
    OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32,
    OP_VARIABLE = 59,
    OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72,
    DECORATION_NON_WRITABLE = 24,
    DECORATION_BINDING = 33,
    DECORATION_DESCRIPTOR_SET = 34,
    STORAGE_UNIFORM = 2, /* a buffer block in the older form */
    STORAGE_BUFFER = 12,
};

/* Ids a module may have: far more than any shader here declares. */
enum { MAX_IDS = 1 << 20 };

/* What the module says of an id. */
typedef struct spirv_id {
    uint32_t binding;       /* + 1; 0: none */
    uint32_t set;           /* a variable's descriptor set (0 where undecorated) */
    uint32_t pointee;       /* a pointer type's */
    uint32_t members;       /* a struct's */
    uint32_t readonly_members;
    bool readonly;          /* a variable decorated NonWritable */
} spirv_id;

static uint32_t word(const unsigned char *code, size_t i)
{
    uint32_t w;
    memcpy(&w, code + 4 * i, sizeof w);
    return w;
}

bool vk_spirv_read_buffers(const unsigned char *code, size_t size, vk_spirv_buffers *out)
{
    *out = (vk_spirv_buffers){0};
    size_t n = size / 4;
    if (size % 4 || n < SPIRV_HEADER_WORDS || word(code, 0) != SPIRV_MAGIC)
        return false;
    uint32_t bound = word(code, 3);
    if (bound == 0 || bound > MAX_IDS)
        return false;
    spirv_id *ids = calloc(bound, sizeof *ids);
    if (!ids)
        return false;
    /* two passes: the decorations come before the types and variables they name, and
     * whether a variable is read-only needs its type's decorations */
    bool ok = true;
    for (int pass = 0; pass < 2 && ok; pass++) {
        for (size_t i = SPIRV_HEADER_WORDS; i < n;) {
            uint32_t head = word(code, i), count = head >> 16, op = head & 0xffff;
            if (count == 0 || count > n - i) {
                ok = false;
                break;
            }
            uint32_t a = count > 1 ? word(code, i + 1) : 0, b = count > 2 ? word(code, i + 2) : 0;
            uint32_t c = count > 3 ? word(code, i + 3) : 0;
            bool in_range = a < bound;
            if (pass == 0 && op == OP_DECORATE && count >= 3 && in_range) {
                if (b == DECORATION_NON_WRITABLE)
                    ids[a].readonly = true;
                else if (b == DECORATION_BINDING && count >= 4)
                    ids[a].binding = c + 1;
                else if (b == DECORATION_DESCRIPTOR_SET && count >= 4)
                    ids[a].set = c;
            } else if (pass == 0 && op == OP_MEMBER_DECORATE && count >= 4 && in_range &&
                       c == DECORATION_NON_WRITABLE) {
                ids[a].readonly_members++;
            } else if (pass == 0 && op == OP_TYPE_STRUCT && count >= 2 && in_range) {
                ids[a].members = count - 2;
            } else if (pass == 0 && op == OP_TYPE_POINTER && count >= 4 && in_range) {
                ids[a].pointee = c;
            } else if (pass == 1 && op == OP_VARIABLE && count >= 4 && b < bound &&
                       (c == STORAGE_BUFFER || c == STORAGE_UNIFORM)) {
                const spirv_id *var = &ids[b], *type = &ids[a];
                if (a >= bound || type->pointee >= bound) {
                    ok = false;
                    break;
                }
                const spirv_id *block = &ids[type->pointee];
                bool readonly = var->readonly ||
                                (block->members > 0 && block->readonly_members >= block->members);
                if (var->set >= 32) {
                    ok = false;
                    break;
                }
                out->sets |= 1u << var->set;
                if (var->set == 0 && var->binding > 0 && var->binding <= 32 && !readonly)
                    out->written |= 1u << (var->binding - 1);
            }
            i += count;
        }
    }
    free(ids);
    return ok;
}
