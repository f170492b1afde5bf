# shaped after FlyClover/binary_transformer:eval.py (rewritten, not copied)
"""Translate stdin line by line with the annotated-transformer en-de model (greedy decoding)."""
import sys

import torch
from torch.autograd import Variable

from annotated import make_model, subsequent_mask

torch.nn.Module.dump_patches = True


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type_as(src.data)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, Variable(ys),
                           Variable(subsequent_mask(ys.size(1)).type_as(src.data)))
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word.item())], dim=1)
    return ys


# the old checkpoint holds the torchtext vocab fields next to the pickled model
_, SRC, TGT = torch.load("en-de-model.pt")
model = make_model(len(SRC), len(TGT), N=6)
model.load_state_dict(torch.load("en-de-weights.pt"))
model.cuda()
model.eval()

for line in sys.stdin:
    sent = line.split()
    src = Variable(torch.LongTensor([[SRC.stoi.get(w, 0) for w in sent]]).cuda())
    src_mask = (src != SRC.stoi["<blank>"]).unsqueeze(-2)
    with torch.no_grad():
        out = greedy_decode(model, src, src_mask, max_len=60, start_symbol=TGT.stoi["<s>"])
    words = []
    for i in range(1, out.size(1)):
        sym = TGT.itos[out[0, i]]
        if sym == "</s>":
            break
        words.append(sym)
    print(" ".join(words))
