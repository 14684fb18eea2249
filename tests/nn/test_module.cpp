// Module: registration, dotted paths, modes, state dicts, and the audit that no parameter is forgotten.
#include "../helpers.h"
#include "nn/errors.h"
#include "nn/layers.h"
#include "nn/optim.h"

using namespace stepformer;

namespace {

// A two-level model shaped like a Transformer block, for path and count tests.
struct Block : nn::Module {
  std::shared_ptr<nn::Linear> w_q, w_o;
  std::shared_ptr<nn::LayerNorm> norm;
  Block() {
    w_q = register_module("w_q", std::make_shared<nn::Linear>(4, 4));
    w_o = register_module("w_o", std::make_shared<nn::Linear>(4, 4, false));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(4));
  }
  Tensor forward(const Tensor& x) { return (*norm)(x + (*w_o)((*w_q)(x))); }
};

struct Stack : nn::Module {
  std::shared_ptr<nn::ModuleList<Block>> layers;
  Tensor scale;  // a buffer
  Stack() {
    layers = register_module("layers", std::make_shared<nn::ModuleList<Block>>());
    for (int i = 0; i < 2; ++i) layers->push_back(std::make_shared<Block>());
    scale = register_buffer("scale", full({1}, 2.0));
  }
  Tensor forward(const Tensor& x) {
    Tensor y = x;
    for (auto& block : *layers) y = block->forward(y);
    return y * scale;
  }
};

// Seed 000's bug (docs/seeds.md), in C++: a LayerNorm built inside forward. Its parameters never reach the optimizer.
struct NormInForward : nn::Module {
  std::shared_ptr<nn::Linear> ffn;
  NormInForward() { ffn = register_module("ffn", std::make_shared<nn::Linear>(4, 4)); }
  Tensor forward(const Tensor& x) {
    nn::LayerNorm fresh(4);  // the bug
    return fresh(x + (*ffn)(x));
  }
};

// A member parameter that was never registered.
struct Forgotten : nn::Module {
  Tensor w = ones({4, 4}).set_requires_grad();
  Tensor forward(const Tensor& x) { return matmul(x, w); }
};

// Builds M and runs its forward once, for test::unregistered_leaves.
template <class M>
std::shared_ptr<M> built_and_run() {
  auto model = std::make_shared<M>();
  (void)model->forward(ones({2, 4}));
  return model;
}

}  // namespace

TEST_CASE("named_parameters gives dotted paths in registration order", "[nn][module]") {
  Stack model;
  std::vector<std::string> names;
  for (auto& [name, p] : model.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"layers.0.w_q.weight", "layers.0.w_q.bias", "layers.0.w_o.weight",
                                          "layers.0.norm.weight", "layers.0.norm.bias", "layers.1.w_q.weight",
                                          "layers.1.w_q.bias", "layers.1.w_o.weight", "layers.1.norm.weight",
                                          "layers.1.norm.bias"});
  // Closed form: per block 4*4+4 (w_q) + 4*4 (w_o) + 4+4 (norm) = 44.
  CHECK(model.parameter_count() == 88);
  CHECK(model.named_buffers().size() == 1);
  CHECK(model.state_dict().count("scale") == 1);
  CHECK(model.state_dict().size() == 11);
}

TEST_CASE("every parameter a model creates is registered (the audit catches seed 000's bug)", "[nn][module]") {
  CHECK(test::unregistered_leaves(built_and_run<Stack>).empty());
  CHECK(test::unregistered_leaves(built_and_run<NormInForward>) == std::vector<std::string>{"[4]", "[4]"});
  CHECK(test::unregistered_leaves(built_and_run<Forgotten>) == std::vector<std::string>{"[4, 4]"});
}

TEST_CASE("a module registered twice is listed, counted and stepped once (as torch.nn.Module)", "[nn][module]") {
  // Seed 003's decoder, one level down: one norm serving where the paper has distinct ones.
  struct SharedNorm : nn::Module {
    std::shared_ptr<nn::LayerNorm> norm = std::make_shared<nn::LayerNorm>(4);
    SharedNorm() {
      register_module("norm_attn", norm);
      register_module("norm_ffn", norm);
    }
  };
  SharedNorm model;
  std::vector<std::string> names;
  for (auto& [name, p] : model.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"norm_attn.weight", "norm_attn.bias"});
  CHECK(model.parameter_count() == 8);  // two distinct norms would hold 16: the closed form catches the sharing

  // One layer appended twice to a stack: the count is one block's, not two.
  nn::ModuleList<Block> stack;
  auto block = std::make_shared<Block>();
  stack.push_back(block);
  stack.push_back(block);
  CHECK(stack.parameter_count() == 44);

  // Listed twice, SGD would subtract lr * g twice in one step.
  sum(model.norm->weight + model.norm->bias).backward();  // every gradient 1
  nn::SGD sgd(model.named_parameters(), {.lr = 0.5});
  sgd.step();
  CHECK(model.norm->weight.to_vector<double>() == std::vector<double>(4, 0.5));
}

TEST_CASE("every parameter of a model receives a nonzero gradient", "[nn][module]") {
  Generator gen(3);
  Stack model;
  sum(model.forward(randn({2, 4}, gen)) * randn({2, 4}, gen)).backward();
  for (auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(sum(p.grad() * p.grad()).item() > 0);
  }
  model.zero_grad();
  for (const Tensor& p : model.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("train() and eval() propagate to every submodule", "[nn][module]") {
  Stack model;
  model.eval();
  CHECK_FALSE(model.is_training());
  CHECK_FALSE((*model.layers)[1].norm->is_training());
  model.train();
  CHECK((*model.layers)[0].w_q->is_training());
}

TEST_CASE("load_state_dict lists every problem in one error; non-strict ignores missing and unexpected",
          "[nn][module][errors]") {
  Stack model;
  nn::StateDict state = model.state_dict();
  state.erase("layers.0.w_q.bias");
  state.erase("scale");
  state["layers.9.extra"] = ones({1});
  state["layers.1.norm.weight"] = ones({5});
  REQUIRE_THROWS_WITH_ALL(model.load_state_dict(state), nn::CheckpointError, "missing keys: layers.0.w_q.bias, scale",
                          "unexpected keys: layers.9.extra",
                          "layers.1.norm.weight: expected float32 [4], got float32 [5]");
  state["layers.1.norm.weight"] = full({4}, 3.0);
  const nn::LoadResult r = model.load_state_dict(state, /*strict=*/false);
  CHECK(r.missing == std::vector<std::string>{"layers.0.w_q.bias", "scale"});
  CHECK(r.unexpected == std::vector<std::string>{"layers.9.extra"});
  CHECK((*model.layers)[1].norm->weight.to_vector<double>() == std::vector<double>(4, 3.0));
}

TEST_CASE("registration refuses duplicate and dotted names", "[nn][module][errors]") {
  struct Twice : nn::Module {
    Twice() {
      register_parameter("w", ones({1}));
      register_parameter("w", ones({1}));
    }
  };
  struct Dotted : nn::Module {
    Dotted() { register_buffer("a.b", ones({1})); }
  };
  REQUIRE_THROWS_WITH_ALL(Twice(), ValueError, "'w'", "twice");
  REQUIRE_THROWS_WITH_ALL(Dotted(), ValueError, "'a.b'");
}

TEST_CASE("to(device) keeps every handle to a parameter valid", "[nn][module]") {
  nn::Linear lin(3, 2);
  Tensor handle = lin.weight;
  lin.to(kCPU);
  CHECK(handle.is_same(lin.weight));
  const Tensor x = ones({4, 3}, {DType::float32, kCPU});
  const Tensor y_cpu = lin(x);
  const Device sim{DeviceType::cuda_sim, 0};
  lin.to(sim);
  CHECK(handle.is_same(lin.weight));
  CHECK(handle.device() == sim);
  CHECK(lin.bias.device() == sim);
  CHECK(test::close(lin(x.to(sim)).cpu(), y_cpu));
  REQUIRE_THROWS_AS(lin(x), DeviceError);  // the input stayed on the CPU
}
