"""Triton Inference Server Python backend: ConvNeXt classifier + TorchScript calibration head."""
import json
import os

import timm
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        out_cfg = pb_utils.get_output_config_by_name(self.model_config, "PROBS")
        self.out_dtype = pb_utils.triton_string_to_numpy(out_cfg["data_type"])
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        self.device = torch.device("cuda" if args["model_instance_kind"] == "GPU" else "cpu")

        self.model = timm.create_model("convnext_tiny", pretrained=False, num_classes=200)
        state = torch.load(os.path.join(version_dir, "convnext_tiny.pt"), map_location="cpu")
        self.model.load_state_dict(state)
        self.model.to(self.device)
        self.calibrate = torch.jit.load(os.path.join(version_dir, "calibrate.ts"), map_location=self.device)
        self._prepare()

    def _prepare(self):
        self.model.eval()
        if self.device.type == "cuda":
            self.model.half()

    def execute(self, requests):
        responses = []
        for request in requests:
            images = pb_utils.get_input_tensor_by_name(request, "IMAGES").as_numpy()
            x = torch.from_numpy(images).to(self.device)
            if self.device.type == "cuda":
                x = x.half()
            with torch.no_grad():
                logits = self.model(x)
                probs = self.calibrate(logits.float())
            out = pb_utils.Tensor("PROBS", probs.cpu().numpy().astype(self.out_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses

    def finalize(self):
        del self.model
        torch.cuda.empty_cache()
