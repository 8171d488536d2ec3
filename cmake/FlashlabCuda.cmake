# cmake/FlashlabCuda.cmake — CUDA sources of libflashlab, each with its own architectures.
#
#   flashlab_cuda_sources(ARCHS 80 90a SOURCES a.cu b.cu)
#
# adds the sources to the flashlab target and compiles each for exactly the given architectures
# (-gencode=arch=compute_X,code=sm_X per entry; "90a" is the arch-specific form wgmma needs). The
# CUDA implementations pass their own list (src/cuda/CMakeLists.txt): sm80 and the learning
# kernels every FLASHLAB_CUDA_ARCHS entry; a Hopper-only implementation 90a alone.
function(flashlab_cuda_sources)
  cmake_parse_arguments(ARG "" "" "ARCHS;SOURCES" ${ARGN})
  set(_flags "")
  foreach(arch IN LISTS ARG_ARCHS)
    list(APPEND _flags "-gencode=arch=compute_${arch},code=sm_${arch}")
  endforeach()
  target_sources(flashlab PRIVATE ${ARG_SOURCES})
  set_property(SOURCE ${ARG_SOURCES} TARGET_DIRECTORY flashlab APPEND PROPERTY COMPILE_OPTIONS ${_flags})
endfunction()
