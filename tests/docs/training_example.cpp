// The example of docs/08_training.md, compiled and run by CTest so the doc cannot drift from the code.
// It fits y = 3x - 1 with a small MLP: a module, a loss, AdamW, a warmup schedule, clipping, and a
// checkpoint that is saved, loaded into a fresh model, and checked.
#include <cstdio>
#include <filesystem>

#include "nn/nn.h"

namespace sf = stepformer;
using namespace stepformer::nn;

// [model]
struct Regressor : Module {
  std::shared_ptr<Sequential> body;  // Linear(1, 16) -> GELU -> Linear(16, 1)

  explicit Regressor(sf::Generator& gen) {
    body = register_module("body", std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
                                       std::make_shared<Linear>(1, 16, true, gen), std::make_shared<GELU>(),
                                       std::make_shared<Linear>(16, 1, true, gen)}));
  }
  sf::Tensor forward(const sf::Tensor& x) { return (*body)(x); }  // [N, 1] -> [N, 1]
};
// [model]

int main() {
  // [train]
  sf::Generator gen(0);
  Regressor model(gen);
  AdamW optimizer(model.named_parameters(), {.lr = 0.0, .weight_decay = 0.0});
  const LinearWarmup schedule{.peak = 0.05, .warmup = 20, .total = 400};

  const sf::Tensor x = sf::uniform({64, 1}, -1.0, 1.0, gen);  // [64, 1]
  const sf::Tensor y = x * 3.0 - 1.0;                         // [64, 1]
  double first_loss = 0, loss_value = 0;
  for (std::int64_t step = 1; step <= 400; ++step) {
    optimizer.zero_grad();
    const sf::Tensor loss = mse_loss(model.forward(x), y);
    loss.backward();
    clip_grad_norm_(model.parameters(), 1.0);
    optimizer.set_lr(schedule(step));
    optimizer.step();
    loss_value = loss.item();
    if (step == 1) first_loss = loss_value;
  }
  std::printf("loss %.4f at step 1, %.4f at step 400\n", first_loss, loss_value);
  // [train]

  // [checkpoint]
  const auto path = std::filesystem::temp_directory_path() / "regressor.safetensors";
  save_checkpoint(path, model, &optimizer, {{"step", "400"}});
  sf::Generator other(99);
  Regressor restored(other);
  AdamW restored_optimizer(restored.named_parameters(), {});
  const Metadata meta = load_checkpoint(path, restored, &restored_optimizer);
  const double same = sf::max(sf::sub(restored.forward(x), model.forward(x))).item();
  std::printf("restored from step %s, max difference %g\n", meta.at("step").c_str(), same);
  // [checkpoint]
  return loss_value < 0.01 * first_loss && same == 0.0 ? 0 : 1;
}
