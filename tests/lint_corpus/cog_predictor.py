# Prediction interface for Cog ⚙️  (cog.yaml points at predict.py:Predictor)
import torch
from cog import BasePredictor, Input, Path
from PIL import Image
from torchvision.models.segmentation import DeepLabV3_ResNet50_Weights, deeplabv3_resnet50


class Predictor(BasePredictor):
    def setup(self) -> None:
        """Load the model into memory to make running multiple predictions efficient"""
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        weights = DeepLabV3_ResNet50_Weights.DEFAULT
        self.model = deeplabv3_resnet50(weights=weights)
        self.model.eval()
        self.model.to(self.device)
        self.preprocess = weights.transforms()
        self.palette = torch.randint(0, 255, (21, 3), dtype=torch.uint8)

    def predict(
        self,
        image: Path = Input(description="Input image"),
        overlay: bool = Input(description="Blend the mask over the photo", default=True),
    ) -> Path:
        """Run a single prediction on the model"""
        img = Image.open(image).convert("RGB")
        x = self.preprocess(img).unsqueeze(0).to(self.device)
        with torch.inference_mode():
            mask = self.model(x)["out"].argmax(1)[0].cpu()
        color = Image.fromarray(self.palette[mask].numpy()).resize(img.size, Image.NEAREST)
        result = Image.blend(img, color, 0.5) if overlay else color
        out_path = Path("/tmp/out.png")
        result.save(out_path)
        return out_path
