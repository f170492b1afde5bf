# shaped after khushi-411/learnings:pytorch/doc_codes/eg4.py (rewritten, not copied)
"""Latency of a compiled ResNet-18 at several batch sizes."""
import time

import torch
from torchvision.models import ResNet18_Weights, resnet18


def init_model():
    return resnet18(weights=ResNet18_Weights.DEFAULT).to(torch.float32).cuda()


def bench(fn, inp, iters=50):
    for _ in range(5):
        fn(inp)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(inp)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def main():
    model = init_model()
    model_opt = torch.compile(model, mode="max-autotune")
    with torch.inference_mode():
        warm = model_opt(torch.randn(1, 3, 224, 224, device="cuda"))
        print("warm-up output", tuple(warm.shape))
        for bs in (1, 8, 32, 128):
            x = torch.randn(bs, 3, 224, 224, device="cuda")
            print(f"batch {bs:4d}: {bench(model_opt, x) * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
