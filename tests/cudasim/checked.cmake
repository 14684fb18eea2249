# The checking build (preset cudasim-check; included by tests/CMakeLists.txt). The known-bad kernels of
# test_checks.cpp and the hand-countable ones of test_profile.cpp are instrumented like the project's own;
# cuda-sim's tests run as in the plain build.
target_sources(cudasim_tests PRIVATE cudasim/test_checks.cpp cudasim/test_profile.cpp)
set_property(SOURCE cudasim/test_checks.cpp cudasim/test_profile.cpp APPEND
             PROPERTY COMPILE_OPTIONS ${STEPFORMER_CUDASIM_CHECK_FLAGS})
catch_discover_tests(cudasim_tests TEST_PREFIX "checked/")

# Every kernel of the project, through the op suite and cuda_tests, with racecheck, memcheck, initcheck and
# synccheck on (a report fails the launch, so the test), under four schedules.
set(schedule_number 0)
foreach(schedule forward reverse random:1 random:2)
  math(EXPR schedule_number "${schedule_number} + 1")
  foreach(program autograd_tests cuda_tests)
    set(spec "*")
    if(program STREQUAL "autograd_tests")
      set(spec "[gradcheck],[values],[oracle]")
    endif()
    # EXTRA_ARGS differ per schedule only so that catch_discover_tests keeps their generated files apart.
    catch_discover_tests(${program} TEST_SPEC "${spec}" TEST_PREFIX "checked ${schedule}/"
      EXTRA_ARGS --order decl --rng-seed ${schedule_number}
      PROPERTIES ENVIRONMENT "STEPFORMER_TEST_DEVICE=cuda-sim ${schedule}"
                 ENVIRONMENT_MODIFICATION "STEPFORMER_CUDASIM_CHECK=set:all" LABELS cudasim-check)
  endforeach()
endforeach()

# The kernel ladders' counts (docs/09_cuda.md, "Kernel ladders"): bench/ladder_bench, built here because only
# this build counts; `ladder_bench counts every version` runs it, so its tables cannot rot.
find_package(CLI11 REQUIRED)
add_executable(ladder_bench ${PROJECT_SOURCE_DIR}/bench/ladder_bench.cpp)
target_link_libraries(ladder_bench PRIVATE CLI11::CLI11 stepformer::autograd stepformer::cudasim fmt::fmt stepformer_warnings)
target_include_directories(ladder_bench PRIVATE ${PROJECT_SOURCE_DIR}/autograd/backends/cuda
                                                ${PROJECT_SOURCE_DIR}/bench ${PROJECT_SOURCE_DIR}/tests/cuda)
target_compile_definitions(ladder_bench PRIVATE STEPFORMER_CUDA_NS=cuda_sim)
add_test(NAME "ladder_bench counts every version" COMMAND ladder_bench)
# A pass pattern alone would let a wrong version pass: WRONG fails it.
set_tests_properties("ladder_bench counts every version" PROPERTIES LABELS cudasim-check
                     PASS_REGULAR_EXPRESSION "transpose_v2<float>.*transpose_kernel<float>.*gemm_v4<float>.*gemm_v5<float, "
                     FAIL_REGULAR_EXPRESSION "WRONG")
