/*
 * A context's recorded forward passes (vk_layers.c): the command buffer of a pass is
 * recorded once per graph shape and submitted again each time that shape recurs, so that
 * generation, a token a step, records its pass once and then only resubmits it. What changes
 * from step to step (the hidden states, the tokens' sequences, cells and the last cell each
 * sees, their cos/sin rows, which rows give logits) lies in host-visible buffers that the
 * shaders read and the host rewrites before each submission; what a recording holds (its
 * dispatch sizes, push constants and bound buffers) follows from the key and from buffers
 * allocated once, when the layers are created. A handful of shapes are kept; a new one is
 * recorded over the least recently used.
 */
#ifndef CORRAL_ENGINE_VK_GRAPHS_H
#define CORRAL_ENGINE_VK_GRAPHS_H

#include <stdbool.h>
#include <stdint.h>

#include "vk_device.h"

/* Everything a pass's recording depends on besides the layers themselves. */
typedef struct vk_graph_key {
    uint32_t n_tokens; /* the micro-batch */
    uint32_t n_logits; /* rows through the device's output layer; 0: the states come back */
} vk_graph_key;

/* Shapes kept: a prompt's full micro-batches and its tail, generation's step, a batch of
 * sequences' step, with room to spare. */
enum { VK_GRAPHS = 8 };

typedef struct vk_graph {
    VkCommandBuffer cmd; /* allocated from the commands' pool on first use, then reused */
    vk_graph_key key;
    bool ready;          /* recorded and ended under key */
    uint64_t used;       /* the clock when last found or recorded */
    uint32_t dispatches, barriers; /* what its recording holds */
} vk_graph;

typedef struct vk_graphs {
    vk_commands *c;      /* the pool the graphs come from; the recording goes through it */
    vk_graph graphs[VK_GRAPHS];
    VkCommandBuffer own; /* c's own buffer and what it holds, while a graph is recorded */
    vk_recording own_rec;
    vk_graph *recording;
    const vk_graph *last; /* the graph last found or recorded */
    uint64_t clock;
    uint64_t recordings; /* graphs recorded since creation (tests read it) */
} vk_graphs;

/* Graphs of c's pool; nothing recorded yet. They are freed with the pool
 * (vk_commands_free). */
void vk_graphs_init(vk_graphs *gs, vk_commands *c);

/* The graph recorded for key, ready to be submitted again; VK_NULL_HANDLE when there is
 * none. */
VkCommandBuffer vk_graphs_find(vk_graphs *gs, const vk_graph_key *key);

/* Every graph recorded so far is recorded again when its key next comes: the buffers it
 * binds are gone. */
void vk_graphs_forget(vk_graphs *gs);

/* Begin recording key's graph: until vk_graphs_end, the operations recorded through the
 * commands (gs->c) go into it. False with the reason when no buffer can be allocated. */
bool vk_graphs_begin(vk_graphs *gs, const vk_graph_key *key, corral_error *err);

/* End the recording (after a barrier, vk_commands_end); the graph into *out, to be submitted with vk_commands_submit_recorded
 * (now and whenever vk_graphs_find gives it again). The commands' own buffer is theirs again.
 * False with the reason when the driver refuses it (the graph is then not kept). */
bool vk_graphs_end(vk_graphs *gs, VkCommandBuffer *out, corral_error *err);

#endif
