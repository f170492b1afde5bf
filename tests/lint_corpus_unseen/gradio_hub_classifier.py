# shaped after gradio-app/gradio:demo/image_classification/run.py (rewritten, not copied)
"""Gradio demo: ImageNet top-5 for one uploaded picture, or a gallery of pictures at once."""
import gradio as gr
import torch
from torchvision import transforms

model = torch.hub.load("pytorch/vision", "resnet18", weights="IMAGENET1K_V1").eval()
with open("imagenet_classes.txt") as fh:
    LABELS = [line.strip() for line in fh]

preprocess = transforms.Compose([
    transforms.Resize(256),
    transforms.CenterCrop(224),
    transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])


def classify(image):
    batch = preprocess(image).unsqueeze(0)
    with torch.inference_mode():
        probs = torch.softmax(model(batch)[0], dim=0)
    top = probs.topk(5)
    return {LABELS[i]: float(p) for p, i in zip(top.values, top.indices)}


def classify_many(images):
    # one forward for the whole gallery: the crops all have the same size
    batch = torch.stack([preprocess(im) for im in images])
    with torch.inference_mode():
        probs = torch.softmax(model(batch), dim=1)
    return [LABELS[i] for i in probs.argmax(1).tolist()]


with gr.Blocks() as demo:
    with gr.Tab("single"):
        gr.Interface(fn=classify, inputs=gr.Image(type="pil"), outputs=gr.Label(num_top_classes=5))
    with gr.Tab("gallery"):
        gr.Interface(fn=classify_many, inputs=gr.Gallery(type="pil"), outputs=gr.JSON())

if __name__ == "__main__":
    demo.launch()
