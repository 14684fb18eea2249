#pragma once
// A training checkpoint: one safetensors file with the model's state dict under its own names and, when
// given, the optimizer's state under "optimizer." (see Optimizer::state_dict), plus free-form metadata.
// A file with only model weights (for instance from PyTorch) loads into a model the same way.
#include <filesystem>

#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"

namespace stepformer::nn {

void save_checkpoint(const std::filesystem::path& path, const Module& model, const Optimizer* optimizer = nullptr,
                     const Metadata& metadata = {});

// Strict by default: a missing or unexpected model key is a CheckpointError listing all of them.
// Returns the file's metadata.
Metadata load_checkpoint(const std::filesystem::path& path, Module& model, Optimizer* optimizer = nullptr,
                         bool strict = true);

}  // namespace stepformer::nn
