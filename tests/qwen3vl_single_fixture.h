/*
 * Shared by test_vision_qwen3vl and write_qwen3vl_single (the integration tests' copy).
 */
#ifndef CORRAL_TESTS_QWEN3VL_SINGLE_FIXTURE_H
#define CORRAL_TESTS_QWEN3VL_SINGLE_FIXTURE_H

#include <stdint.h>

/* The pair as ollama's converter lays Qwen3-VL out in one GGUF for its engine: the tower's
 * sizes under <arch>.vision.* (the deepstack layers as a list, which also gives the text
 * model their count), the M-RoPE sections as rope.mrope_section, both frames' patch kernels
 * in one F16 Conv3D tensor, q, k and v apart, and its own names (the merger under v.merger,
 * the deepstack mergers numbered by place). The kernels' halves are what the pair's F32
 * kernels are rounded to, so the file gives exactly the pair's results. drop_tensor: a
 * tensor (by the file's name) left out; indexes: the deepstack list written (a merger it
 * leaves out is numbered past it). A qwen35 or qwen35moe text model (Qwen 3.5, its projector
 * without deepstack) is laid out as ollama's library has it: the sections as three
 * rope.dimension_sections, attention.head_count_kv per layer, blk.N.ssm_dt for ssm_dt.bias, an
 * mtp.* tensor, no deepstack list (indexes unused) and none of the tower's epsilon,
 * normalisation or frame count. Fails the current cmocka test on any error. */
void qwen3vl_single_fixture_write(const char *text_path, const char *mmproj_path, const char *dst,
                                  const char *drop_tensor, const int32_t *indexes,
                                  uint64_t n_indexes);

#endif
