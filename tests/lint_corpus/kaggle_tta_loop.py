# Kaggle inference notebook exported to a script: plant pathology, 5 classes, TTA.
import glob
import os

import numpy as np
import pandas as pd
import timm
import torch
from PIL import Image
from torchvision import transforms

CFG = {
    "model_name": "tf_efficientnet_b3_ns",
    "img_size": 384,
    "num_classes": 5,
    "weights": "/kaggle/input/plant-b3/fold0_best.pth",
    "test_dir": "/kaggle/input/plant-pathology/test_images",
}
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
size = (CFG["img_size"], CFG["img_size"])
tta_transforms = [
    transforms.Compose([transforms.Resize(size), transforms.ToTensor(), norm]),
    transforms.Compose([transforms.Resize(size), transforms.RandomHorizontalFlip(p=1.0), transforms.ToTensor(), norm]),
    transforms.Compose([transforms.Resize(size), transforms.RandomVerticalFlip(p=1.0), transforms.ToTensor(), norm]),
]

model = timm.create_model(CFG["model_name"], pretrained=False, num_classes=CFG["num_classes"])
model.load_state_dict(torch.load(CFG["weights"], map_location=device))
model.to(device)
model.eval()

rows = []
test_paths = sorted(glob.glob(os.path.join(CFG["test_dir"], "*.jpg")))
with torch.no_grad():
    for path in test_paths:
        image = Image.open(path).convert("RGB")
        probs = torch.zeros(1, CFG["num_classes"], device=device)
        for tfm in tta_transforms:
            x = tfm(image).unsqueeze(0)
            x = x.to(device)
            probs += model(x).softmax(dim=1)
        probs /= len(tta_transforms)
        rows.append({"image_id": os.path.basename(path), "label": int(probs.argmax(dim=1).item())})

sub = pd.DataFrame(rows)
print(sub["label"].value_counts())
print("mean label:", np.mean(sub["label"].values))
sub.to_csv("submission.csv", index=False)
