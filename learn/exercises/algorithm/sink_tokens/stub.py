"""Exercise algorithm/sink_tokens — StreamingLLM sink tokens: which keys a row sees, which key blocks
a query block visits.

Mask: bottom-right causal (if causal) and a left window (window_left, -1 = unbounded), so row i sees
keys [lo_i, hi_i] (algorithm/window_interval with right = 0 if causal else -1; empty when hi_i <
lo_i). Sink tokens (sink_tokens = n >= 0) add the first keys of the sequence: row i also sees keys
[0, s_i) with

    s_i = min(n, lo_i, hi_i + 1)      (0 if that is negative)

left of its window only, and never right of its own right bound: causality holds for the sinks too
(docs/design/sink-tokens.md). Without a left window lo_i = 0, so the sinks change nothing.

  * sink_keys(i, ...)  -> s_i
  * key_blocks(...)    -> the ascending key-block indices (blocks of block_k keys) that query block
                          q_block (rows [q_block*block_q, min((q_block+1)*block_q, Nq))) must visit:
                          every block holding a key some row of the block sees, each block ONCE, and
                          no other block. lo_i, hi_i and s_i never decrease with i, so the first and
                          last rows bound the two ranges (algorithm/block_skipping); where the sink
                          range and the window range meet or overlap they are one range.
"""


def sink_keys(i, seqlen_q, seqlen_k, causal, window_left, sink_tokens):
    """s_i: row i also sees keys [0, s_i)."""
    raise NotImplementedError


def key_blocks(q_block, block_q, block_k, seqlen_q, seqlen_k, causal, window_left, sink_tokens):
    """Ascending list of the key blocks query block q_block visits (each once)."""
    raise NotImplementedError
