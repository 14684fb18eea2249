#include "nn/checkpoint.h"

#include <fmt/format.h>

namespace stepformer::nn {

namespace {
constexpr std::string_view kOptimizerPrefix = "optimizer.";
}

void save_checkpoint(const std::filesystem::path& path, const Module& model, const Optimizer* optimizer,
                     const Metadata& metadata) {
  StateDict all = model.state_dict();
  if (optimizer) {
    for (const auto& [key, t] : optimizer->state_dict()) {
      const std::string name = std::string(kOptimizerPrefix) + key;
      if (!all.emplace(name, t).second)
        throw CheckpointError(
            fmt::format("save_checkpoint: the model has a tensor named '{}', which the optimizer's "
                        "state needs; rename that submodule",
                        name));
    }
  }
  save_safetensors(path, all, metadata);
}

Metadata load_checkpoint(const std::filesystem::path& path, Module& model, Optimizer* optimizer, bool strict) {
  Safetensors file = load_safetensors(path);
  StateDict model_part, optimizer_part;
  for (auto& [key, t] : file.tensors) {
    if (key.starts_with(kOptimizerPrefix))
      optimizer_part.emplace(key.substr(kOptimizerPrefix.size()), t);
    else
      model_part.emplace(key, t);
  }
  model.load_state_dict(model_part, strict);
  if (optimizer) {
    if (optimizer_part.empty())
      throw CheckpointError(fmt::format("load_checkpoint: {} holds no optimizer state", path.string()));
    optimizer->load_state_dict(optimizer_part);
  }
  return file.metadata;
}

}  // namespace stepformer::nn
