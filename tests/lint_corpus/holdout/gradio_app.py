"""Gradio demo: semantic segmentation with torchvision DeepLabV3."""
import gradio as gr
import numpy as np
import torch
from PIL import Image
from torchvision.models.segmentation import DeepLabV3_ResNet50_Weights, deeplabv3_resnet50

device = "cuda" if torch.cuda.is_available() else "cpu"
weights = DeepLabV3_ResNet50_Weights.DEFAULT
model = deeplabv3_resnet50(weights=weights).to(device).eval()
preprocess = weights.transforms()
CATEGORIES = weights.meta["categories"]
PALETTE = np.array(
    [[(i * 37) % 256, (i * 91) % 256, (i * 53) % 256] for i in range(len(CATEGORIES))], dtype=np.uint8
)


def segment(image: Image.Image, alpha: float):
    batch = preprocess(image).unsqueeze(0).to(device)
    out = model(batch)["out"]
    out = torch.nn.functional.interpolate(out, size=image.size[::-1], mode="bilinear", align_corners=False)
    mask = out.argmax(1)[0].cpu().numpy()
    overlay = (np.asarray(image.convert("RGB")) * (1 - alpha) + PALETTE[mask] * alpha).astype(np.uint8)
    found = sorted({CATEGORIES[i] for i in np.unique(mask) if i != 0})
    return Image.fromarray(overlay), ", ".join(found) or "background only"


demo = gr.Interface(
    fn=segment,
    inputs=[gr.Image(type="pil", label="Input"), gr.Slider(0.0, 1.0, value=0.6, label="Overlay alpha")],
    outputs=[gr.Image(label="Segmentation"), gr.Textbox(label="Classes")],
    title="DeepLabV3 segmentation",
    examples=[["examples/street.jpg", 0.6]],
)

if __name__ == "__main__":
    demo.queue(max_size=16).launch(server_name="0.0.0.0")
