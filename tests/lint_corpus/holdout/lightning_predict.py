"""Batch prediction with a trained LightningModule via trainer.predict."""
import argparse
import csv
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T


class ImagePaths(Dataset):
    def __init__(self, root):
        self.paths = sorted(Path(root).rglob("*.jpg"))
        self.tf = T.Compose([
            T.Resize((224, 224)),
            T.ToTensor(),
            T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.tf(Image.open(self.paths[i]).convert("RGB")), str(self.paths[i])


class LitClassifier(pl.LightningModule):
    def __init__(self, num_classes=10, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.backbone = torchvision.models.resnet18(num_classes=num_classes)

    def forward(self, x):
        return self.backbone(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        x, paths = batch
        probs = self(x).softmax(dim=-1)
        return paths, probs

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--out", default="predictions.csv")
    args = ap.parse_args()

    model = LitClassifier.load_from_checkpoint(args.ckpt, map_location="cpu")
    loader = DataLoader(ImagePaths(args.images), batch_size=64, num_workers=4)
    trainer = pl.Trainer(accelerator="auto", devices=1, logger=False, enable_checkpointing=False)
    batches = trainer.predict(model, dataloaders=loader)

    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "label", "confidence"])
        for paths, probs in batches:
            conf, label = probs.max(dim=-1)
            for p, c, lab in zip(paths, conf.tolist(), label.tolist()):
                w.writerow([p, lab, f"{c:.4f}"])


if __name__ == "__main__":
    main()
