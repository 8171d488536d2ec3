// src/cuda/common/static_switch.h — runtime flag -> template parameter, in one place.
//
// Two levels pick the kernel of a call, each in exactly one switch:
//   dtype x head-dim bucket   api_<arch>.cpp: a table of the generated instantiations (run_fwd<T, D>)
//                             that this build compiled (FLASHLAB_HEAD_DIMS / FLASHLAB_DTYPES).
//   runtime flags             <arch>/fwd_launch.h run_fwd(): FLASHLAB_BOOL_SWITCH per flag. Only
//                             dropout is a template flag: its Philox code costs registers even when
//                             skipped. Masks, softcap and ALiBi are data (variant.h explains why), so
//                             an instantiation compiles two kernels, not dozens.
#pragma once

// FLASHLAB_BOOL_SWITCH(cond, kName, [&] { return f<kName>(); }) calls the lambda with kName a
// constexpr bool equal to cond, and returns its result.
#define FLASHLAB_BOOL_SWITCH(COND, CONST_NAME, ...) \
  [&] {                                             \
    if (COND) {                                     \
      constexpr static bool CONST_NAME = true;      \
      return __VA_ARGS__();                         \
    } else {                                        \
      constexpr static bool CONST_NAME = false;     \
      return __VA_ARGS__();                         \
    }                                               \
  }()
