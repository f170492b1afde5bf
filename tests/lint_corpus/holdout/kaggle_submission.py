"""Kaggle inference kernel: leaf disease classification -> submission.csv"""
import os
import random

import numpy as np
import pandas as pd
import timm
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T
from tqdm import tqdm


class CFG:
    seed = 42
    model_name = "tf_efficientnet_b3_ns"
    num_classes = 5
    weights = "../input/leaf-effnet-b3/fold0_best.pth"
    test_dir = "../input/cassava-leaf-disease-classification/test_images"


def seed_everything(seed):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True


class TestDataset(Dataset):
    def __init__(self, df, transform):
        self.df = df
        self.transform = transform

    def __len__(self):
        return len(self.df)

    def __getitem__(self, idx):
        image_id = self.df.image_id.iloc[idx]
        image = Image.open(os.path.join(CFG.test_dir, image_id)).convert("RGB")
        return self.transform(image), image_id


seed_everything(CFG.seed)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

test_tf = T.Compose([
    T.Resize((384, 384)),
    T.ToTensor(),
    T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
])
sub = pd.read_csv("../input/cassava-leaf-disease-classification/sample_submission.csv")
test_loader = DataLoader(TestDataset(sub, test_tf), batch_size=1, shuffle=False)

model = timm.create_model(CFG.model_name, pretrained=False, num_classes=CFG.num_classes)
model.load_state_dict(torch.load(CFG.weights, map_location="cpu"))
model.to(device)
model.eval()

preds = []
with torch.no_grad():
    for images, image_ids in tqdm(test_loader):
        images = images.to(device)
        logits = model(images)
        preds.append(logits.softmax(1).cpu().numpy())

sub["label"] = np.concatenate(preds).argmax(1)
sub.to_csv("submission.csv", index=False)
print(sub.head())
