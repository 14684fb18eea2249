// Checkpoints hold the model and the optimizer: resuming continues bit-identically.
#include <filesystem>

#include "../helpers.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"

using namespace stepformer;

namespace {
struct Net : nn::Module {
  std::shared_ptr<nn::Sequential> body;
  explicit Net(std::uint64_t seed) {
    Generator gen(seed);
    body = register_module("body",
                           std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::UnaryModule>>{
                               std::make_shared<nn::Linear>(3, 8, true, gen), std::make_shared<nn::GELU>(),
                               std::make_shared<nn::LayerNorm>(8), std::make_shared<nn::Linear>(8, 2, true, gen)}));
  }
};

void train(Net& net, nn::Optimizer& opt, int steps, std::uint64_t data_seed) {
  Generator gen(data_seed);
  for (int i = 0; i < steps; ++i) {
    const Tensor x = randn({4, 3}, gen), y = randn({4, 2}, gen);
    opt.zero_grad();
    const Tensor d = (*net.body)(x)-y;
    mean(d * d).backward();
    opt.step();
  }
}

std::vector<float> flat(const Net& net) {
  std::vector<float> out;
  for (const Tensor& p : net.parameters())
    for (float v : p.to_vector<float>()) out.push_back(v);
  return out;
}
}  // namespace

TEST_CASE("a resumed run continues bit-identically (model and Adam state)", "[nn][checkpoint]") {
  const auto path = std::filesystem::temp_directory_path() / "stepformer-test-resume.safetensors";
  Net a(1);
  nn::AdamW opt_a(a.named_parameters(), {.lr = 0.01});
  train(a, opt_a, 5, 100);
  nn::save_checkpoint(path, a, &opt_a, {{"step", "5"}});
  train(a, opt_a, 5, 200);

  Net b(999);  // different initial weights: everything must come from the file
  nn::AdamW opt_b(b.named_parameters(), {.lr = 0.01});
  const nn::Metadata meta = nn::load_checkpoint(path, b, &opt_b);
  CHECK(meta.at("step") == "5");
  train(b, opt_b, 5, 200);
  CHECK(flat(a) == flat(b));
}

TEST_CASE("checkpoint errors name what is wrong", "[nn][checkpoint][errors]") {
  const auto path = std::filesystem::temp_directory_path() / "stepformer-test-weights.safetensors";
  Net a(1);
  nn::save_checkpoint(path, a);  // weights only
  Net b(2);
  nn::SGD opt(b.named_parameters(), {});
  REQUIRE_THROWS_WITH_ALL(nn::load_checkpoint(path, b, &opt), nn::CheckpointError, "no optimizer state");
  nn::Linear other(3, 8);
  REQUIRE_THROWS_WITH_ALL(nn::load_checkpoint(path, other), nn::CheckpointError, "missing keys: bias, weight",
                          "unexpected keys: body.0.bias");
  CHECK(nn::load_checkpoint(path, b).empty());  // weights load without the optimizer
  CHECK(flat(a) == flat(b));
}
