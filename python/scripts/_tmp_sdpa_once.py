import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
q,k,v=(torch.randn(32,16,512,128,device="cuda",dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3): F.scaled_dot_product_attention(q,k,v,is_causal=True)
torch.cuda.synchronize()
