# Old demo script from 2017, still used by the ops team for spot checks.
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.autograd import Variable
from torchvision import transforms

normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
preprocess = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize])


def predict(model, img):
    x = Variable(img.unsqueeze(0), volatile=True)
    if torch.cuda.is_available():
        x = x.cuda()
    out = model(x)
    return F.softmax(out, dim=1).data.cpu().numpy()[0]


def main():
    parser = argparse.ArgumentParser(description="spot check")
    parser.add_argument("--model", default="model_best.pth.tar")
    parser.add_argument("--classes", default="classes.txt")
    parser.add_argument("image")
    args = parser.parse_args()

    # saved with torch.save(model), the whole module
    model = torch.load(args.model)
    model.eval()
    if torch.cuda.is_available():
        model.cuda()

    classes = [line.strip() for line in open(args.classes)]
    img = preprocess(Image.open(args.image).convert("RGB"))
    probs = predict(model, img)
    for i in np.argsort(probs)[::-1][:5]:
        print("%-30s %.4f" % (classes[i], probs[i]))


if __name__ == "__main__":
    main()
