// Device memory. `cuda`: cudaMalloc behind a cache of freed blocks (cudaMalloc and cudaFree synchronise
// the device and cost tens of microseconds; PyTorch's caching allocator exists for the same reason).
// `cuda-sim`: cudasim::device_allocate's host memory — only the cuda-sim backend touches it, as only a GPU
// touches its own (in the checking build it is tracked: cudasim/check.h).
#include <cstdlib>
#include <cstring>
#include <string>

#include "autograd/backend.h"
#include "compat.cuh"
#include "cuda_backend.h"
#include "graph.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {
constexpr std::size_t kAlignment = 256;  // cudaMalloc's guarantee; cuda-sim gives the same

std::size_t rounded(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

std::string out_of_memory(std::size_t bytes, std::size_t in_use) {
  return std::string(device_type_name(backend().device().type)) + ": out of memory allocating " +
         std::to_string(bytes) + " bytes (" + std::to_string(in_use) + " in use)";
}
}  // namespace

std::size_t CudaBackend::kernel_launches() const { return launches.load(); }

#if defined(__CUDACC__)

Device CudaBackend::device() const { return Device{DeviceType::cuda, 0}; }

void* CudaBackend::allocate(std::size_t bytes) {
  const std::size_t size = rounded(bytes == 0 ? 1 : bytes);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(size);
    if (it != cache_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      bytes_in_use_ += size;
      if (recording_) graph_blocks_[p] = recording_;
      return p;
    }
  }
  void* p = nullptr;
  ++driver_allocations_;
  if (cudaMalloc(&p, size) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error, give the cache back, try once more
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      for (auto& [s, blocks] : cache_)
        for (void* b : blocks) cudaFree(b);
      cache_.clear();
    }
    if (cudaMalloc(&p, size) != cudaSuccess) {
      cudaGetLastError();
      throw ResourceError(out_of_memory(bytes, bytes_in_use()));
    }
  }
  bytes_in_use_ += size;
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (recording_) graph_blocks_[p] = recording_;
  return p;
}

void CudaBackend::free_block(void* ptr, std::size_t size) {
  cache_[size].push_back(ptr);
  bytes_in_use_ -= size;
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  refuse_copy_while_recording("from the host");
  ++host_waits_;
  STEPFORMER_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}
void CudaBackend::read_device(void* host_dst, const void* src, std::size_t bytes) {
  STEPFORMER_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}
void* CudaBackend::allocate_for_life(std::size_t bytes) {
  void* p = nullptr;
  STEPFORMER_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

CudaBackend& backend() {
  static CudaBackend* instance = [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0)
      throw DeviceError(std::string("cuda: no usable GPU on this machine (") +
                        (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") +
                        "); the same kernels run on the CPU with --device cuda-sim");
    return new CudaBackend;  // never destroyed: tensors may outlive static destruction order
  }();
  return *instance;
}

#else  // cuda-sim

Device CudaBackend::device() const { return Device{DeviceType::cuda_sim, 0}; }

void* CudaBackend::allocate(std::size_t bytes) {
  const std::size_t size = rounded(bytes == 0 ? 1 : bytes);
  // The exact size, not `size`: the checking build then sees a read one past a tensor's end as out of bounds.
  void* p = cudasim::device_allocate(bytes == 0 ? 1 : bytes);  // filled with 0xFF: a read before any write is NaN
  if (p == nullptr) throw ResourceError(out_of_memory(bytes, bytes_in_use()));
  bytes_in_use_ += size;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = kept_sizes_.find(size);
    if (it != kept_sizes_.end() && it->second > 0)
      --it->second;  // the GPU's cache would hand out a kept block
    else
      ++driver_allocations_;
    if (recording_) graph_blocks_[p] = recording_;
  }
  return p;
}

void CudaBackend::free_block(void* ptr, std::size_t size) {
  cudasim::device_free(ptr);
  bytes_in_use_ -= size;
  ++kept_sizes_[size];
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  refuse_copy_while_recording("from the host");
  ++host_waits_;
  cudasim::copy_to_device(dst, host_src, bytes);
}
void CudaBackend::read_device(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void* CudaBackend::allocate_for_life(std::size_t bytes) {
  // Device memory, as on a GPU (not in bytes_in_use: it lives as long as the backend).
  void* p = cudasim::device_allocate(bytes);
  if (p == nullptr) throw ResourceError(out_of_memory(bytes, bytes_in_use()));
  return p;
}

CudaBackend& backend() {
  static CudaBackend* instance = new CudaBackend;  // never destroyed, as the GPU one
  return *instance;
}

#endif

// A block a graph allocated stays the graph's after its tensor dies (graph.cu releases it).
void CudaBackend::deallocate(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  const std::size_t size = rounded(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (auto owner = graph_blocks_.find(ptr); owner != graph_blocks_.end()) {
    graphs_.at(owner->second)->unheld.emplace_back(ptr, size);
    graph_blocks_.erase(owner);
    return;
  }
  free_block(ptr, size);
}

void CudaBackend::refuse_copy_while_recording(const char* direction) const {
  if (recording_)
    throw DeviceError(std::string(device_type_name(device().type)) + ": a copy " + direction +
                      " while a graph is recorded (DeviceGraph): a replay runs without the host, so a recorded "
                      "function reads no values back and sends none; fill its inputs before replay() instead");
}

// The checks queued since the last copy (checks.cu) are read first, in the same wait: the copy after them finds
// nothing queued to wait for.
void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  refuse_copy_while_recording("to the host");
  ++host_waits_;
  report_bad_indices();
  read_device(host_dst, src, bytes);
}

}  // namespace stepformer::STEPFORMER_CUDA_NS

namespace stepformer {
// Looked up by backend_registry.cpp.
#if defined(__CUDACC__)
Backend& cuda_backend() { return cuda::backend(); }
#else
Backend& cuda_sim_backend() { return cuda_sim::backend(); }
#endif
}  // namespace stepformer
