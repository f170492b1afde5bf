"""Knowledge distillation: ResNet-50 teacher -> ResNet-18 student on an ImageFolder dataset."""
import argparse
import os
import random

import numpy as np
import timm
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms as T

os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
NORM = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def kd_loss(s_logits, t_logits, targets, temp=4.0, alpha=0.7):
    soft = F.kl_div(F.log_softmax(s_logits / temp, 1), F.softmax(t_logits / temp, 1), reduction="batchmean")
    return alpha * soft * temp * temp + (1 - alpha) * F.cross_entropy(s_logits, targets)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--teacher-ckpt", required=True)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator()
    g.manual_seed(args.seed)

    device = torch.device("cuda")
    train_tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), NORM])
    val_tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), NORM])
    train_ds = datasets.ImageFolder(os.path.join(args.data, "train"), train_tf)
    val_ds = datasets.ImageFolder(os.path.join(args.data, "val"), val_tf)
    train_dl = DataLoader(train_ds, batch_size=128, shuffle=True, num_workers=8, worker_init_fn=seed_worker, generator=g)
    val_dl = DataLoader(val_ds, batch_size=256, num_workers=8, worker_init_fn=seed_worker, generator=g)

    n_cls = len(train_ds.classes)
    teacher = timm.create_model("resnet50", pretrained=False, num_classes=n_cls)
    teacher.load_state_dict(torch.load(args.teacher_ckpt, map_location="cpu"))
    teacher.to(device).eval()
    student = timm.create_model("resnet18", pretrained=False, num_classes=n_cls).to(device)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(args.epochs):
        student.train()
        for images, targets in train_dl:
            images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
            with torch.no_grad():
                t_logits = teacher(images)
            loss = kd_loss(student(images), t_logits, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        scheduler.step()

        student.eval()
        correct = 0
        with torch.no_grad():
            for images, targets in val_dl:
                preds = student(images.to(device)).argmax(1).cpu()
                correct += (preds == targets).sum().item()
        print(f"epoch {epoch}: loss {loss.item():.3f}  val acc {correct / len(val_ds):.4f}")
        torch.save(student.state_dict(), f"student_ep{epoch}.pt")


if __name__ == "__main__":
    main()
