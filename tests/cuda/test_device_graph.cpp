// Graphs (autograd/device_graph.h): a function's kernels recorded once and replayed as one launch, on the device
// under test (cuda-sim, or cuda on a GPU: there a recording is CUDA's stream capture).
#include "../helpers.h"

using namespace stepformer;
using stepformer::test::close;

namespace {

Device graph_test_device() { return default_device() == kCPU ? Device{DeviceType::cuda_sim, 0} : default_device(); }

Tensor floats_on(const Device dev, const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape, {DType::float32, dev, false});
}
Tensor ids_on(const Device dev, const std::vector<std::int64_t>& values) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())}, {DType::int64, dev, false});
}
void fill_in_place(Tensor& dst, const Tensor& values) {
  const NoGradGuard no_grad;
  copy_(dst, values);
}

}  // namespace

TEST_CASE("device graph: recording queues nothing; each replay runs the kernels again on the inputs' new values",
          "[cuda][device-graph]") {
  const Device dev = graph_test_device();
  const NoGradGuard no_grad;
  Generator gen(3);
  Tensor x = uniform({3, 5}, -1, 1, gen, {DType::float32, dev, false});
  const Tensor w = uniform({5, 4}, -1, 1, gen, {DType::float32, dev, false});
  const Tensor b = uniform({4}, -1, 1, gen, {DType::float32, dev, false});
  const auto f = [&] { return sum(relu(matmul(x, w) + b) * 2.0, {1}); };
  (void)f().cpu();  // once before recording, as with torch.cuda.graph
  Tensor y;
  const std::size_t launches = kernel_launches(dev);
  DeviceGraph graph(dev, [&] { y = f(); });
  CHECK(kernel_launches(dev) == launches);  // recorded, not queued
  for (const std::uint64_t seed : {4, 5}) {
    Generator next(seed);
    fill_in_place(x, uniform({3, 5}, -1, 1, next, {DType::float32, dev, false}));
    const Tensor want = f().cpu();
    const std::size_t before = kernel_launches(dev);
    graph.replay();
    CHECK(kernel_launches(dev) == before + 1);  // the whole function: one launch
    CHECK(close(y.cpu(), want, 1e-6, 1e-6));
  }
}

TEST_CASE("device graph: a copy between host and device while recording is refused, and the device runs on",
          "[cuda][device-graph]") {
  const Device dev = graph_test_device();
  const Tensor x = floats_on(dev, {1, 2, 3}, {3});
  REQUIRE_THROWS_WITH_ALL(DeviceGraph(dev, [&] { (void)sum(x).item(); }), DeviceError, "copy to the host",
                          "while a graph is recorded");
  REQUIRE_THROWS_WITH_ALL(DeviceGraph(dev,
                                      [&] {
                                        (void)(x + floats_on(dev, {1, 1, 1}, {3}));
                                      }),
                          DeviceError, "copy from the host", "fill its inputs before replay()");
  const std::size_t before = kernel_launches(dev);
  CHECK(sum(x * 2.0).item() == 12.0);  // run, not recorded: the failed recordings were ended
  CHECK(kernel_launches(dev) > before);
  REQUIRE_THROWS_WITH_ALL(DeviceGraph(kCPU, [] {}), DeviceError, "cpu", "graphs record CUDA kernels");
}

// A replay writes every block the recording allocated, also those whose tensors have died: none may be handed to
// another tensor while the graph lives (a temporary's block reused would be overwritten by each replay). On a GPU the
// cache of freed blocks hands such a block to the next tensor of its size (`others` below); cuda-sim frees memory at
// once, and its checking build's memcheck names the replay's write to freed memory.
TEST_CASE("device graph: the memory a recording allocated stays the graph's while it lives, and comes back after",
          "[cuda][device-graph]") {
  const Device dev = graph_test_device();
  const NoGradGuard no_grad;
  const std::size_t before = bytes_in_use(dev);
  {
    Tensor x = floats_on(dev, {1, 2, 3, 4}, {4});
    Tensor y;
    DeviceGraph graph(dev, [&] {
      const Tensor temporary = x * 3.0;  // dies inside the recording
      y = temporary + 1.0;
    });
    graph.replay();
    CHECK(y.cpu().to_vector<double>() == std::vector<double>{4, 7, 10, 13});
    y = Tensor();  // the output dies too
    std::vector<Tensor> others;
    for (int i = 0; i < 8; ++i) others.push_back(full({4}, -1.0, {DType::float32, dev, false}));
    fill_in_place(x, floats_on(dev, {0, 0, 0, 0}, {4}));
    graph.replay();
    for (const Tensor& t : others) CHECK(t.cpu().to_vector<double>() == std::vector<double>(4, -1.0));
  }
  CHECK(bytes_in_use(dev) == before);
}

// An index check recorded in a graph checks each replay's ids; they are read at the next copy to the host, as the
// eager op's are (checks.cu), whichever replay found a bad one.
TEST_CASE("device graph: a recorded embedding's ids are checked at every replay and reported at the next copy",
          "[cuda][device-graph]") {
  const Device dev = graph_test_device();
  const NoGradGuard no_grad;
  const Tensor table = ones({7, 4}, {DType::float32, dev, false});
  Tensor ids = ids_on(dev, {1, 2});
  (void)embedding(table, ids).cpu();
  Tensor rows;
  DeviceGraph graph(dev, [&] { rows = embedding(table, ids); });
  graph.replay();
  CHECK(sum(rows).item() == 8.0);
  fill_in_place(ids, ids_on(dev, {1, 9}));
  graph.replay();
  REQUIRE_THROWS_WITH_ALL(rows.cpu(), IndexError, "embedding", "id 9 at position [1]", "next copy");
  fill_in_place(ids, ids_on(dev, {3, 0}));
  graph.replay();
  CHECK_NOTHROW(rows.cpu());
  fill_in_place(ids, ids_on(dev, {-2, 0}));
  graph.replay();
  fill_in_place(ids, ids_on(dev, {3, 0}));
  graph.replay();  // writes another block of slots than the last replay's
  REQUIRE_THROWS_WITH_ALL(rows.cpu(), IndexError, "id -2 at position [0]");
  CHECK_NOTHROW(rows.cpu());
}

// The replays write 16 blocks of check slots in turn (checks.cu), so the host waits to read them once in 16 replays
// (a generated token each, docs/09_cuda.md), not before each; a block is read before it is written again, so a bad
// id found by a replay 16 replays ago is still reported. Copies between device tensors are no waits.
TEST_CASE("device graph: replays wait to read their checks once in 16, and a bad id is reported however many follow",
          "[cuda][device-graph]") {
  const Device dev = graph_test_device();
  const NoGradGuard no_grad;
  const Tensor table = ones({7, 4}, {DType::float32, dev, false});
  Tensor ids = ids_on(dev, {1, 2});
  const Tensor good = ids_on(dev, {1, 2}), bad = ids_on(dev, {8, 1});
  (void)embedding(table, ids).cpu();
  Tensor rows;
  DeviceGraph graph(dev, [&] { rows = embedding(table, ids); });
  fill_in_place(ids, bad);
  graph.replay();
  fill_in_place(ids, good);
  const std::size_t before = host_waits(dev);
  for (int i = 0; i < 15; ++i) graph.replay();
  CHECK(host_waits(dev) == before);  // 16 replays, 16 blocks: nothing read yet
  graph.replay();                    // the first replay's block again: read first
  CHECK(host_waits(dev) == before + 1);
  REQUIRE_THROWS_WITH_ALL(rows.cpu(), IndexError, "id 8 at position [0]");
  CHECK_NOTHROW(rows.cpu());
}
