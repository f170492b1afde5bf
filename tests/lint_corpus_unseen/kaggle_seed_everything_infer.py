# shaped after dangnh0611/kaggle_rsna_breast_cancer:src/roi_det/YOLOX/yolox/utils/seed_all.py (rewritten, not copied)
"""Kaggle notebook turned script: predict cancer probability per image with a timm backbone."""
import os
import random

import numpy as np
import pandas as pd
import timm
import torch
from torch.utils.data import DataLoader

from rsna_data import MammoDataset, get_valid_transforms

CFG = {"seed": 2023, "model": "tf_efficientnetv2_s", "img": 1024, "bs": 8, "ckpt": "/kaggle/input/rsna-ckpt/best.pth"}


def seed_everything(seed):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.determinstic = True
    torch.backends.cudnn.benchmark = True


def seed_worker(worker_id):
    s = torch.initial_seed() % 2**32
    np.random.seed(s)
    random.seed(s)


seed_everything(CFG["seed"])
device = torch.device("cuda")

model = timm.create_model(CFG["model"], pretrained=False, num_classes=1)
model.load_state_dict(torch.load(CFG["ckpt"], map_location="cpu", weights_only=True))
model.to(device).eval()

test_df = pd.read_csv("/kaggle/input/rsna-breast-cancer-detection/test.csv")
test_ds = MammoDataset(test_df, transforms=get_valid_transforms(CFG["img"]))
test_loader = DataLoader(test_ds, batch_size=CFG["bs"], shuffle=False, num_workers=2,
                         worker_init_fn=seed_worker)

preds = []
with torch.no_grad():
    for images in test_loader:
        preds.append(model(images.to(device)).sigmoid().squeeze(1).cpu().numpy())

test_df["cancer"] = np.concatenate(preds)
test_df.groupby("prediction_id")["cancer"].mean().reset_index().to_csv("submission.csv", index=False)
