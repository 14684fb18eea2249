// The safetensors format: exact layout, bit-exact round trips, PyTorch-written files, and every kind of
// malformed file rejected with a clear error (never a crash).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../helpers.h"
#include "nn/safetensors.h"

using namespace stepformer;
namespace fs = std::filesystem;

namespace {
std::vector<std::byte> bytes_of(std::uint64_t header_len, const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>((header_len >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}
std::vector<std::byte> file_with(const std::string& header, std::size_t data_bytes) {
  return bytes_of(header.size(), header, data_bytes);
}
fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("stepformer-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("a written file has the layout the format specifies, byte by byte", "[nn][safetensors]") {
  const nn::StateDict tensors{{"b", from_vector(std::vector<double>{1.5, -2.0}, {2}, {DType::float32})},
                              {"a", from_vector(std::vector<std::int64_t>{7}, {1, 1}, {DType::int64})}};
  const auto bytes = nn::serialize_safetensors(tensors, {{"note", "hi"}});
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  const std::string header(reinterpret_cast<const char*>(bytes.data() + 8), n);
  CHECK(header.find(R"("__metadata__":{"note":"hi"})") != std::string::npos);
  CHECK(header.find(R"("a":{"data_offsets":[0,8],"dtype":"I64","shape":[1,1]})") != std::string::npos);
  CHECK(header.find(R"("b":{"data_offsets":[8,16],"dtype":"F32","shape":[2]})") != std::string::npos);
  CHECK((8 + n) % 8 == 0);  // data starts aligned; header padded with spaces
  CHECK(header.back() == (header.size() % 8 == 0 && header.back() == ' ' ? ' ' : '}'));
  CHECK(bytes.size() == 8 + n + 16);
  const std::byte* data = bytes.data() + 8 + n;
  std::int64_t seven;
  std::memcpy(&seven, data, 8);
  CHECK(seven == 7);
  const unsigned char f15[4] = {0x00, 0x00, 0xc0, 0x3f};  // 1.5f, little-endian
  CHECK(std::memcmp(data + 8, f15, 4) == 0);
}

TEST_CASE("bfloat16 tensors are stored as BF16: two bytes each, the top half of the float32", "[nn][safetensors]") {
  const Tensor t = from_vector(std::vector<double>{1.5, -2.0, 3.14159265}, {3}, {DType::float32}).to(DType::bfloat16);
  const auto bytes = nn::serialize_safetensors({{"w", t}});
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  const std::string header(reinterpret_cast<const char*>(bytes.data() + 8), n);
  CHECK(header.find(R"("w":{"data_offsets":[0,6],"dtype":"BF16","shape":[3]})") != std::string::npos);
  // 1.5 = 0x3FC0, -2 = 0xC000, pi rounds to 0x4049 (3.140625), little-endian.
  const unsigned char want[6] = {0xc0, 0x3f, 0x00, 0xc0, 0x49, 0x40};
  REQUIRE(bytes.size() == 8 + n + 6);
  CHECK(std::memcmp(bytes.data() + 8 + n, want, 6) == 0);
  const nn::Safetensors back = nn::parse_safetensors(bytes, "memory");
  CHECK(back.tensors.at("w").dtype() == DType::bfloat16);
  CHECK(back.tensors.at("w").to_vector<double>() == std::vector<double>{1.5, -2.0, 3.140625});
}

TEST_CASE("round trip through a file is bit-exact for every dtype and shape", "[nn][safetensors]") {
  Generator gen(5);
  const nn::StateDict tensors{
      {"f32", randn({3, 4}, gen)},
      {"f64", randn({2, 2, 2}, gen, {DType::float64})},
      {"i64", from_vector(std::vector<std::int64_t>{-3, 1LL << 62}, {2}, {DType::int64})},
      {"mask", from_vector(std::vector<double>{1, 0, 1}, {3}, {DType::boolean})},
      {"bf16", randn({3, 5}, gen).to(DType::bfloat16)},
      {"scalar", scalar(0.1)},
      {"empty", zeros({0, 5})},
      {"transposed", transpose(randn({2, 3}, gen), 0, 1)},
  };
  const fs::path path = scratch_dir("roundtrip") / "t.safetensors";
  nn::save_safetensors(path, tensors, {{"k", "v"}});
  const nn::Safetensors back = nn::load_safetensors(path);
  CHECK(back.metadata == nn::Metadata{{"k", "v"}});
  REQUIRE(back.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    const Tensor& u = back.tensors.at(name);
    CHECK(u.shape() == t.shape());
    CHECK(u.dtype() == t.dtype());
    const auto a = nn::serialize_safetensors({{name, t}}), b = nn::serialize_safetensors({{name, u}});
    CHECK(a == b);
  }
  for (const auto& entry : fs::directory_iterator(path.parent_path()))  // no temporary file left behind
    CHECK(entry.path().filename() == "t.safetensors");
}

TEST_CASE("files written by PyTorch code load", "[nn][safetensors]") {
  const auto f = nn::load_safetensors(std::string(STEPFORMER_FIXTURES_DIR) + "/nn/sequential_state.safetensors");
  CHECK(f.tensors.at("0.weight").shape() == Shape{8, 4});
  CHECK(f.tensors.at("2.bias").shape() == Shape{2});
  CHECK(f.metadata.at("written_by").starts_with("torch 1.13"));
}

TEST_CASE("PyTorch's bfloat16 loads, and our rounding to bfloat16 is PyTorch's bit for bit", "[nn][safetensors]") {
  // tools/fixtures/make_nn_fixtures.py: 16 edge cases (ties, overflow to infinity, subnormals, -0, inf, NaN) and
  // 4096 values of magnitudes 1e-35 to 1e35, rounded by torch's Tensor.bfloat16().
  const auto f = nn::load_safetensors(std::string(STEPFORMER_FIXTURES_DIR) + "/nn/bfloat16.safetensors");
  const Tensor& x = f.tensors.at("x");
  const Tensor& theirs = f.tensors.at("x.bf16");
  REQUIRE(theirs.dtype() == DType::bfloat16);
  const auto want = theirs.to_vector<float>(), got = x.to(DType::bfloat16).to_vector<float>();
  REQUIRE(got.size() == want.size());
  int same = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": x = " << x.to_vector<float>()[i]);
    CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : std::memcmp(&got[i], &want[i], 4) == 0));
    same += std::isnan(want[i]) || std::memcmp(&got[i], &want[i], 4) == 0;
  }
  CHECK(same == static_cast<int>(got.size()));
}

TEST_CASE("matmul under autocast: within one rounding of the exact product; PyTorch 1.13's sums in bfloat16",
          "[nn][safetensors]") {
  // The fixture's a [33, 65] and b [65, 17], and PyTorch's product of them under torch.autocast("cpu",
  // bfloat16). Ours multiplies the bfloat16-rounded operands (each product exact in float32) and sums in
  // float32: rounded to bfloat16 it is within one rounding (2^-8 relative) of the exact sum, plus the float32
  // sum's own error (65 terms: < 65 * 2^-24 of the sum of |terms|).
  const auto f = nn::load_safetensors(std::string(STEPFORMER_FIXTURES_DIR) + "/nn/bfloat16.safetensors");
  const Tensor a = f.tensors.at("a").to(DType::bfloat16), b = f.tensors.at("b").to(DType::bfloat16);
  Tensor ours;
  {
    AutocastGuard autocast(DType::bfloat16);
    ours = matmul(f.tensors.at("a"), f.tensors.at("b"));
  }
  const auto got = ours.to(DType::bfloat16).to_vector<double>();
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  const auto torch_product = f.tensors.at("autocast.a@b").to_vector<double>();
  double torch_worst = 0;
  for (std::int64_t i = 0; i < 33; ++i)
    for (std::int64_t j = 0; j < 17; ++j) {
      double exact = 0, magnitude = 0;
      float bf16_running = 0;  // what a GEMM accumulating in bfloat16 computes
      for (std::int64_t k = 0; k < 65; ++k) {
        const double term = av[static_cast<std::size_t>(i * 65 + k)] * bv[static_cast<std::size_t>(k * 17 + j)];
        exact += term, magnitude += std::abs(term);
        bf16_running =
            static_cast<float>(bfloat16(bf16_running + static_cast<float>(bfloat16(static_cast<float>(term)))));
      }
      const auto at = static_cast<std::size_t>(i * 17 + j);
      INFO("c[" << i << ", " << j << "] exact " << exact);
      CHECK(std::abs(got[at] - exact) <= 0x1p-8 * std::abs(exact) + 65 * 0x1p-24 * magnitude);
      // Debian's PyTorch 1.13 (generic BLAS, no MKL) on a CPU without AVX512_BF16 accumulates in bfloat16: its
      // product is that running sum, bit for bit (docs/11_mixed_precision.md).
      CHECK(torch_product[at] == static_cast<double>(bf16_running));
      torch_worst = std::max(torch_worst, std::abs(torch_product[at] - exact) / magnitude);
    }
  // Measured against the sum of |terms|, one rounding costs at most 2^-8; the bfloat16 running sum costs more.
  CHECK(torch_worst > 0x1p-8);
}

TEST_CASE("malformed files are rejected with a clear error", "[nn][safetensors][errors]") {
  using nn::CheckpointError;
  auto parse = [](const std::vector<std::byte>& b) { return nn::parse_safetensors(b, "bad.safetensors"); };
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE_NOTHROW(parse(file_with(ok, 8)));

  REQUIRE_THROWS_WITH_ALL(parse(std::vector<std::byte>(5)), CheckpointError, "bad.safetensors", "5 bytes", "too short");
  REQUIRE_THROWS_WITH_ALL(parse(bytes_of(1000, ok, 8)), CheckpointError, "header length 1000", "past the end");
  REQUIRE_THROWS_WITH_ALL(parse(bytes_of(1ULL << 40, ok, 8)), CheckpointError, "exceeds the format's limit");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":{"dtype":"F32",)", 8)), CheckpointError, "not valid JSON");
  REQUIRE_THROWS_WITH_ALL(parse(file_with("[1,2]", 0)), CheckpointError, "JSON object");
  // Found by fuzz_safetensors: a number too large for a double escaped as nlohmann's out_of_range.
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":1111111111111111111111111e11111111})", 0)), CheckpointError,
                          "not valid JSON", "number overflow");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4)),
                          CheckpointError, "tensor 'x'", "dtype F16", "(F32, F64, I64, BOOL, BF16)");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":{"dtype":"F32","shape":[2]}})", 8)), CheckpointError,
                          "no \"data_offsets\"");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8)),
                          CheckpointError, "[0, 16]", "outside the data buffer of 8 bytes");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
                          CheckpointError, "F32 [3] needs 12 bytes", "hold 8");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)),
                          CheckpointError, "non-negative");
  REQUIRE_THROWS_WITH_ALL(
      parse(file_with(
          R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12)),
      CheckpointError, "'x' [0, 8] and 'y' [4, 12] overlap");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(ok, 12)), CheckpointError, "data bytes [8, 12] belong to no tensor");
  REQUIRE_THROWS_WITH_ALL(
      parse(file_with(
          R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
          8)),
      CheckpointError, "names 'x' twice");
  REQUIRE_THROWS_WITH_ALL(
      parse(file_with(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)),
      CheckpointError, "overflows");
  // A size past int64 where another size is 0: no bytes, but no Shape can hold it (the file and tensor named).
  REQUIRE_THROWS_WITH_ALL(
      parse(file_with(R"({"x":{"dtype":"F32","shape":[0,9223372036854775808],"data_offsets":[0,0]}})", 0)),
      CheckpointError, "bad.safetensors", "tensor 'x'", "overflows");
  REQUIRE_THROWS_WITH_ALL(parse(file_with(R"({"__metadata__":{"a":1}})", 0)), CheckpointError, "not a string");
  auto bad_bool = file_with(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", 2);
  bad_bool.back() = std::byte{7};
  REQUIRE_THROWS_WITH_ALL(parse(bad_bool), CheckpointError, "BOOL byte 1 is 7");
  REQUIRE_THROWS_WITH_ALL(nn::load_safetensors("/nonexistent/x.safetensors"), nn::IoError,
                          "/nonexistent/x.safetensors");
}

TEST_CASE("every truncation of a valid file is rejected, never a crash", "[nn][safetensors][errors]") {
  const auto full = nn::serialize_safetensors({{"w", ones({3, 2})}, {"b", zeros({2}, {DType::int64})}});
  for (std::size_t len = 0; len < full.size(); ++len) {
    INFO("truncated to " << len << " of " << full.size() << " bytes");
    REQUIRE_THROWS_AS(nn::parse_safetensors(std::span(full).first(len)), nn::CheckpointError);
  }
}

TEST_CASE("saving is atomic: a failed save leaves the old file as it was", "[nn][safetensors]") {
  const fs::path dir = scratch_dir("atomic");
  const fs::path path = dir / "model.safetensors";
  nn::save_safetensors(path, {{"w", ones({2})}});
  const auto before = nn::serialize_safetensors({{"w", ones({2})}});
  REQUIRE_THROWS_AS(nn::save_safetensors(path, {{"__metadata__", ones({1})}}), nn::CheckpointError);
  REQUIRE_THROWS_AS(nn::save_safetensors(dir / "missing-dir" / "x.safetensors", {{"w", ones({2})}}), nn::IoError);
  std::ifstream f(path, std::ios::binary);
  std::vector<char> now((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(now.size() == before.size());
  CHECK(std::memcmp(now.data(), before.data(), before.size()) == 0);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("loading a path that is not a regular file is an IoError naming it: never a crash or a hang",
          "[nn][safetensors][errors]") {
  const fs::path dir = scratch_dir("not-a-file");
  const std::string dir_name = dir.string();
  REQUIRE_THROWS_WITH_ALL(nn::load_safetensors(dir), nn::IoError, dir_name.c_str(), "a directory");
  const fs::path fifo = dir / "pipe.safetensors";
  const std::string fifo_name = fifo.string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A FIFO with no writer: an open() without O_NONBLOCK would wait here for ever.
  REQUIRE_THROWS_WITH_ALL(nn::load_safetensors(fifo), nn::IoError, fifo_name.c_str(), "a FIFO");
  REQUIRE_THROWS_WITH_ALL(nn::load_safetensors(dir / "missing.safetensors"), nn::IoError, "cannot open",
                          "missing.safetensors");
}

TEST_CASE("a writer killed in the middle of saves leaves the last file whole and no temporary file behind",
          "[nn][safetensors]") {
  const fs::path dir = scratch_dir("killed");
  const fs::path path = dir / "ckpt.safetensors";
  nn::save_safetensors(path, {{"w", full({4}, 7.0, {DType::float32, kCPU})}});  // a crash must not damage it
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // saves of 64 MB, over and over, until killed
    // On the CPU whatever the device under test: a forked child cannot use its parent's CUDA context (its first
    // allocation fails, and the child, unwinding into Catch2, would run the remaining tests).
    try {
      const Tensor big = zeros({16 * 1024 * 1024}, {DType::float32, kCPU});
      for (int i = 0; i < 1000; ++i) nn::save_safetensors(path, {{"w", big}});
    } catch (...) {
      std::_Exit(3);
    }
    std::_Exit(0);
  }
  ::usleep(300 * 1000);  // several saves in: one is being written now
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  INFO("the writer " << (WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status)) : "was killed"));
  REQUIRE(WIFSIGNALED(status));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  INFO("left in the folder: " << names.size() << " entries, the first " << (names.empty() ? "" : names.front()));
  CHECK(names == std::vector<std::string>{"ckpt.safetensors"});
  const nn::Safetensors loaded = nn::load_safetensors(path);  // whole: the old one or a complete new one
  CHECK(loaded.tensors.size() == 1);
}

TEST_CASE("the temporaries of dead writers are removed at the next save; live writers' are kept", "[nn][safetensors]") {
  const fs::path dir = scratch_dir("stale");
  const fs::path path = dir / "ckpt.safetensors";
  const pid_t gone = ::fork();  // a pid that no longer runs
  REQUIRE(gone >= 0);
  if (gone == 0) std::_Exit(0);
  ::waitpid(gone, nullptr, 0);
  auto touch = [&](const std::string& name) { std::ofstream(dir / name) << "partial"; };
  const std::string dead = ".ckpt.safetensors.tmp." + std::to_string(gone) + ".a1b2c3";
  const std::string alive = ".ckpt.safetensors.tmp.1.d4e5f6";  // pid 1 runs as long as the machine does
  const std::string other = ".other.safetensors.tmp." + std::to_string(gone) + ".x";  // another file's
  touch(dead), touch(alive), touch(other);
  nn::save_safetensors(path, {{"w", ones({2})}});
  CHECK_FALSE(fs::exists(dir / dead));
  CHECK(fs::exists(dir / alive));
  CHECK(fs::exists(dir / other));
  CHECK(fs::exists(path));
}
