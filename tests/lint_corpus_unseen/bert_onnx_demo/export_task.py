# shaped after Tongjilibo/bert4torch:examples/others/task_onnx.py (rewritten, not copied)
"""Export the fine-tuned sentiment model to ONNX and check ONNX Runtime on a few sentences."""
import numpy as np
import onnx
import onnxruntime
import torch

from build_model import model as torch_model
from build_model import tokenizer

SAMPLES = ["这家店的菜很好吃", "服务太差了，再也不来", "还行吧，一般般"]
OUT = "sentiment.onnx"

x = torch.tensor([tokenizer.encode(SAMPLES[0])[0]])
torch.onnx.export(torch_model, x, OUT, export_params=True, opset_version=14, do_constant_folding=True,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch_size", 1: "seq_len"}, "output": {0: "batch_size"}})
onnx.checker.check_model(onnx.load(OUT))
session = onnxruntime.InferenceSession(OUT)


def to_numpy(t):
    return t.detach().cpu().numpy() if t.requires_grad else t.cpu().numpy()


for text in SAMPLES:
    ids = torch.tensor([tokenizer.encode(text)[0]])
    torch_out = torch_model(ids)
    ort_out = session.run(None, {session.get_inputs()[0].name: to_numpy(ids)})[0]
    np.testing.assert_allclose(to_numpy(torch_out), ort_out, rtol=1e-3, atol=1e-5)
    print(text, "->", int(ort_out.argmax(-1)[0]))
print("ONNX Runtime matches PyTorch")
