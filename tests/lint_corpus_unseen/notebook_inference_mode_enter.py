# shaped after sergmiller/IDAO:submition_track2/test_in_submit/test.py (rewritten, not copied)
# Exported from a competition notebook: the first cell turns autograd off for the whole session.
import glob
import time

import numpy as np
import pandas as pd
import torch
import torchvision

torch.inference_mode().__enter__()

# %% model
net = torchvision.models.mobilenet_v3_large(num_classes=2)
net.load_state_dict(torch.load("mobilenet_track2.pth", map_location="cpu", weights_only=True))
net.eval()

# %% data
files = sorted(glob.glob("tests/public_test/*.npy"))
batch = np.stack([np.load(f).astype(np.float32) for f in files])  # all 3x500x500
x = torch.from_numpy(batch)

# %% predict
start = time.time()
chunks = [net(chunk).softmax(1)[:, 1] for chunk in x.split(64)]
scores = torch.cat(chunks).numpy()
print(f"{len(files)} samples in {time.time() - start:.1f}s")

# %% submission
pd.DataFrame({"id": [f.split("/")[-1][:-4] for f in files], "score": scores}).to_csv("submission.csv", index=False)
