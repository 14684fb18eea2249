#pragma once
// The safetensors format (huggingface/safetensors), read and written by us:
//   8 bytes      N, the header's length, unsigned little-endian
//   N bytes      a JSON object: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//                with an optional "__metadata__": {string: string}; padded with spaces
//   rest         the tensors' bytes, little-endian, row-major; offsets are relative to this buffer
// Loading trusts nothing: the header length must fit the file (and 100 MB), the JSON must parse, each
// dtype be known here (F32, F64, I64, BOOL, BF16), each shape x dtype size equal its byte range, the ranges lie
// inside the buffer without overlapping or leaving holes. Every failure is a CheckpointError naming
// the file and the offending tensor.
#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/errors.h"
#include "nn/module.h"

namespace stepformer::nn {

using Metadata = std::map<std::string, std::string>;

struct Safetensors {
  StateDict tensors;  // on the CPU
  Metadata metadata;
};

std::vector<std::byte> serialize_safetensors(const StateDict& tensors, const Metadata& metadata = {});
Safetensors parse_safetensors(std::span<const std::byte> bytes, std::string_view source = "buffer");

// Atomic: writes the bytes to a temporary file in the same folder (unnamed while it is written, where the
// file system allows), fsyncs it, then renames it over `path`; if anything fails, or the process is
// killed, `path` is untouched and no temporary file stays behind (stale ones of dead writers are removed
// at the next write). Loading reads regular files only: any other path is an IoError naming it.
void save_safetensors(const std::filesystem::path& path, const StateDict& tensors, const Metadata& metadata = {});
Safetensors load_safetensors(const std::filesystem::path& path);

// Writes bytes to `path` atomically as above (files/atomic_write.h); a failure is an IoError.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace stepformer::nn
