#pragma once
// Chapter 12's fixtures for tools/compare's PyTorch scripts, written by the lm_fixture tool
// (tools/compare/lm_fixture.cpp), apart from the training program.
#include <string>

#include "lm_run.h"

namespace ch12 {

// The chosen block at this size with random weights, one batch of random ids, its logits, its loss's gradient of
// every parameter, and the configuration, in one safetensors file: what tools/compare/torch_lm.py recomputes.
void write_parity_file(const Options& o, const std::string& path);

// What tools/compare/torch_lm_bpb.py trains from: the weights a run of these options starts from, both token
// streams, and the recipe (batch, length, learning rate, validation windows, the validation text's bytes).
void write_data_file(const Options& o, const Corpus& c, const std::string& path);

}  // namespace ch12
