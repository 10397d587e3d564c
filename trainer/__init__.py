"""Training: the encoder, data stream, losses and Hugging Face trainer of Stage I, Stage II,
the SFT control and PHAGE, the built-in CPU models, and the model registry.

    python -m trainer.train CONFIG.yaml [--flag value ...]    # one training run
    python -m trainer.models build me5-small|qwen3-tiny        # build a built-in model once

Public API: ``Encoder``/``EncoderConfig`` (trainer.encoder), ``resolve`` (trainer.models),
``main`` (trainer.train), ``inference_device`` (trainer.devices: where evaluation and
mining encode), ``PhageEncoder`` / ``PhageLoss`` (trainer.phage:
claim-graph-guided attention and its objective; its data stream in trainer.phage_data). Imports ``schemas`` and ``lake`` (the registry write); never
``spark_jobs`` or ``evaluation``. Submodules are imported on use: torch loads only when needed.
"""

__all__ = [
    "arguments",
    "data",
    "encoder",
    "loss",
    "me5",
    "models",
    "phage",
    "phage_data",
    "registry",
    "train",
    "trainer",
]
