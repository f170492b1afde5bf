# shaped after scspinney/songbook:whisper_voice_recognition.py (rewritten, not copied)
"""Hand-rolled greedy decoding with WhisperForConditionalGeneration, printing per-token probabilities."""
import sys

import soundfile as sf
import torch
from transformers import WhisperForConditionalGeneration, WhisperProcessor

MODEL = "openai/whisper-small"
SOT, EOT = 50258, 50257
MAX_TOKENS = 120

processor = WhisperProcessor.from_pretrained(MODEL)
model = WhisperForConditionalGeneration.from_pretrained(MODEL)

path = sys.argv[1] if len(sys.argv) > 1 else "song.wav"
audio, sr = sf.read(path)
if audio.ndim > 1:
    audio = audio.mean(axis=1)
input_features = processor(audio, sampling_rate=sr, return_tensors="pt").input_features

decoder_ids = torch.tensor([[SOT]])
token_probs = []
for step in range(MAX_TOKENS):
    logits = model(input_features, decoder_input_ids=decoder_ids).logits
    probs = logits[0, -1].softmax(-1)
    next_id = int(probs.argmax())
    token_probs.append(probs[next_id].item())
    decoder_ids = torch.cat([decoder_ids, torch.tensor([[next_id]])], dim=1)
    if next_id == EOT:
        break

text = processor.batch_decode(decoder_ids, skip_special_tokens=True)[0]
print(text)
for tok, p in zip(decoder_ids[0, 1:].tolist(), token_probs):
    print(f"{processor.tokenizer.decode([tok])!r:>16} {p:.3f}")
