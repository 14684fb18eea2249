#pragma once
// Reference values computed by PyTorch 1.13 (tools/fixtures/make_nn_fixtures.py), committed as safetensors.
#include <string>

#include "nn/safetensors.h"

namespace stepformer::test {

inline nn::StateDict fixture(const std::string& name) {
  return nn::load_safetensors(std::string(STEPFORMER_FIXTURES_DIR) + "/nn/" + name + ".safetensors").tensors;
}

}  // namespace stepformer::test
