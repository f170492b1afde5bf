"""Real-world x4 super-resolution with SwinIR, tiled so large images fit in GPU memory."""
import argparse
import glob
import os

import cv2
import numpy as np
import torch

from models.network_swinir import SwinIR as net


def define_model(args):
    model = net(upscale=args.scale, in_chans=3, img_size=64, window_size=8, img_range=1.0,
                depths=[6, 6, 6, 6, 6, 6], embed_dim=180, num_heads=[6, 6, 6, 6, 6, 6],
                mlp_ratio=2, upsampler="nearest+conv", resi_connection="1conv")
    pretrained = torch.load(args.model_path, map_location="cpu")
    param_key = "params_ema"
    model.load_state_dict(pretrained[param_key] if param_key in pretrained else pretrained, strict=True)
    return model


def test(img_lq, model, args):
    b, c, h, w = img_lq.size()
    tile = min(args.tile, h, w)
    stride = tile - args.tile_overlap
    sf = args.scale
    h_idx_list = list(range(0, h - tile, stride)) + [h - tile]
    w_idx_list = list(range(0, w - tile, stride)) + [w - tile]
    E = torch.zeros(b, c, h * sf, w * sf).type_as(img_lq)
    W = torch.zeros_like(E)
    for h_idx in h_idx_list:
        for w_idx in w_idx_list:
            in_patch = img_lq[..., h_idx:h_idx + tile, w_idx:w_idx + tile]
            out_patch = model(in_patch)
            E[..., h_idx * sf:(h_idx + tile) * sf, w_idx * sf:(w_idx + tile) * sf].add_(out_patch)
            W[..., h_idx * sf:(h_idx + tile) * sf, w_idx * sf:(w_idx + tile) * sf].add_(torch.ones_like(out_patch))
    return E.div_(W)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_path", default="model_zoo/swinir/003_realSR_BSRGAN_DFO_s64w8_SwinIR-M_x4_GAN.pth")
    parser.add_argument("--folder_lq", required=True)
    parser.add_argument("--scale", type=int, default=4)
    parser.add_argument("--tile", type=int, default=256)
    parser.add_argument("--tile_overlap", type=int, default=32)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    model = define_model(args)
    model.eval()
    model = model.to(device)

    window_size = 8
    save_dir = f"results/swinir_x{args.scale}"
    os.makedirs(save_dir, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(args.folder_lq, "*"))):
        imgname = os.path.splitext(os.path.basename(path))[0]
        img_lq = cv2.imread(path, cv2.IMREAD_COLOR).astype(np.float32) / 255.0
        img_lq = np.transpose(img_lq[:, :, [2, 1, 0]], (2, 0, 1))
        img_lq = torch.from_numpy(img_lq).float().unsqueeze(0).to(device)

        with torch.no_grad():
            _, _, h_old, w_old = img_lq.size()
            h_pad = (h_old // window_size + 1) * window_size - h_old
            w_pad = (w_old // window_size + 1) * window_size - w_old
            img_lq = torch.cat([img_lq, torch.flip(img_lq, [2])], 2)[:, :, :h_old + h_pad, :]
            img_lq = torch.cat([img_lq, torch.flip(img_lq, [3])], 3)[:, :, :, :w_old + w_pad]
            output = test(img_lq, model, args)
            output = output[..., :h_old * args.scale, :w_old * args.scale]

        output = output.squeeze().float().cpu().clamp_(0, 1).numpy()
        output = np.transpose(output[[2, 1, 0], :, :], (1, 2, 0))
        cv2.imwrite(f"{save_dir}/{imgname}_SwinIR.png", (output * 255.0).round().astype(np.uint8))
        print(f"saved {imgname}")


if __name__ == "__main__":
    main()
