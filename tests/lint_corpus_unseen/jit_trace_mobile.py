# shaped after cedrickchee/pytorch-mobile-kit:model/mobilenet_v2_torchscript_mod.py (rewritten, not copied)
"""Trace MobileNetV2 for the Android demo and check the traced module against eager."""
import torch
import torchvision
from torch.utils.mobile_optimizer import optimize_for_mobile

OUT = "app/src/main/assets/mobilenet_v2.ptl"


def main():
    model = torchvision.models.mobilenet_v2(weights=torchvision.models.MobileNet_V2_Weights.IMAGENET1K_V1)
    model.eval()

    example = torch.rand(1, 3, 224, 224)
    traced = torch.jit.trace(model, example)
    mobile = optimize_for_mobile(traced)
    mobile._save_for_lite_interpreter(OUT)

    check = torch.rand(4, 3, 224, 224)
    with torch.no_grad():
        eager_out = model(check)
        traced_out = traced(check)
    max_diff = (eager_out - traced_out).abs().max().item()
    print(f"saved {OUT}; max |eager - traced| = {max_diff:.2e}")
    assert max_diff < 1e-4


if __name__ == "__main__":
    main()
