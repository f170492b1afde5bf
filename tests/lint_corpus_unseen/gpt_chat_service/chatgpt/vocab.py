# shaped after karpathy/nanoGPT:sample.py (rewritten, not copied)
"""Character vocabulary saved next to the training data as meta.pkl."""
import os
import pickle


class CharVocab:
    def __init__(self, stoi, itos):
        self.stoi, self.itos = stoi, itos

    def encode(self, text):
        return [self.stoi[c] for c in text if c in self.stoi]

    def decode(self, ids):
        return "".join(self.itos[i] for i in ids)

    @classmethod
    def from_dataset_dir(cls, data_dir):
        meta_path = os.path.join(data_dir, "meta.pkl")
        with open(meta_path, "rb") as fh:
            meta = pickle.load(fh)
        return cls(meta["stoi"], meta["itos"])
