// A small pool of OS threads for run_on_threads (workers.h). Launches come thousands of times a second and
// are short, so a thread that finished its part spins a little on the job counter before it sleeps.
#include "workers.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "scheduler.h"

namespace cudasim::detail {

namespace {

class Pool {
 public:
  ~Pool() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void run(unsigned n, const std::function<void(unsigned)>& job) {
    while (threads_.size() + 1 < n) {
      const auto index = static_cast<unsigned>(threads_.size()) + 1;
      threads_.emplace_back([this, index] { serve(index); });
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job, helpers_ = n - 1;
      pending_.store(n - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job(0);
    while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }

 private:
  void serve(unsigned index) {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin a while (2000 pauses, some tens of microseconds) for the next launch before sleeping: waking a
      // sleeping thread costs more than many launches take. Measured on 2 cores, the toy demo on cuda-sim /
      // `ctest -j2 -L cuda-sim`: no spin 6.7 / 14.6 s, 500 pauses 6.4 / 15.6 s, 2000: 6.3 / 15.9 s, 4000: 6.1 / 19.4 s
      // (spinning takes a core from the other test).
      for (int spin = 0; spin < 2000 && generation_.load(std::memory_order_acquire) == seen; ++spin)
        __builtin_ia32_pause();
      const std::function<void(unsigned)>* job = nullptr;
      unsigned helpers = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return quit_ || generation_.load(std::memory_order_acquire) != seen; });
        if (quit_) return;
        seen = generation_.load(std::memory_order_acquire);
        job = job_, helpers = helpers_;
      }
      if (index > helpers) continue;  // this launch needs fewer threads
      (*job)(index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<unsigned> pending_{0};
  const std::function<void(unsigned)>* job_ = nullptr;
  unsigned helpers_ = 0;
  bool quit_ = false;
};

std::atomic<unsigned> chosen_threads{0};  // set_os_threads; 0: the default

unsigned default_threads() {
  static const unsigned n = [] {
    const char* env = std::getenv("STEPFORMER_CUDASIM_THREADS");
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      const unsigned long v = std::strtoul(env, &end, 10);
      if (end == env || *end != '\0' || v == 0 || v > 256)
        fail(std::string("STEPFORMER_CUDASIM_THREADS=") + env + ": expected a number of threads from 1 to 256");
      return static_cast<unsigned>(v);
    }
    return std::max(1u, std::thread::hardware_concurrency());
  }();
  return n;
}

}  // namespace

void run_on_threads(unsigned n, const std::function<void(unsigned)>& job) {
  if (n <= 1) {
    job(0);
    return;
  }
  static Pool pool;  // launches come from one host thread at a time (cuda-sim has one stream)
  pool.run(n, job);
}

}  // namespace cudasim::detail

namespace cudasim {

void set_os_threads(unsigned n) {
  if (n > 256) detail::fail(fmt::format("set_os_threads({}): at most 256", n));
  detail::chosen_threads = n;
}

unsigned os_threads() {
  const unsigned n = detail::chosen_threads;
  return n != 0 ? n : detail::default_threads();
}

}  // namespace cudasim
