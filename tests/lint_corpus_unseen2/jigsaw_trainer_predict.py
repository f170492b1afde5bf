# shaped after alexvishnevskiy/jigsaw:jigsaw/scripts/deep_model_inference.py (rewritten, not copied)
"""Fold-wise test predictions for the Jigsaw toxicity regression models via Trainer.predict."""
import argparse

import pandas as pd
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from jigsaw.config import load_config
from jigsaw.data import CommentsDataset
from jigsaw.models.deep_models.lightning_models import PairedDeepModel, RegressionDeepModel
from jigsaw.utils.callbacks import CsvWriter


def predict(cfg, test_df, checkpoint_path, fold=None):
    if cfg.model_type == "paired":
        model = PairedDeepModel(cfg)
    else:
        model = RegressionDeepModel(cfg)
    state = torch.load(checkpoint_path, map_location="cpu")
    model.load_state_dict(state["state_dict"])

    dataset = CommentsDataset(test_df, tokenizer_name=cfg.backbone, max_len=cfg.max_len)
    loader = DataLoader(dataset, batch_size=cfg.batch_size, shuffle=False, num_workers=4)
    trainer = pl.Trainer(accelerator="gpu", devices=1, callbacks=[CsvWriter(cfg, fold=fold)], logger=False)
    trainer.predict(model, dataloaders=loader)
    print(f"fold {fold}: predictions written")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--test", default="data/comments_to_score.csv")
    parser.add_argument("--checkpoints", nargs="+", required=True)
    args = parser.parse_args()

    pl.seed_everything(42)
    cfg = load_config(args.config)
    test_df = pd.read_csv(args.test)
    for fold, ckpt in enumerate(args.checkpoints):
        predict(cfg, test_df, ckpt, fold=fold)
