// flashlab/config.h — macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define FLASHLAB_HD __host__ __device__ __forceinline__
#else
#define FLASHLAB_HD inline
#endif

#define FLASHLAB_VERSION_MAJOR 0
#define FLASHLAB_VERSION_MINOR 1
#define FLASHLAB_VERSION_PATCH 0
#define FLASHLAB_VERSION_STRING "0.1.0"
