"""Export a fine-tuned MobileNetV3 classifier to ONNX and check parity with onnxruntime."""
import argparse

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", default="mobilenet_v3_small.onnx")
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()

    model = torchvision.models.mobilenet_v3_small(num_classes=args.num_classes)
    state = torch.load(args.ckpt, map_location="cpu")
    model.load_state_dict(state["model_state_dict"])
    model.eval()

    dummy = torch.randn(1, 3, 224, 224)
    torch.onnx.export(
        model,
        dummy,
        args.out,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        opset_version=args.opset,
        do_constant_folding=True,
    )
    onnx_model = onnx.load(args.out)
    onnx.checker.check_model(onnx_model)
    print(f"exported {args.out} (opset {args.opset})")

    # parity check on a fresh, reproducible batch
    torch.manual_seed(0)
    x = torch.randn(8, 3, 224, 224)
    torch_out = model(x)
    sess = ort.InferenceSession(args.out, providers=["CPUExecutionProvider"])
    ort_out = sess.run(None, {"input": x.numpy()})[0]
    np.testing.assert_allclose(torch_out.detach().numpy(), ort_out, rtol=1e-3, atol=1e-4)
    max_diff = np.abs(torch_out.detach().numpy() - ort_out).max()
    print(f"parity OK, max abs diff {max_diff:.2e}")


if __name__ == "__main__":
    main()
