// Reliability: errors name the module they happen in, anomaly mode finds the first NaN or infinity, and
// training is bit-identical whatever the thread count.
#include <omp.h>

#include "autograd/anomaly.h"
#include "nn/layers.h"
#include "reference.h"
#include "transformer/train.h"

using namespace stepformer;
using namespace stepformer::test;
using namespace stepformer::transformer;

namespace {

// log of something that is exactly 0: -inf, a planted anomaly inside a named submodule.
struct Planted : nn::UnaryModule {
  Tensor forward(const Tensor& x) override { return log(x - x); }
};

struct Block : nn::UnaryModule {
  std::shared_ptr<nn::Linear> proj;
  std::shared_ptr<Planted> planted;
  explicit Block(Generator& gen) {
    proj = register_module("proj", std::make_shared<nn::Linear>(3, 3, true, gen));
    planted = register_module("planted", std::make_shared<Planted>());
  }
  Tensor forward(const Tensor& x) override { return (*planted)((*proj)(x)); }
};

struct Net : nn::UnaryModule {
  std::shared_ptr<Block> block;
  explicit Net(Generator& gen) { block = register_module("block", std::make_shared<Block>(gen)); }
  Tensor forward(const Tensor& x) override { return (*block)(x); }
};

// Random token ids in [4, vocab): no PAD, BOS, EOS or UNK.
Tensor random_ids(std::int64_t batch, std::int64_t len, std::int64_t vocab, Generator& gen) {
  std::vector<std::int64_t> v;
  for (double u : rand({batch, len}, gen, {DType::float64}).to_vector<double>())
    v.push_back(4 + static_cast<std::int64_t>(u * static_cast<double>(vocab - 4)));
  return from_vector(v, {batch, len}, {DType::int64});
}

}  // namespace

TEST_CASE("modules know their dotted paths, also when nested after construction", "[reliability]") {
  Generator gen(1);
  Transformer model(small_config(), gen);
  CHECK(model.path().empty());
  CHECK(model.encoder->layers->operator[](1).ffn->w_1->path() == "encoder.layers.1.ffn.w_1");
  CHECK(model.decoder->layers->operator[](0).cross_attn->path() == "decoder.layers.0.cross_attn");
  Net net(gen);  // Planted was registered into Block before Block was registered into Net
  CHECK(net.block->planted->path() == "block.planted");
}

TEST_CASE("errors raised inside a module start with its path", "[reliability]") {
  Generator gen(1);
  Transformer model(small_config(), gen);
  auto& ffn = *model.encoder->layers->operator[](0).ffn;
  const Tensor wrong = zeros({2, 7, 8});
  REQUIRE_THROWS_WITH_ALL(ffn(wrong), ShapeError, "encoder.layers.0.ffn.w_1: Linear expected [*, 16], got [2, 7, 8]");
  // Outside every module, messages are as before.
  REQUIRE_THROWS_WITH_ALL(matmul(zeros({2, 3}), zeros({4, 5})), ShapeError, "matmul: inner dimensions differ");
  try {
    (void)matmul(zeros({2, 3}), zeros({4, 5}));
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()).rfind("matmul:", 0) == 0);
  }
}

TEST_CASE("anomaly mode: a planted log(0) is reported with the op, the shapes and the module path", "[reliability]") {
  Generator gen(2);
  Net net(gen);
  const Tensor x = rand({2, 3}, gen);
  // Off: the -inf flows on silently (what anomaly mode is for).
  CHECK(std::isinf(sum(net(x)).item()));
  DetectAnomalyGuard on;
  REQUIRE_THROWS_WITH_ALL(net(x), AnomalyError, "block.planted: ", "'log' produced infinity", "output [2, 3]",
                          "inputs [2, 3]");
}

TEST_CASE("anomaly mode: a gradient that turns infinite names the backward op and its module", "[reliability]") {
  // sqrt(0) = 0 is finite; its gradient 1 / (2 sqrt(0)) is not.
  Generator gen(3);
  nn::Linear lin(3, 3, true, gen);
  Tensor x = zeros({2, 3}).set_requires_grad();
  const Tensor y = sum(sqrt(x));
  y.backward();  // off: an infinite gradient, silently
  CHECK(std::isinf(x.grad().to_vector<double>()[0]));
  DetectAnomalyGuard on;
  x.zero_grad();
  const Tensor z = sum(sqrt(x));
  REQUIRE_THROWS_WITH_ALL(z.backward(), AnomalyError, "backward of 'sqrt'", "infinity", "shape [2, 3]");
}

TEST_CASE("anomaly mode lets a masked attention's -inf through and trains a model cleanly", "[reliability]") {
  Generator gen(4);
  Transformer model(small_config(), gen);
  Trainer trainer(model, {.warmup = 10});
  const auto pad = Vocabulary::kPad;
  const Batch b{ids({5, 6, 7, pad, 8, 9, 5, 6}, 2), ids({1, 5, 6, 1, 7, pad}, 2), ids({5, 6, 2, 7, 2, pad}, 2), 5};
  DetectAnomalyGuard on;
  CHECK(std::isfinite(trainer.step(b)));
}

TEST_CASE("training is bit-identical on 1 and 2 threads", "[reliability][threads][cpu-only]") {
  // Threads split rows, columns and batch entries, never a sum: every float is added in the same order.
  // 32 x 24 tokens of d_model 64: every activation is above the kernels' parallel threshold (kParallelGrain),
  // so the threaded paths run — this test is also the training step ThreadSanitizer watches (preset tsan).
  Config c = small_config();
  c.src_vocab = c.tgt_vocab = 300;
  c.d_model = 64;
  c.d_ff = 128;
  c.dropout = 0.1;
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Generator gen(5), data(6);
    Transformer model(c, gen);
    Trainer trainer(model, {.warmup = 10});
    std::vector<double> losses;
    for (int s = 0; s < 3; ++s) {
      const Tensor src = random_ids(32, 24, c.src_vocab, data), tgt = random_ids(32, 25, c.tgt_vocab, data);
      const Batch b{src, contiguous(narrow(tgt, 1, 0, 24)), contiguous(narrow(tgt, 1, 1, 24)), 32 * 24};
      losses.push_back(trainer.step(b));
    }
    omp_set_num_threads(before);
    return losses;
  };
  const auto one = run(1), two = run(2);
  CHECK(one == two);
}

TEST_CASE("rms_norm's rows and gain gradient are bit-identical on 1 and 2 threads",
          "[reliability][threads][cpu-only]") {
  // [768, 64]: above kParallelGrain, so rows are split between threads and the gain's gradient is summed in blocks
  // of rows by both; ThreadSanitizer watches this test too (preset tsan).
  auto run = [](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Generator gen(7);
    Tensor x = randn({768, 64}, gen).set_requires_grad(), w = randn({64}, gen).set_requires_grad();
    const Tensor g = randn({768, 64}, gen);
    const Tensor y = rms_norm(x, w);
    y.backward(g);
    omp_set_num_threads(before);
    return std::vector<std::vector<float>>{y.to_vector<float>(), x.grad().to_vector<float>(),
                                           w.grad().to_vector<float>()};
  };
  CHECK(run(1) == run(2));
}

TEST_CASE("training steps on cuda-sim and on the reference device match the CPU within tolerance, dropout included",
          "[reliability][cuda][cpu-only]") {
  // The same weights (made on the CPU, moved with Module::to), the same batches and the same dropout masks
  // (the Philox bits are the same on every device). Differences come only from float rounding: the CUDA
  // kernels sum in another order, the reference in double. Four Adam steps keep that drift small.
  if (default_device() != kCPU) SKIP("compares against the CPU: runs in the CPU pass only");
  Config c = small_config();
  c.src_vocab = c.tgt_vocab = 50;
  c.dropout = 0.1;
  auto run = [&](Device device) {
    Generator gen(5), data(6);
    Transformer model(c, gen);
    model.to(device);
    Trainer trainer(model, {.warmup = 10});
    const Tensor src = random_ids(4, 7, c.src_vocab, data), tgt = random_ids(4, 8, c.tgt_vocab, data);
    const Batch b{src.to(device), contiguous(narrow(tgt, 1, 0, 7)).to(device),
                  contiguous(narrow(tgt, 1, 1, 7)).to(device), 4 * 7};
    std::vector<double> losses;
    for (int s = 0; s < 4; ++s) losses.push_back(trainer.step(b));  // one batch again: the loss must fall
    return std::pair{losses, model.parameters().front().cpu()};
  };
  const auto [cpu_losses, cpu_weight] = run(kCPU);
  CHECK(cpu_losses[3] < cpu_losses[0]);  // it trains
  for (const Device other : {Device{DeviceType::cuda_sim, 0}, Device{DeviceType::reference, 0}}) {
    INFO(device_name(other) << " against the CPU");
    const auto [losses, weight] = run(other);
    REQUIRE(losses.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(losses[i] == Catch::Approx(cpu_losses[i]).epsilon(1e-4));
    CHECK(test::close(weight, cpu_weight, 1e-4, 1e-4));
  }
}
