#version 450
// A prompt's (token, expert) pairs grouped by expert (vk_moe.c), so that each expert's rows
// are read once per tile of up to `tile` of its pairs instead of once per pair: the pairs
// counted per expert, the counts scanned into each expert's first slot, and each pair
// scattered to a slot of its expert's run. Out: the pair's slot (slot_of), each slot's
// input row (pair / pairs_per_row) and expert, and the tiles (expert, first slot, count),
// the experts' runs cut into pieces of `tile`, the rest of the max_tiles up to a count of 0.
// The order of the pairs within an expert's run is whichever the atomics give: every slot
// is computed on its own, so the order changes no value. One workgroup.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 1) writeonly buffer SlotOf { uint slot_of[]; };
layout(std430, binding = 2) writeonly buffer SlotRows { uint slot_rows[]; };
layout(std430, binding = 3) writeonly buffer SlotIds { uint slot_ids[]; };
layout(std430, binding = 4) writeonly buffer Tiles { uint tiles[]; };
layout(push_constant) uniform Params { uint n_pairs, n_expert, pairs_per_row, tile, max_tiles; } p;

// The host caps the experts at MODEL_MAX_EXPERTS (1024).
const uint MAX_EXPERTS = 1024u;
shared uint count[MAX_EXPERTS];
shared uint first_slot[MAX_EXPERTS];
shared uint first_tile[MAX_EXPERTS];
shared uint n_tiles;

void main()
{
    uint tid = gl_LocalInvocationID.x;
    for (uint e = tid; e < p.n_expert; e += 256u)
        count[e] = 0u;
    barrier();
    for (uint i = tid; i < p.n_pairs; i += 256u)
        atomicAdd(count[ids[i]], 1u);
    barrier();
    if (tid == 0u) {
        uint slot = 0u, tile = 0u;
        for (uint e = 0u; e < p.n_expert; e++) {
            first_slot[e] = slot;
            first_tile[e] = tile;
            slot += count[e];
            tile += (count[e] + p.tile - 1u) / p.tile;
        }
        n_tiles = tile;
    }
    barrier();
    for (uint e = tid; e < p.n_expert; e += 256u)
        for (uint j = 0u; j * p.tile < count[e]; j++) {
            uint t = first_tile[e] + j;
            tiles[3u * t] = e;
            tiles[3u * t + 1u] = first_slot[e] + j * p.tile;
            tiles[3u * t + 2u] = min(p.tile, count[e] - j * p.tile);
        }
    for (uint t = n_tiles + tid; t < p.max_tiles; t += 256u)
        tiles[3u * t + 2u] = 0u;
    barrier(); // every count read: they become the runs' cursors
    for (uint e = tid; e < p.n_expert; e += 256u)
        count[e] = 0u;
    barrier();
    for (uint i = tid; i < p.n_pairs; i += 256u) {
        uint e = ids[i], slot = first_slot[e] + atomicAdd(count[e], 1u);
        slot_of[i] = slot;
        slot_rows[slot] = i / p.pairs_per_row;
        slot_ids[slot] = e;
    }
}
