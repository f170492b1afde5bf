# shaped after 98munozpatricia/Melanoma:dynamicQuant.py (rewritten, not copied)
"""Size and CPU latency of the melanoma classifier: fp32 vs dynamic int8 vs dynamic fp16."""
import os
from timeit import default_timer as timer

import torch
from torch.utils.data import DataLoader

from melanoma.data import MelanomaTestSet


def print_size_of_model(model, tag):
    torch.save(model.state_dict(), "temp.p")
    print(f"{tag}: {os.path.getsize('temp.p') / 1e6:.1f} MB")
    os.remove("temp.p")


def timed_predict(model, loader, n):
    preds = torch.zeros(n, 1)
    start = timer()
    with torch.no_grad():
        for i, x_test in enumerate(loader):
            x_test = x_test.float()
            z_test = torch.sigmoid(model(x_test))
            preds[i * loader.batch_size:i * loader.batch_size + x_test.shape[0]] += z_test
    return preds, timer() - start


def dynamic_quantization(model_path, csv_path):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    device = torch.device("cpu")
    # the checkpoint is a whole pickled nn.Module (torch.save(model)), not a state dict
    model_fp32 = torch.load(model_path, map_location=device, weights_only=False)
    print_size_of_model(model_fp32, "fp32")
    model_int8 = torch.quantization.quantize_dynamic(model_fp32, {torch.nn.Linear}, dtype=torch.qint8)
    model_fp16 = torch.quantization.quantize_dynamic(model_fp32, {torch.nn.Linear}, dtype=torch.float16)
    print_size_of_model(model_int8, "int8")
    print_size_of_model(model_fp16, "fp16")

    test_set = MelanomaTestSet(csv_path)
    loader = DataLoader(test_set, batch_size=64, shuffle=False, num_workers=2)
    for tag, m in [("fp32", model_fp32), ("int8", model_int8), ("fp16", model_fp16)]:
        m.to(device)
        preds, secs = timed_predict(m, loader, len(test_set))
        print(f"{tag}: {secs:.2f}s, mean p={preds.mean():.4f}")


if __name__ == "__main__":
    dynamic_quantization("models/effnet_b0_fold0.pth", "data/test.csv")
