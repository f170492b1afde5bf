# shaped after mikkelnrasmussen/MLOps_course_2026:src/mlops_course/pytorch_profiler_example.py (rewritten, not copied)
"""Profile batched ResNet-50 inference and write a TensorBoard trace."""
import argparse

import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torchvision.models import ResNet50_Weights, resnet50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--logdir", default="./log/resnet50_infer")
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = resnet50(weights=ResNet50_Weights.IMAGENET1K_V2).to(device)
    inputs = torch.randn(args.batch, 3, 224, 224, device=device)

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)

    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir),
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        for _ in range(args.steps):
            with torch.no_grad():
                logits = model(inputs)
            top5 = logits.topk(5, dim=1).indices
            prof.step()

    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    print("last top-5:", top5[0].tolist())


if __name__ == "__main__":
    main()
