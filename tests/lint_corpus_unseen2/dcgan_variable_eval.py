# shaped after MassimilianoT/GAN-StudyOfArchitectures:dcgan/load_model.py (rewritten, not copied)
"""Load the trained DCGAN generator and write a grid plus single images."""
import os

import numpy as np
import torch
from torch.autograd import Variable
from torchvision.utils import save_image

from dcgan import Generator

latent_dim = 100
n_images = 100
cuda = torch.cuda.is_available()
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor

generator = Generator()
generator.load_state_dict(torch.load("generator_dcgan.pth"))
if cuda:
    generator.cuda()
generator.eval()

os.makedirs("images_eval", exist_ok=True)
z = Variable(Tensor(np.random.normal(0, 1, (n_images, latent_dim))))
gen_imgs = generator(z)
save_image(gen_imgs.data[:25], "images_eval/grid.png", nrow=5, normalize=True)
for i in range(n_images):
    save_image(gen_imgs.data[i], f"images_eval/{i:03d}.png", normalize=True)
print("Immagini create")
