"""Top-down pose estimation demo: SimpleBaseline-style heatmap model on person crops."""
import argparse
import json

import cv2
import torch
import torch.nn as nn
import torchvision

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
SKELETON = [(5, 7), (7, 9), (6, 8), (8, 10), (11, 13), (13, 15), (12, 14), (14, 16), (5, 6), (11, 12)]


class PoseResNet(nn.Module):
    def __init__(self, num_joints=17):
        super().__init__()
        resnet = torchvision.models.resnet50(weights=None)
        self.backbone = nn.Sequential(*list(resnet.children())[:-2])
        deconv, in_ch = [], 2048
        for _ in range(3):
            deconv += [nn.ConvTranspose2d(in_ch, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU(inplace=True)]
            in_ch = 256
        self.deconv = nn.Sequential(*deconv)
        self.final = nn.Conv2d(256, num_joints, 1)

    def forward(self, x):
        return self.final(self.deconv(self.backbone(x)))


def heatmaps_to_keypoints(hm, box):
    j, h, w = hm.shape
    flat = hm.reshape(j, -1)
    idx = flat.argmax(1)
    conf = flat.max(1).values
    xs = (idx % w).float() / w * (box[2] - box[0]) + box[0]
    ys = (idx // w).float() / h * (box[3] - box[1]) + box[1]
    return torch.stack([xs, ys, conf], 1).cpu().numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True)
    ap.add_argument("--boxes", required=True, help="json list of person boxes [x1, y1, x2, y2]")
    ap.add_argument("--weights", default="weights/pose_resnet50_256x192.pth")
    ap.add_argument("--out", default="pose_vis.jpg")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = PoseResNet(num_joints=17)
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.to(device).eval()

    frame = cv2.imread(args.image)
    with open(args.boxes) as f:
        boxes = json.load(f)

    with torch.no_grad():
        for box in boxes:
            x1, y1, x2, y2 = map(int, box)
            crop = cv2.resize(frame[y1:y2, x1:x2], (192, 256))
            inp = torch.from_numpy(crop[:, :, ::-1].copy()).permute(2, 0, 1).float() / 255.0
            inp = ((inp - MEAN) / STD).unsqueeze(0)
            inp.to(device)
            heatmaps = model(inp)
            kps = heatmaps_to_keypoints(heatmaps[0], (x1, y1, x2, y2))
            for a, b in SKELETON:
                if kps[a, 2] > 0.3 and kps[b, 2] > 0.3:
                    cv2.line(frame, tuple(map(int, kps[a, :2])), tuple(map(int, kps[b, :2])), (0, 255, 0), 2)
            for x, y, c in kps:
                if c > 0.3:
                    cv2.circle(frame, (int(x), int(y)), 3, (0, 0, 255), -1)

    cv2.imwrite(args.out, frame)


if __name__ == "__main__":
    main()
