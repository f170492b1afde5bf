# shaped after meijieru/crnn.pytorch:utils.py (rewritten, not copied)
"""Label conversion (CTC) and line-image loading for the CRNN demo."""
import torch
import torchvision.transforms as transforms
from PIL import Image

_to_tensor = transforms.ToTensor()


def load_line_image(path):
    """Grey line image resized to the network's 100x32 input, scaled to [-1, 1]."""
    img = Image.open(path).convert("L").resize((100, 32), Image.BILINEAR)
    return _to_tensor(img).sub_(0.5).div_(0.5)


class strLabelConverter(object):
    """Convert between str and CTC label indices (index 0 is the blank)."""

    def __init__(self, alphabet, ignore_case=True):
        self._ignore_case = ignore_case
        if self._ignore_case:
            alphabet = alphabet.lower()
        self.alphabet = alphabet + "-"
        self.dict = {char: i + 1 for i, char in enumerate(alphabet)}

    def encode(self, text):
        if isinstance(text, str):
            text = [self.dict[c.lower() if self._ignore_case else c] for c in text]
            return torch.IntTensor(text), torch.IntTensor([len(text)])
        lengths = [len(s) for s in text]
        flat = "".join(text)
        return self.encode(flat)[0], torch.IntTensor(lengths)

    def decode(self, t, length, raw=False):
        length = int(length[0]) if length.numel() == 1 else int(length.sum())
        t = t[:length]
        if raw:
            return "".join(self.alphabet[i - 1] for i in t.tolist())
        chars = []
        for i in range(length):
            if t[i] != 0 and not (i > 0 and t[i - 1] == t[i]):
                chars.append(self.alphabet[t[i] - 1])
        return "".join(chars)
