# shaped after dangnh0611/kaggle_rsna_breast_cancer:src/roi_det/YOLOX/yolox/utils/seed_all.py (rewritten, not copied)
"""Reproducibility helpers and the confusion-matrix metrics shared by train and eval."""
import os
import random

import numpy as np
import torch


def seed_everything(seed):
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def confusion(pred, target, num_classes, ignore_index=255):
    keep = target != ignore_index
    idx = num_classes * target[keep] + pred[keep]
    return torch.bincount(idx, minlength=num_classes ** 2).reshape(num_classes, num_classes)


def miou(cm):
    cm = cm.double()
    inter = cm.diag()
    union = cm.sum(0) + cm.sum(1) - inter
    iou = inter / union.clamp(min=1)
    return iou.mean().item(), iou.tolist()
