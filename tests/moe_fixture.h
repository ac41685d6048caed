/*
 * Shared by the forward tests: a mixture-of-experts model rewritten with each expert in a
 * tensor of its own (blk.N.ffn_gate.E.weight), as Mixtral files converted before the 3-D
 * expert tensors have them.
 */
#ifndef CORRAL_TESTS_MOE_FIXTURE_H
#define CORRAL_TESTS_MOE_FIXTURE_H

/* src's tensors and keys into dst, every *_exps.weight split into one 2-D tensor per expert
 * (written last expert first, so no expert's rows follow the one before). Fails the test on
 * any error. */
void moe_fixture_write_split_experts(const char *src, const char *dst);

#endif
