"""Models as people bring them, built small from configs with seeded random weights (no network):
transformers GPT-2, BERT, T5, ViT, and a torchvision-style two-stage detector. Each factory
returns ``(model, example_inputs)``; tests load them as ``real_models.py:NAME``."""

from __future__ import annotations

import torch
from torch import nn


def _ids(shape: tuple[int, int], vocab: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _gpt2(use_cache: bool) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=2,
        vocab_size=512,
        n_positions=64,
        use_cache=use_cache,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config).eval()


def gpt2():
    """GPT-2 on a prompt, returning logits and its DynamicCache (the default ``use_cache=True``)."""
    return _gpt2(True), {"input_ids": _ids((4, 16), 512)}


def gpt2_no_cache():
    """GPT-2 with ``use_cache=False``: logits only."""
    return _gpt2(False), {"input_ids": _ids((4, 16), 512)}


def gpt2_prompts():
    """GPT-2 with four prompts of 12, 9, 5 and 7 tokens, left-padded, for ``check --generate``."""
    lengths = (12, 9, 5, 7)
    ids = torch.zeros((len(lengths), max(lengths)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, -n:] = _ids((1, n), 512, seed=10 + i)[0]
        mask[i, -n:] = 1
    return _gpt2(True), {"input_ids": ids, "attention_mask": mask}


def gpt2_padded_positions():
    """GPT-2 whose generate numbers positions over the padded width (a custom
    ``prepare_inputs_for_generation`` that ignores the mask, as hand-written decoders do): left
    padding shifts a prompt's positions. The prompts of ``gpt2_prompts``."""
    from transformers import GPT2LMHeadModel

    class PaddedPositions(GPT2LMHeadModel):
        def prepare_inputs_for_generation(self, input_ids, **kwargs):  # type: ignore[no-untyped-def]
            inputs = super().prepare_inputs_for_generation(input_ids, **kwargs)
            step = inputs["input_ids"]
            cache = inputs.get("past_key_values")
            past = cache.get_seq_length() if cache is not None else 0
            inputs["position_ids"] = torch.arange(past, past + step.shape[1]).expand(step.shape[0], -1)
            return inputs

    model, inputs = gpt2_prompts()
    padded = PaddedPositions(model.config).eval()
    padded.load_state_dict(model.state_dict())
    return padded, inputs


def gpt2_twins():
    """GPT-2 whose odd token embeddings are their even neighbours' plus 1e-6 noise (tied to the
    LM head: every top token has a twin a hair behind it), with the four prompts that a search over
    seeds 0-19 found to part under batching (seed 1: lengths 9, 12, 6, 4)."""
    model = _gpt2(True)
    with torch.no_grad():
        w = model.transformer.wte.weight
        w[1::2] = w[0::2] + 1e-6 * torch.randn(w[1::2].shape, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(3, 16, (4,), generator=gen).tolist()
    prompts = [torch.randint(1, 512, (n,), generator=gen) for n in lengths]
    ids = torch.zeros((len(prompts), max(lengths)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, -len(p) :] = p
        mask[i, -len(p) :] = 1
    return model, {"input_ids": ids, "attention_mask": mask}


def gpt2_cache_only():
    """The prompts of ``gpt2_prompts`` on a GPT-2 whose ``generate`` refuses ``use_cache=False``
    (a model people ship that only decodes with its cache): the cache axis cannot run."""
    model, inputs = gpt2_prompts()
    plain = model.generate

    def generate(*args, **kwargs):
        if kwargs.get("use_cache") is False:
            raise NotImplementedError("this model decodes with its KV cache only")
        return plain(*args, **kwargs)

    model.generate = generate
    return model, inputs


def gpt2_decode():
    """One decode step: a single token per row, no cache passed in (a DynamicCache comes out)."""
    return _gpt2(True), {"input_ids": _ids((4, 16), 512)[:, :1]}


def bert():
    """BERT with an attention mask and right padding (rows of 12, 8 and 5 real tokens)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = BertModel(
        BertConfig(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            vocab_size=512,
            max_position_embeddings=64,
        )
    ).eval()
    ids = _ids((4, 12), 512)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[3, 5:] = 0
    return model, {"input_ids": ids * mask, "attention_mask": mask}


def t5():
    """T5 encoder-decoder: logits, an EncoderDecoderCache and the encoder's last hidden state."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(
        vocab_size=256,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    ids = _ids((3, 10), 256)
    return T5ForConditionalGeneration(config).eval(), {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "decoder_input_ids": _ids((3, 4), 256, seed=2),
    }


def vit():
    """ViT on 32x32 images in 8x8 patches."""
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    return ViTModel(config).eval(), {
        "pixel_values": torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    }


class TwoStageDetector(nn.Module):
    """torchvision-style two-stage detector: a conv backbone, region proposals (top-k objectness
    per image), features pooled per proposal, a classifier and box head, and a score threshold,
    so every image gets its own number of boxes. Takes a list of images (and, in training mode,
    a list of target dicts, which it requires, as torchvision does); returns ``list[dict(boxes,
    labels, scores)]`` in eval mode and a dict of losses in training mode."""

    def __init__(self, classes: int = 4, proposals: int = 12, threshold: float = 0.3) -> None:
        super().__init__()
        self.proposals, self.threshold = proposals, threshold
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.objectness = nn.Conv2d(16, 1, 1)
        self.deltas = nn.Conv2d(16, 4, 1)
        self.head = nn.Sequential(nn.Linear(16 * 2 * 2, 32), nn.ReLU(), nn.Dropout(0.1))
        self.classify, self.refine = nn.Linear(32, classes), nn.Linear(32, 4)

    def _proposals(self, feats: torch.Tensor, stride: float) -> tuple[torch.Tensor, torch.Tensor]:
        n, _, h, w = feats.shape
        scores = self.objectness(feats).flatten(1)  # (N, H*W)
        top = scores.topk(min(self.proposals, h * w), dim=1).indices  # (N, K)
        ys, xs = (top // w).float(), (top % w).float()
        deltas = self.deltas(feats).flatten(2).transpose(1, 2).gather(1, top[..., None].expand(-1, -1, 4))
        cx, cy = (xs + 0.5 + deltas[..., 0].tanh()) * stride, (ys + 0.5 + deltas[..., 1].tanh()) * stride
        half = stride * (1.0 + deltas[..., 2:].sigmoid() * 2)
        boxes = torch.stack([cx - half[..., 0], cy - half[..., 1], cx + half[..., 0], cy + half[..., 1]], -1)
        return boxes, top

    def forward(self, images: list[torch.Tensor], targets: list[dict[str, torch.Tensor]] | None = None):
        if self.training and targets is None:
            raise AssertionError("targets should not be none when in training mode")
        feats = self.backbone(torch.stack(list(images)))
        stride = images[0].shape[-1] / feats.shape[-1]
        boxes, top = self._proposals(feats, stride)
        n, c, h, w = feats.shape
        pooled = []
        for i in range(n):  # RoI features: a 2x2 average around each proposal's cell
            grid = nn.functional.adaptive_avg_pool2d(feats[i : i + 1], (h // 2, w // 2)).flatten(2)[0]  # (C, HW/4)
            cells = (top[i] // w // 2) * (w // 2) + (top[i] % w) // 2
            pooled.append(grid[:, cells].T.repeat(1, 4))
        hidden = self.head(torch.stack(pooled))  # (N, K, 32)
        logits, refine = self.classify(hidden), self.refine(hidden)
        boxes = boxes + refine.tanh() * stride
        if self.training:
            labels = torch.stack(
                [t["labels"][: boxes.shape[1]].long().repeat(boxes.shape[1])[: boxes.shape[1]] for t in targets]
            )
            gt = torch.stack([t["boxes"].mean(0).expand(boxes.shape[1], 4) for t in targets])
            return {
                "loss_classifier": nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()),
                "loss_box_reg": nn.functional.smooth_l1_loss(boxes, gt),
            }
        scores, labels = logits.softmax(-1).max(-1)
        out = []
        for i in range(n):
            keep = scores[i] > self.threshold
            out.append({"boxes": boxes[i, keep], "labels": labels[i, keep], "scores": scores[i, keep]})
        return out


def _images(n: int = 2, size: int = 32) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.rand(3, size, size, generator=gen) for _ in range(n)]


def _detector() -> TwoStageDetector:
    torch.manual_seed(0)
    model = TwoStageDetector()
    for m in model.modules():  # running statistics as after training
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return model


def detector():
    """The two-stage detector in eval mode on a list of 2 images."""
    return _detector().eval(), ([*_images()],)


def detector_train_mode():
    """The same detector left in training mode (``.eval()`` never called), called without targets."""
    return _detector(), ([*_images()],)


def detector_with_targets():
    """The detector in training mode given images and per-image targets (both lists)."""
    targets = [
        {"boxes": torch.tensor([[2.0, 2.0, 20.0, 20.0], [4.0, 6.0, 12.0, 30.0]]), "labels": torch.tensor([1, 3])},
        {"boxes": torch.tensor([[0.0, 0.0, 16.0, 16.0]]), "labels": torch.tensor([2])},
    ]
    return _detector(), ([*_images()], targets)


def llama():
    """A Llama-style decoder (rotary positions, RMSNorm, grouped-query attention, SiLU MLP) with
    four left-padded prompts of 11, 6, 9 and 4 tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    lengths = (11, 6, 9, 4)
    ids = torch.zeros((len(lengths), max(lengths)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, -n:] = _ids((1, n), 512, seed=20 + i)[0]
        mask[i, -n:] = 1
    return model, {"input_ids": ids, "attention_mask": mask}


def clip():
    """CLIP: images and texts of one batch scored against each other (``logits_per_image [B, B]``)."""
    from transformers import CLIPConfig, CLIPModel, CLIPTextConfig, CLIPVisionConfig

    torch.manual_seed(0)
    text = CLIPTextConfig(
        vocab_size=99,
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=16,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=1,
    )
    vision = CLIPVisionConfig(
        image_size=16, patch_size=8, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4
    )
    model = CLIPModel(CLIPConfig(text_config=text.to_dict(), vision_config=vision.to_dict(), projection_dim=16))
    ids = _ids((4, 7), 99)
    pixels = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    return model.eval(), {"input_ids": ids, "pixel_values": pixels}


def bart():
    """BART from a config: learned positions that count from the sequence's start (padding
    included), so left padding moves a prompt's positions and right padding does not."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=512,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
    )
    ids = _ids((2, 7), 512).clamp(min=3)
    return BartForConditionalGeneration(config).eval(), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def gpt2_from_pretrained():
    """The GPT-2 of ``gpt2()`` saved with save_pretrained and loaded back with from_pretrained
    (which shows a "Loading weights" progress bar)."""
    import tempfile

    from transformers import GPT2LMHeadModel

    model, inputs = gpt2()
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder)
        loaded = GPT2LMHeadModel.from_pretrained(folder).eval()
    return loaded, inputs


def mamba():
    """Mamba (state-space): its cache layers keep conv and recurrent states in dicts."""
    from transformers import MambaConfig, MambaForCausalLM

    torch.manual_seed(0)
    config = MambaConfig(vocab_size=128, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4)
    return MambaForCausalLM(config).eval(), {"input_ids": _ids((4, 8), 128, seed=30), "use_cache": True}


def qwen2_moe():
    """Qwen2-MoE (mixture of experts): each token routed to 2 of 4 experts and a shared one."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    torch.manual_seed(0)
    config = Qwen2MoeConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=32,
    )
    return Qwen2MoeForCausalLM(config).eval(), {"input_ids": _ids((4, 8), 128, seed=31)}
