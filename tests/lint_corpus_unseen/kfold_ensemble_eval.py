# shaped after ivanpanshin/field_area_segmentation:bash_scripts/test_seresnext_1stage.sh (rewritten, not copied)
"""Average five fold checkpoints of a timm classifier over the test set and write a submission."""
import glob
import random

import numpy as np
import pandas as pd
import timm
import torch
from torch.utils.data import DataLoader

from leaf_data import LeafTestDataset, test_transforms

SEED = 42
random.seed(SEED)
np.random.seed(SEED)
torch.manual_seed(SEED)
gen = torch.Generator().manual_seed(SEED)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

models = []
for ckpt in sorted(glob.glob("checkpoints/fold*_best.pth")):
    m = timm.create_model("tf_efficientnet_b3_ns", pretrained=False, num_classes=5)
    m.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
    m.eval()
    models.append(m.to(device))
print(f"{len(models)} folds loaded")

df = pd.read_csv("sample_submission.csv")
ds = LeafTestDataset(df, "test_images", transforms=test_transforms(512))
loader = DataLoader(ds, batch_size=32, shuffle=False, num_workers=4, generator=gen)

probs = []
with torch.no_grad():
    for images in loader:
        images = images.to(device)
        fold_probs = [m(images).softmax(1) for m in models]
        probs.append(torch.stack(fold_probs).mean(0).cpu().numpy())

df["label"] = np.concatenate(probs).argmax(1)
df.to_csv("submission.csv", index=False)
