/* Recorded forward passes kept by graph shape (vk_graphs.h). */
#include "vk_graphs.h"

void vk_graphs_init(vk_graphs *gs, vk_commands *c)
{
    *gs = (vk_graphs){.c = c};
}

static bool same_key(const vk_graph_key *a, const vk_graph_key *b)
{
    return a->n_tokens == b->n_tokens && a->n_logits == b->n_logits;
}

VkCommandBuffer vk_graphs_find(vk_graphs *gs, const vk_graph_key *key)
{
    for (uint32_t i = 0; i < VK_GRAPHS; i++) {
        vk_graph *g = &gs->graphs[i];
        if (g->ready && same_key(&g->key, key)) {
            g->used = ++gs->clock;
            gs->last = g;
            return g->cmd;
        }
    }
    return VK_NULL_HANDLE;
}

void vk_graphs_forget(vk_graphs *gs)
{
    for (uint32_t i = 0; i < VK_GRAPHS; i++)
        gs->graphs[i].ready = false;
}

/* A graph to record into: one never used, else the least recently used. */
static vk_graph *victim(vk_graphs *gs)
{
    vk_graph *best = &gs->graphs[0];
    for (uint32_t i = 0; i < VK_GRAPHS; i++) {
        vk_graph *g = &gs->graphs[i];
        if (!g->cmd)
            return g;
        if (g->used < best->used)
            best = g;
    }
    return best;
}

bool vk_graphs_begin(vk_graphs *gs, const vk_graph_key *key, corral_error *err)
{
    vk_commands *c = gs->c;
    vk_graph *g = victim(gs);
    if (!g->cmd) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = c->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        if (vk.vkAllocateCommandBuffers(c->dev->device, &ai, &g->cmd) != VK_SUCCESS) {
            g->cmd = VK_NULL_HANDLE;
            corral_error_set(err, "cannot allocate a Vulkan command buffer");
            return false;
        }
    }
    /* not ready until it ends: a failed recording leaves no graph behind under any key */
    g->ready = false;
    g->key = *key;
    g->used = ++gs->clock;
    /* no ONE_TIME_SUBMIT: the graph is submitted again; the pool's buffers reset on begin */
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (vk.vkBeginCommandBuffer(g->cmd, &bi) != VK_SUCCESS) {
        corral_error_set(err, "cannot begin a Vulkan command buffer");
        return false;
    }
    gs->own = c->cmd;
    gs->own_rec = c->rec;
    c->cmd = g->cmd;
    c->rec = (vk_recording){0};
    gs->recording = g;
    return true;
}

bool vk_graphs_end(vk_graphs *gs, VkCommandBuffer *out, corral_error *err)
{
    vk_commands *c = gs->c;
    vk_graph *g = gs->recording;
    bool ended = vk_commands_end(c, err);
    g->dispatches = c->rec.dispatches;
    g->barriers = c->rec.barriers;
    c->cmd = gs->own;
    c->rec = gs->own_rec;
    gs->recording = NULL;
    if (!ended)
        return false;
    g->ready = true;
    gs->last = g;
    gs->recordings++;
    *out = g->cmd;
    return true;
}
