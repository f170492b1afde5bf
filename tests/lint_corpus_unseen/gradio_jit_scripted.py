# shaped after aiplaybookin/gradio-demo:visionApp.py (rewritten, not copied)
"""Gradio app around an exported TorchScript classifier and its TorchScript transform."""
import glob

import gradio as gr
import torch

MODEL_PATH = "export/model.pt"
TRANSFORM_PATH = "export/transform.pt"

model = torch.jit.load(MODEL_PATH, map_location="cpu")
model.eval()
transform = torch.jit.load(TRANSFORM_PATH)

with open("export/mapping.txt") as fh:
    idx2label = dict(enumerate(line.strip() for line in fh))


def predict(img):
    img = torch.from_numpy(img).permute(2, 0, 1)
    img = transform(img).unsqueeze(0)
    log_probs = model(img)[0]
    probs = log_probs.exp()
    return {idx2label[i]: float(probs[i]) for i in range(len(idx2label))}


demo = gr.Interface(
    fn=predict,
    inputs=gr.Image(type="numpy"),
    outputs=gr.Label(num_top_classes=5),
    examples=sorted(glob.glob("examples/*.jpg")),
    title="Scripted classifier",
)

if __name__ == "__main__":
    demo.launch(server_name="0.0.0.0")
