"""Mutant: O's staging tile counted for one warpgroup's 64 rows, not the CTA's block_m."""

ELEMENT_BYTES = 2  # bf16 / fp16


def smem_bytes(head_dim, block_m, block_n, stages):
    q = block_m * head_dim * ELEMENT_BYTES
    kv = 2 * stages * block_n * head_dim * ELEMENT_BYTES  # K and V, each `stages` buffers
    return q + kv


def separate_o(head_dim, block_m, block_n, stages, limit, barriers):
    o = 64 * head_dim * ELEMENT_BYTES
    return smem_bytes(head_dim, block_m, block_n, stages) + o + barriers <= limit


def accumulator_registers(head_dim, block_n):
    s = 64 * block_n // 128  # fp32, one register each
    p = s // 2               # 16-bit, two per register
    o = 64 * head_dim // 128
    return s + p + o
