// src/cuda/decode/decode.h — which CUDA decode kernel attention_with_kvcache runs (decode.cu).
//
// FLASHLAB_DECODE_KERNEL = "tile" (decode_tile_kernel.cuh: K/V through shared memory with a
// cp.async pipeline and mma.sync; the default since 2026-11-24, 1.8-2.7x v5 on an H100) or "v5"
// (decode_kernel.cuh's register loop), read once per process on first use; any other value is tile.
// A device without the tile kernel's shared memory for a head dim runs v5 there. The tests' A/B
// (tests/gpu/test_cuda_kvcache.cpp, Bandwidth) switches kernels in one process with
// set_decode_kernel(). kvcache_workspace_size() covers either kernel's split plan, so a workspace
// sized before a switch stays large enough.
#pragma once

namespace flashlab {
namespace detail {

enum class DecodeKernel { kV5, kTile };

DecodeKernel decode_kernel();                 // the environment's choice, or the last set_decode_kernel()
void set_decode_kernel(DecodeKernel kernel);  // test hook: overrides FLASHLAB_DECODE_KERNEL
const char* decode_kernel_name(DecodeKernel kernel);  // "v5" / "tile"

}  // namespace detail
}  // namespace flashlab
