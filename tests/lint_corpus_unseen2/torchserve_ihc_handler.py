# shaped after nadeemlab/DeepLIIF:model-server/net_handler.py (rewritten, not copied)
"""TorchServe handler for the IHC-to-marker translation generator."""
import base64
import io
import logging
import os

import numpy as np
import torch
from PIL import Image
from ts.torch_handler.base_handler import BaseHandler

from deepliif.models.networks import ResnetGenerator

logger = logging.getLogger(__name__)


class NetHandler(BaseHandler):
    def initialize(self, context):
        props = context.system_properties
        model_dir = props.get("model_dir")
        gpu_id = props.get("gpu_id")
        use_gpu = torch.cuda.is_available() and gpu_id is not None
        self.device = torch.device(f"cuda:{gpu_id}" if use_gpu else "cpu")
        self.model = ResnetGenerator(input_nc=3, output_nc=3, ngf=64, n_blocks=9, use_dropout=True)
        weights = os.path.join(model_dir, "latest_net_G.pth")
        self.model.load_state_dict(torch.load(weights, map_location=self.device, weights_only=True))
        self.model.to(self.device)
        self.initialized = True
        logger.info("generator loaded from %s", weights)

    def preprocess(self, data):
        # TODO: temporarily keep the generator in training mode until the norm layers are fixed
        self.model.train()
        body = data[0].get("data") or data[0].get("body")
        if isinstance(body, (bytes, bytearray)) and body[:2] == b"PK":
            # some clients post a tensor saved with torch.save instead of an image
            return torch.load(io.BytesIO(body)).to(self.device)
        img = Image.open(io.BytesIO(body)).convert("RGB").resize((512, 512))
        arr = np.asarray(img, dtype=np.float32) / 127.5 - 1.0
        return torch.from_numpy(arr).permute(2, 0, 1).unsqueeze(0).to(self.device)

    def inference(self, data, *args, **kwargs):
        with torch.no_grad():
            return self.model(data)

    def postprocess(self, inference_output):
        out = inference_output[0].clamp(-1, 1).add(1).mul(127.5).byte()
        img = Image.fromarray(out.permute(1, 2, 0).cpu().numpy())
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return [base64.b64encode(buf.getvalue()).decode("ascii")]
