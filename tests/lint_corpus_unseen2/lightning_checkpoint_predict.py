# shaped after hyllios/CGAT:CGAT/predict.py (rewritten, not copied)
"""Predict formation energies for a pickled composition set with a trained Lightning checkpoint."""
import gzip as gz
import pickle
import sys

import torch
from torch.utils.data import DataLoader

from cgat_data import CompositionData, collate_batch
from lightning_module import LightningModel

model_path = sys.argv[1] if len(sys.argv) > 1 else "example.ckpt"
data_path = sys.argv[2] if len(sys.argv) > 2 else "example_test_data.pickle.gz"

# train=False: do not reload the (large) training set referenced in the hparams
model = LightningModel.load_from_checkpoint(model_path, train=False)
model = model.cuda()

with gz.open(data_path, "rb") as f:
    raw = pickle.load(f)

dataset = CompositionData(
    data=raw,
    fea_path=model.hparams.fea_path,
    max_neighbor_number=model.hparams.max_nbr,
)
loader = DataLoader(dataset, batch_size=5000, shuffle=False, pin_memory=False,
                    drop_last=False, collate_fn=collate_batch)

prediction_list = []
for i, batch in enumerate(loader):
    batch = [t.cuda() if torch.is_tensor(t) else t for t in batch]
    with torch.no_grad():
        output, log_std = model(*batch[:-1])
        prediction_list.append(output)
    print(i, "/", len(loader))

preds = torch.cat(prediction_list).cpu()
with gz.open("predictions.pickle.gz", "wb") as f:
    pickle.dump(preds, f)
