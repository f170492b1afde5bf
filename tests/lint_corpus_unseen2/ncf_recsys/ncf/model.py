# shaped after kaixinjiuxing666/xhj_rec:ncf_/ncf.py (rewritten, not copied)
"""NeuMF: a GMF tower and an MLP tower over user/item attribute vectors, fused by one linear layer."""
import torch
import torch.nn as nn
from torch.nn.init import normal_


class NeuMF(nn.Module):
    def __init__(self, user_dim=3, item_dim=9, emb=64, hidden=(128, 64), dropout=0.1):
        super().__init__()
        self.user_mf = nn.Linear(user_dim, emb)
        self.item_mf = nn.Linear(item_dim, emb)
        self.user_mlp = nn.Linear(user_dim, emb)
        self.item_mlp = nn.Linear(item_dim, emb)
        layers, width = [], 2 * emb
        for h in hidden:
            layers += [nn.Dropout(dropout), nn.Linear(width, h), nn.ReLU()]
            width = h
        self.mlp_layers = nn.Sequential(*layers)
        self.predict_layer = nn.Linear(emb + width, 1)
        self.loss = nn.BCELoss()
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            normal_(module.weight.data, mean=0.0, std=0.01)

    def forward(self, user, item):
        mf = torch.mul(self.user_mf(user), self.item_mf(item))
        mlp = self.mlp_layers(torch.cat((self.user_mlp(user), self.item_mlp(item)), -1))
        return torch.sigmoid(self.predict_layer(torch.cat((mf, mlp), -1))).squeeze(-1)

    def calculate_loss(self, user, pos_item, neg_item):
        pos = self.forward(user, pos_item)
        neg = self.forward(user, neg_item)
        label = torch.cat([torch.ones_like(pos), torch.zeros_like(neg)])
        return self.loss(torch.cat([pos, neg]), label)


def build_model(cfg):
    return NeuMF(
        user_dim=cfg["user_dim"],
        item_dim=cfg["item_dim"],
        emb=cfg.get("emb", 64),
        hidden=tuple(cfg.get("hidden", (128, 64))),
        dropout=cfg.get("dropout", 0.1),
    )
