# shaped after SkafteNicki/dtu_mlops:s7_scalable_applications/exercise_files/Quantization.py (rewritten, not copied)
"""Exercise: compare a float32 MLP with its dynamically quantized int8 copy."""
import time

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


# create a model instance and its quantized copy
model_fp32 = M()
model_int8 = torch.ao.quantization.quantize_dynamic(model_fp32, {torch.nn.Linear}, dtype=torch.qint8)

# fix the inputs so that both models see the same data
torch.manual_seed(0)
input_fp32 = torch.randn(32, 64)

res_fp32 = model_fp32(input_fp32)
res_int8 = model_int8(input_fp32)
print("max abs diff:", (res_fp32 - res_int8).abs().max().item())

t0 = time.time()
model_fp32(input_fp32)
t1 = time.time()
model_int8(input_fp32)
t2 = time.time()
print(f"fp32 {1e3 * (t1 - t0):.2f} ms, int8 {1e3 * (t2 - t1):.2f} ms")
