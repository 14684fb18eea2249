// Chapter 07: FreeDict's dictionary is dictzip, which is gzip with an index; zlib reads it whole.
#include <fmt/format.h>
#include <zlib.h>

#include <memory>

#include "nn/errors.h"
#include "transformer/freedict.h"

namespace stepformer::transformer {

std::string read_gzip_file(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path))
    throw nn::IoError(fmt::format("read_gzip_file: {} does not exist", path.string()));
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw nn::IoError(fmt::format("read_gzip_file: cannot open {}", path.string()));
  std::string text;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(file.get(), buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  int code = Z_OK;
  const char* reason = gzerror(file.get(), &code);  // a truncated stream ends reading without n < 0
  if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
    throw nn::IoError(fmt::format("read_gzip_file: {} is not valid gzip: {}", path.string(), reason));
  return text;
}

}  // namespace stepformer::transformer
