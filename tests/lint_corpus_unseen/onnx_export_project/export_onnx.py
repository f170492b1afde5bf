# shaped after jerryinlost/collection.2024:convert/pytorch2onnx.mobilenet_v2.py (rewritten, not copied)
"""Export the trained CIFAR-10 MobileNetV3 to ONNX and compare ONNX Runtime with PyTorch."""
import argparse

import numpy as np
import onnx
import onnxruntime as ort
import torch

import models


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default="runs/mbv3_cifar10/best.pt")
    ap.add_argument("--out", default="mbv3_cifar10.onnx")
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()

    m = models.MobileNetV3Small(num_classes=10)
    m.load_state_dict(torch.load(args.weights, map_location="cpu"))

    dummy = torch.randn(8, 3, 224, 224)
    torch.onnx.export(m, dummy, args.out, opset_version=args.opset,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    onnx.checker.check_model(onnx.load(args.out))

    with torch.no_grad():
        ref = m(dummy).numpy()
    sess = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": dummy.numpy()})[0]
    np.testing.assert_allclose(ref, got, rtol=1e-3, atol=1e-5)
    print(f"exported {args.out}; max abs diff {np.abs(ref - got).max():.2e}")


if __name__ == "__main__":
    main()
