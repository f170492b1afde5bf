# shaped after pytorch/hub:pytorch_vision_deeplabv3_resnet101.md (rewritten, not copied)
"""Person masks for a folder of photos with torch.hub DeepLabV3-ResNet101."""
import os
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

model = torch.hub.load("pytorch/vision:v0.10.0", "deeplabv3_resnet101", pretrained=True)
if torch.cuda.is_available():
    model.to("cuda")

preprocess = transforms.Compose([
    transforms.ToTensor(),
    transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
])
PERSON = 15  # VOC class index


def person_mask(path):
    input_image = Image.open(path).convert("RGB")
    input_tensor = preprocess(input_image).unsqueeze(0)
    if torch.cuda.is_available():
        input_tensor.to("cuda")
    with torch.no_grad():
        output = model(input_tensor)["out"][0]
    return (output.argmax(0) == PERSON).byte().cpu().numpy() * 255


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        mask = person_mask(os.path.join(src, name))
        out_name = os.path.splitext(name)[0] + ".png"
        Image.fromarray(mask.astype(np.uint8)).save(os.path.join(dst, out_name))
        print(name, int((mask > 0).mean() * 100), "% person")
