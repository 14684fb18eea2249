// safetensors reading and writing. Format: https://github.com/huggingface/safetensors (README, "Format").
#include "nn/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/ops.h"
#include "files/atomic_write.h"

namespace stepformer::nn {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping here");

namespace {

using json = nlohmann::json;
constexpr std::uint64_t kMaxHeader = 100'000'000;  // the format's own limit on the header's size

struct Code {
  const char* name;
  DType dtype;
};
constexpr Code kCodes[] = {{"F32", DType::float32},
                           {"F64", DType::float64},
                           {"I64", DType::int64},
                           {"BOOL", DType::boolean},
                           {"BF16", DType::bfloat16}};

const char* code_of(DType t) {
  for (const Code& c : kCodes)
    if (c.dtype == t) return c.name;
  return "?";
}

// An error about `source`, e.g. "load_safetensors: model.safetensors: header length ... ".
[[noreturn]] void fail(std::string_view source, const std::string& what) {
  throw CheckpointError(fmt::format("safetensors: {}: {}", source, what));
}

std::uint64_t read_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

std::uint64_t checked_uint(const json& v, std::string_view source, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    fail(source, fmt::format("{} must be a non-negative integer, got {}", what, v.dump()));
  return v.get<std::uint64_t>();
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const json& v, std::uint64_t data_size, std::string_view source) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (!v.is_object()) fail(source, where + " must be an object with dtype, shape and data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!v.contains(key)) fail(source, fmt::format("{} has no \"{}\"", where, key));
  if (!v["dtype"].is_string()) fail(source, where + ": dtype must be a string");
  const std::string code = v["dtype"].get<std::string>();
  const Code* found = std::find_if(std::begin(kCodes), std::end(kCodes), [&](const Code& c) { return code == c.name; });
  if (found == std::end(kCodes)) {
    std::string known;
    for (const Code& c : kCodes) known += (known.empty() ? "" : ", ") + std::string(c.name);
    fail(source, fmt::format("{} has dtype {}, which stepformer does not load ({})", where, code, known));
  }
  Entry e{name, found->dtype, {}, 0, 0};

  if (!v["shape"].is_array() || v["shape"].size() > static_cast<std::size_t>(kMaxDims))
    fail(source, fmt::format("{}: shape must be an array of at most {} sizes", where, kMaxDims));
  std::uint64_t bytes = element_size(e.dtype);
  for (const json& d : v["shape"]) {
    const std::uint64_t size = checked_uint(d, source, where + " shape entry");
    // Each size a Shape can hold (int64), even where another size is 0 and the byte count stays 0.
    if (size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
        (size != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / size))
      fail(source, fmt::format("{}: shape {} overflows", where, v["shape"].dump()));
    bytes *= size;
    e.shape.push_back(static_cast<std::int64_t>(size));
  }
  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2) fail(source, where + ": data_offsets must be [begin, end]");
  e.begin = checked_uint(off[0], source, where + " data_offsets[0]");
  e.end = checked_uint(off[1], source, where + " data_offsets[1]");
  if (e.begin > e.end || e.end > data_size)
    fail(source, fmt::format("{}: data_offsets [{}, {}] lie outside the data buffer of {} bytes", where, e.begin, e.end,
                             data_size));
  if (e.end - e.begin != bytes)
    fail(source, fmt::format("{}: {} {} needs {} bytes, data_offsets [{}, {}] hold {}", where, code, to_string(e.shape),
                             bytes, e.begin, e.end, e.end - e.begin));
  return e;
}

json parse_header(std::string_view text, std::string_view source) {
  // Duplicate names would make the file ambiguous: detect them while parsing (depth 1 = tensor names).
  std::set<std::string> names;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, on_event);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too big for a double
    fail(source, fmt::format("the header is not valid JSON ({})", e.what()));
  }
  if (!duplicate.empty()) fail(source, fmt::format("the header names '{}' twice", duplicate));
  if (!header.is_object()) fail(source, "the header must be a JSON object");
  return header;
}

}  // namespace

std::vector<std::byte> serialize_safetensors(const StateDict& tensors, const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name, so the layout is deterministic
    if (name == "__metadata__") throw CheckpointError("safetensors: '__metadata__' cannot name a tensor");
    const std::uint64_t bytes = static_cast<std::uint64_t>(t.numel()) * element_size(t.dtype());
    header[name] = {{"dtype", code_of(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the reference writer does
  std::vector<std::byte> out(8 + text.size() + offset);
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<std::byte>((text.size() >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* data = out.data() + 8 + text.size();
  for (const auto& [name, t] : tensors) {
    const Tensor c = contiguous(t.cpu());
    const std::size_t bytes = static_cast<std::size_t>(c.numel()) * element_size(c.dtype());
    if (bytes) std::memcpy(data, c.desc().data, bytes);
    data += bytes;
  }
  return out;
}

Safetensors parse_safetensors(std::span<const std::byte> bytes, std::string_view source) {
  if (bytes.size() < 8) fail(source, fmt::format("{} bytes is too short for the 8-byte header length", bytes.size()));
  const std::uint64_t n = read_u64_le(bytes.data());
  if (n > kMaxHeader) fail(source, fmt::format("header length {} exceeds the format's limit of {}", n, kMaxHeader));
  if (n > bytes.size() - 8)
    fail(source, fmt::format("header length {} points past the end of the file ({} bytes)", n, bytes.size()));
  const auto header_bytes = static_cast<std::size_t>(n);  // below kMaxHeader: fits a 32-bit size_t (wasm32)
  const json header = parse_header({reinterpret_cast<const char*>(bytes.data() + 8), header_bytes}, source);
  const std::span<const std::byte> data = bytes.subspan(8 + header_bytes);

  Safetensors result;
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail(source, "__metadata__ must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail(source, fmt::format("__metadata__ value of '{}' is not a string", k));
        result.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, v, data.size(), source));
  }
  // The data buffer must be covered exactly: no two tensors share a byte, and no byte is left over.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      fail(source, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", previous->name, previous->begin,
                               previous->end, e.name, e.begin, e.end));
    if (e.begin > covered) fail(source, fmt::format("data bytes [{}, {}] belong to no tensor", covered, e.begin));
    covered = e.end;
    previous = &e;
  }
  if (covered != data.size())
    fail(source, fmt::format("data bytes [{}, {}] belong to no tensor", covered, data.size()));

  for (const Entry& e : entries) {
    const std::byte* src = data.data() + e.begin;
    if (e.dtype == DType::boolean)
      for (std::uint64_t i = 0; i < e.end - e.begin; ++i)
        if (src[i] != std::byte{0} && src[i] != std::byte{1})
          fail(source, fmt::format("tensor '{}': BOOL byte {} is {}, not 0 or 1", e.name, i, static_cast<int>(src[i])));
    Tensor t = empty(e.shape, {e.dtype});
    if (e.end > e.begin) t.backend().copy_from_host(t.desc().data, src, e.end - e.begin);
    result.tensors.emplace(e.name, t);
  }
  return result;
}

// The one writer of files (files/atomic_write.h), its failures as the IoError every nn loader and saver raises.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  try {
    files::write_atomically(path, bytes);
  } catch (const std::system_error& e) {
    throw IoError(e.what());
  }
}

void save_safetensors(const std::filesystem::path& path, const StateDict& tensors, const Metadata& metadata) {
  const std::vector<std::byte> bytes = serialize_safetensors(tensors, metadata);
  write_file_atomically(path, bytes);
}

// Only a regular file is read: a directory, a FIFO or a device is an IoError naming it. O_NONBLOCK keeps
// open() from waiting for a FIFO's writer; fstat on the open descriptor decides (no race with a rename).
Safetensors load_safetensors(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw IoError(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode), fifo = S_ISFIFO(st.st_mode);
    ::close(fd);
    throw IoError(fmt::format("cannot load {}: it is {}, not a regular file", path.string(),
                              dir    ? "a directory"
                              : fifo ? "a FIFO"
                                     : "a special file"));
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size));
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // an error, or the file shrank while we read it
      const std::string reason = n < 0 ? std::strerror(errno) : "the file ended early";
      ::close(fd);
      throw IoError(fmt::format("cannot read {}: {}", path.string(), reason));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return parse_safetensors(bytes, path.string());
}

}  // namespace stepformer::nn
