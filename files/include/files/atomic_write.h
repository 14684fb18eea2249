#pragma once
// Writing a file so that a crash never leaves half of it: the bytes go to a temporary file in the target's
// folder, are fsynced, and the temporary is renamed over `path` (a rename within one file system is atomic),
// so a reader sees the old file or the new one. If anything fails, or the process is killed, `path` is
// untouched and no temporary stays behind (stale ones of dead writers are removed at the next write).
// Every file the project writes goes through here: checkpoints (nn/safetensors.h), tokenizer models, demo
// pictures, cuda-sim's profile, the exercise tool's workspace files.
//
// The lowest floor of the project (it depends on nothing of stepformer), so that cuda-sim, below the
// engine, and the tools beside it use the same writer. Failures throw std::system_error naming the path,
// the step that failed and errno's reason; nn turns them into its IoError.
#include <filesystem>
#include <span>
#include <string_view>

namespace stepformer::files {

void write_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);
void write_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace stepformer::files
