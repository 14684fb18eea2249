#pragma once
// OpenMP's runtime calls for the one-threaded WebAssembly build (cmake/wasm.cmake): emscripten has no OpenMP
// runtime, and a page's WebAssembly runs on one thread unless it is served cross-origin isolated. The parallel
// regions run on that one thread, as they would under OMP_NUM_THREADS=1.
inline int omp_get_max_threads() { return 1; }
inline int omp_get_num_threads() { return 1; }
inline int omp_get_thread_num() { return 0; }
inline void omp_set_num_threads(int) {}
