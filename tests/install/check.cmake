# cmake -DBUILD_DIR=... -DWORK=... -DCXX_COMPILER=... -DCXX_FLAGS=... -P check.cmake: install the build into WORK/prefix, then configure,
# build and run the consumer project against it. Fails on the first step that fails.
file(REMOVE_RECURSE ${WORK})
foreach(step IN ITEMS install configure build run)
  if(step STREQUAL "install")
    set(cmd ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
  elseif(step STREQUAL "configure")
    # The same compiler and flags as the library (a sanitizer build's library needs its runtime).
    set(cmd ${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix
            -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
  elseif(step STREQUAL "build")
    set(cmd ${CMAKE_COMMAND} --build ${WORK}/build)
  else()
    set(cmd ${WORK}/build/consumer)
  endif()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "consumer: ${out}")
