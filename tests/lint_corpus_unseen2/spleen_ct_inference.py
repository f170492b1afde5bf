# shaped after Astarakee/monai_label:spleen/pt/inference.py (rewritten, not copied)
"""Spleen segmentation of the test CTs with a MONAI 3D UNet, inverted back to original spacing."""
import glob
import os

import torch
from monai.data import DataLoader, Dataset, decollate_batch
from monai.inferers import sliding_window_inference
from monai.networks.layers import Norm
from monai.networks.nets import UNet
from monai.transforms import (
    AsDiscreted, Compose, CropForegroundd, EnsureChannelFirstd, Invertd, LoadImaged,
    Orientationd, SaveImaged, ScaleIntensityRanged, Spacingd,
)

root_dir = os.environ.get("SPLEEN_ROOT", "runs/spleen")
data_dir = os.environ.get("SPLEEN_DATA", "data/Task09_Spleen")
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

test_images = sorted(glob.glob(os.path.join(data_dir, "imagesTs", "*.nii.gz")))
test_data = [{"image": image} for image in test_images]

test_transforms = Compose([
    LoadImaged(keys="image"),
    EnsureChannelFirstd(keys="image"),
    Orientationd(keys=["image"], axcodes="RAS"),
    Spacingd(keys=["image"], pixdim=(1.5, 1.5, 2.0), mode="bilinear"),
    ScaleIntensityRanged(keys=["image"], a_min=-57, a_max=164, b_min=0.0, b_max=1.0, clip=True),
    CropForegroundd(keys=["image"], source_key="image"),
])
post_transforms = Compose([
    Invertd(keys="pred", transform=test_transforms, orig_keys="image", nearest_interp=False),
    AsDiscreted(keys="pred", argmax=True),
    SaveImaged(keys="pred", output_dir=os.path.join(root_dir, "preds"), output_postfix="seg", resample=False),
])

test_ds = Dataset(data=test_data, transform=test_transforms)
test_loader = DataLoader(test_ds, batch_size=1, num_workers=4)

model = UNet(
    spatial_dims=3, in_channels=1, out_channels=2,
    channels=(16, 32, 64, 128, 256), strides=(2, 2, 2, 2),
    num_res_units=2, norm=Norm.BATCH,
).to(device)
model.load_state_dict(torch.load(os.path.join(root_dir, "best_metric_model.pth"), map_location=device))
model.eval()

with torch.no_grad():
    for test_data in test_loader:
        test_inputs = test_data["image"].to(device)
        roi_size = (160, 160, 160)
        sw_batch_size = 4
        test_data["pred"] = sliding_window_inference(test_inputs, roi_size, sw_batch_size, model)
        test_data = [post_transforms(i) for i in decollate_batch(test_data)]
print("wrote", len(test_images), "segmentations")
