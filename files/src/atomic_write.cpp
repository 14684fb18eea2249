// The one way this project writes a file: see files/atomic_write.h.
#include "files/atomic_write.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

namespace stepformer::files {

namespace {

// Temporary files are named ".<target>.tmp.<pid>.<random>", in the target's folder (a rename across file
// systems is not atomic). The pid says whose it is: one whose writer no longer runs is stale.
std::string temp_prefix(const std::filesystem::path& path) { return "." + path.filename().string() + ".tmp."; }

// Removes the temporaries of `path` left by writers that died (a SIGKILL, a power cut) before they could
// clean up; a crashed run must not fill the disk one checkpoint at a time. Only this machine's processes
// can be asked, so a pid that is alive here (or that we may not signal) is left alone.
void remove_stale_temporaries(const std::filesystem::path& dir, const std::filesystem::path& path) {
  const std::string prefix = temp_prefix(path);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>.<random>"
    const auto dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || rest.find_first_not_of("0123456789") != dot) continue;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

// The bytes go into an unnamed temporary file (O_TMPFILE) while they are written and synced, so a writer
// killed at that point leaves nothing behind; the file gets a name (linkat) only for the instant before
// the rename. Where the file system has no O_TMPFILE, a named temporary is written instead, and the stale
// ones of dead writers are removed at the next write of the same path.
void write_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  remove_stale_temporaries(dir, path);
  std::string tmp = (dir / (temp_prefix(path) + std::to_string(::getpid()) + ".XXXXXX")).string();
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  const bool unnamed = fd >= 0;
  if (!unnamed) fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw std::system_error(errno, std::generic_category(), "cannot create a temporary file in " + dir.string());
  bool named = !unnamed;  // whether `tmp` exists on disk and must be removed on failure
  auto give_up = [&](const char* what) {
    const int error = errno;  // what failed, not the clean-up
    if (fd >= 0) ::close(fd);
    if (named) ::unlink(tmp.c_str());
    throw std::system_error(error, std::generic_category(), "cannot write " + path.string() + ": " + what + " failed");
  };
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) give_up("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) give_up("chmod");  // mkstemp makes 0600; a checkpoint is an ordinary file
  if (::fsync(fd) != 0) give_up("fsync");
  if (unnamed) {  // name it now: mkstemp's pattern, through /proc (linkat with AT_EMPTY_PATH needs privileges)
    const int probe = ::mkstemp(tmp.data());
    if (probe < 0) give_up("naming the temporary file");
    ::close(probe);
    ::unlink(tmp.c_str());
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) give_up("linkat");
    named = true;
  }
  const int closing = fd;
  fd = -1;
  if (::close(closing) != 0) give_up("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) give_up("rename");
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dfd >= 0) {  // make the rename durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_atomically(const std::filesystem::path& path, std::string_view text) {
  write_atomically(path, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace stepformer::files
