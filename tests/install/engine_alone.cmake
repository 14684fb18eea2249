# cmake -DSOURCE=... -DWORK=... -P engine_alone.cmake: the engine (stepformer::autograd and ::nn) is configured
# with STEPFORMER_BUILD_TRANSFORMER=OFF while no find_path or find_library can find anything (each search is
# rerooted into an empty directory): so it needs neither SentencePiece nor zlib, which only the transformer
# library uses. Its build files must hold the engine's libraries and not the transformer's, and no engine
# source may include either library's header.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/empty)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build -DSTEPFORMER_BUILD_TRANSFORMER=OFF
                        -DSTEPFORMER_CUDA=OFF -DSTEPFORMER_MPI=OFF -DCMAKE_FIND_ROOT_PATH=${WORK}/empty
                        -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the engine alone does not configure without libraries found by path (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build --target help OUTPUT_VARIABLE targets)
foreach(name stepformer_autograd stepformer_nn)
  if(NOT targets MATCHES "${name}[\r\n]")
    message(FATAL_ERROR "the engine alone has no target ${name}:\n${targets}")
  endif()
endforeach()
if(targets MATCHES "stepformer_transformer")
  message(FATAL_ERROR "STEPFORMER_BUILD_TRANSFORMER=OFF still builds stepformer_transformer")
endif()
file(GLOB_RECURSE sources ${SOURCE}/autograd/*.cpp ${SOURCE}/autograd/*.h ${SOURCE}/autograd/*.cu
     ${SOURCE}/nn/*.cpp ${SOURCE}/nn/*.h ${SOURCE}/files/*.cpp ${SOURCE}/files/*.h)
foreach(file ${sources})
  file(STRINGS ${file} includes REGEX "#include [<\"](sentencepiece|zlib)")
  if(includes)
    message(FATAL_ERROR "${file} is part of the engine and includes ${includes}")
  endif()
endforeach()
message(STATUS "the engine configures alone; no engine source includes SentencePiece or zlib")
