# shaped after leideng/AI-primer:pytorch/torch.compile/torch_compile_ex1.py (rewritten, not copied)
"""Eager vs torch.compile latency for DenseNet-121 inference (speed only, bits not compared)."""
import torch
from torchvision.models import DenseNet121_Weights, densenet121

torch.manual_seed(0)
# a throughput benchmark: TF32 and autotuning are wanted here
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True

N_ITERS = 20


def timed(fn):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    result = fn()
    end.record()
    torch.cuda.synchronize()
    return result, start.elapsed_time(end) / 1000


def init_model():
    return densenet121(weights=DenseNet121_Weights.DEFAULT).eval().cuda()


model = init_model()
model_opt = torch.compile(model, mode="reduce-overhead")
inp = torch.randn(16, 3, 224, 224, device="cuda")

with torch.no_grad():
    eager = [timed(lambda: model(inp))[1] for _ in range(N_ITERS)]
    compiled = [timed(lambda: model_opt(inp))[1] for _ in range(N_ITERS)]

print(f"eager median    {sorted(eager)[N_ITERS // 2] * 1e3:.2f} ms")
print(f"compiled median {sorted(compiled)[N_ITERS // 2] * 1e3:.2f} ms (first call {compiled[0]:.2f} s)")
