# shaped after nishloadmaster/zcore_score:core/train/seed.py (rewritten, not copied)
"""Leaf-disease test inference: 5 folds x 4 flips TTA, writes submission.csv."""
import os
import random

import cv2
import numpy as np
import pandas as pd
import timm
import torch
from torch.utils.data import DataLoader, Dataset

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
IMG_SIZE = 384
FOLDS = [0, 1, 2, 3, 4]
TEST_DIR = "../input/leaf-disease/test_images"


def seed_everything(seed):
    random.seed(seed)
    os.environ["PYHTONHASHSEED"] = str(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True


class TestDataset(Dataset):
    def __init__(self, df):
        self.files = df["image_id"].values

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = cv2.imread(os.path.join(TEST_DIR, self.files[i]))
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        img = cv2.resize(img, (IMG_SIZE, IMG_SIZE)).astype(np.float32) / 255.0
        img = (img - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
        return torch.tensor(img.transpose(2, 0, 1), dtype=torch.float32)


def load_fold(fold):
    model = timm.create_model("tf_efficientnet_b4_ns", pretrained=False, num_classes=5)
    state = torch.load(f"../input/leaf-weights/effb4_fold{fold}.pth", map_location="cpu")
    model.load_state_dict(state["model"])
    return model.to(DEVICE).eval()


def tta_logits(model, images):
    out = model(images)
    out += model(images.flip(-1))
    out += model(images.flip(-2))
    out += model(images.flip(-1).flip(-2))
    return out / 4


seed_everything(42)
test = pd.read_csv("../input/leaf-disease/sample_submission.csv")
loader = DataLoader(TestDataset(test), batch_size=32, shuffle=False, num_workers=4, pin_memory=True)
models = [load_fold(f) for f in FOLDS]

probs = []
with torch.no_grad():
    for images in loader:
        images = images.to(DEVICE)
        logits = sum(tta_logits(m, images) for m in models) / len(models)
        probs.append(logits.softmax(1).cpu().numpy())

test["label"] = np.concatenate(probs).argmax(1)
test[["image_id", "label"]].to_csv("submission.csv", index=False)
print(test["label"].value_counts())
