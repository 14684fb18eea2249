# The WebAssembly build (preset `wasm`, Debian's emscripten): the engine and the chapter demos for the book's
# pages (tools/book/wasm/). One thread, no SIMD beyond what clang derives for WASM SIMD, the cpu and reference
# devices only. The Debian packages' libraries are built for the host, not for wasm32, so this file stands in
# for their find_package calls: fmt, CLI11 and nlohmann/json are used header-only from /usr/include (through a
# folder that holds only their links, so that glibc's headers never meet emscripten's libc); OpenMP is one
# thread (cmake/wasm/omp.h; `omp simd` stays, the other pragmas are ignored); zlib and SentencePiece are absent
# (transformer/src/without_libraries.cpp); cuda-sim's fibers switch stacks in x86-64 assembly and are absent.
set(STEPFORMER_WASM ON)
set(STEPFORMER_WITH_CUDA OFF)
set(STEPFORMER_WITH_MPI OFF)
set(STEPFORMER_BUILD_TESTS OFF)
set(STEPFORMER_BUILD_BENCHMARKS OFF)
set(STEPFORMER_BUILD_FUZZERS OFF)

set(headers ${CMAKE_BINARY_DIR}/debian-headers)
file(MAKE_DIRECTORY ${headers})
foreach(dir fmt CLI nlohmann)
  if(NOT EXISTS /usr/include/${dir})
    message(FATAL_ERROR "the wasm build reads /usr/include/${dir}: install libfmt-dev, libcli11-dev, nlohmann-json3-dev")
  endif()
  file(CREATE_LINK /usr/include/${dir} ${headers}/${dir} SYMBOLIC)
endforeach()

add_library(fmt::fmt INTERFACE IMPORTED)
target_include_directories(fmt::fmt SYSTEM INTERFACE ${headers})
target_compile_definitions(fmt::fmt INTERFACE FMT_HEADER_ONLY)
add_library(CLI11::CLI11 INTERFACE IMPORTED)
target_include_directories(CLI11::CLI11 SYSTEM INTERFACE ${headers})
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE ${headers})
add_library(OpenMP::OpenMP_CXX INTERFACE IMPORTED)
target_include_directories(OpenMP::OpenMP_CXX SYSTEM INTERFACE ${CMAKE_CURRENT_LIST_DIR}/wasm)
target_compile_options(OpenMP::OpenMP_CXX INTERFACE -fopenmp-simd)

# Every object: WASM SIMD (Chromium and node have it since 2021) and C++ exceptions (the typed errors are
# caught and printed; emscripten's default aborts on the first throw). Every program: a growing heap, a main
# that the page calls with the form's arguments (callMain), the in-memory file system the demos write their SVGs
# to, and the wasm inside the .js (SINGLE_FILE): a page opened from disk may load a script but not fetch a file.
# Linking at -O1 (the objects stay -O2): at -O2 each program's link runs Binaryen's optimiser, 30 s of CPU
# against 1.5 s, for a file 9% smaller and no measured speed-up (07_transformer toy in node: 3.1-3.7 s either way).
add_compile_options(-msimd128 -fexceptions)
add_link_options(-O1 -fexceptions -sALLOW_MEMORY_GROWTH=1 -sMODULARIZE=1 -sINVOKE_RUN=0 -sEXIT_RUNTIME=1
                 -sFORCE_FILESYSTEM=1 "-sEXPORTED_RUNTIME_METHODS=['callMain','FS']" -sSINGLE_FILE=1
                 -sENVIRONMENT=web,worker,node)
