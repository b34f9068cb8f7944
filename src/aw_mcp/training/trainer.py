"""The training loop: LoRA on observation tokens, seeded, resumable, adapter written as it goes.

One step = one batch of episodes of similar length (``batches_by_length``). Every episode of a
domain starts with the same tokens (system prompt and demonstrations), so a step runs that
shared prefix once, without gradient, and every episode of the batch continues from its KV
cache (the same logits as the whole sequence; measured ~3x cheaper on CPU). Logits are taken
only where a target token is predicted: the vocabulary projection of every position would cost
more than the model's body.

Every ``checkpoint_every`` steps (and at the end, or when ``max_minutes`` is up) the LoRA
weights, optimizer and schedule go to ``checkpoint.pt`` and the adapter to ``adapter.gguf``,
so an interrupted run leaves a usable adapter and ``--resume`` continues where it stopped.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from aw_mcp.engines.transformers_cache import cache_argument, output_cache
from aw_mcp.errors import UserInputError
from aw_mcp.training.examples import TrainingExample
from aw_mcp.training.gguf_adapter import AdapterMetadata, read_gguf_adapter, write_gguf_adapter
from aw_mcp.training.lora import (
    LoadedModel,
    load_lora_state,
    load_lora_weights,
    lora_modules,
    lora_state,
    lora_weights,
)

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
ADAPTER = "adapter.gguf"
METRICS = "metrics.jsonl"


class TrainSettings(BaseModel):
    """How to train (every field is an ``aw-mcp train`` flag)."""

    rank: int = Field(default=16, ge=1, description="LoRA rank.")
    alpha: float = Field(default=32.0, gt=0, description="LoRA alpha (scale = alpha / rank).")
    lr: float = Field(default=5e-4, gt=0, description="Peak learning rate (AdamW).")
    warmup_steps: int = Field(default=10, ge=0, description="Steps of linear warm-up to lr.")
    min_lr_ratio: float = Field(default=0.1, ge=0, le=1, description="Cosine floor, x lr.")
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay.")
    batch_tokens: int = Field(
        default=2048, ge=64, description="Padded episode tokens per step (after the prefix)."
    )
    epochs: float = Field(default=1.0, gt=0, description="Passes over the training episodes.")
    max_steps: int | None = Field(default=None, ge=1, description="Stop after this many steps.")
    max_minutes: float | None = Field(
        default=None, gt=0, description="Stop (checkpoint and adapter saved) after this long."
    )
    eval_every: int = Field(default=20, ge=1, description="Steps between validation losses.")
    checkpoint_every: int = Field(default=20, ge=1, description="Steps between checkpoints.")
    seed: int = Field(
        default=0, description="Seed of the batch order, the validation split and the LoRA init."
    )


@dataclass
class StepBatch:
    examples: list[TrainingExample]


def batches_by_length(
    examples: list[TrainingExample], prefix: int, batch_tokens: int, seed: int
) -> list[StepBatch]:
    """Episodes sorted by length and packed so padded length x count <= batch_tokens; the
    batches come in a seeded random order."""
    ordered = sorted(examples, key=len)
    batches: list[StepBatch] = []
    current: list[TrainingExample] = []
    for example in ordered:
        longest = max([len(e) for e in current] + [len(example)]) - prefix
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(StepBatch(current))
            current = []
        current.append(example)
    if current:
        batches.append(StepBatch(current))
    random.Random(seed).shuffle(batches)
    return batches


def batch_loss(loaded: LoadedModel, batch: list[TrainingExample], prefix: int) -> tuple[Any, int]:
    """Mean cross-entropy over the batch's target tokens, and how many there were."""
    import torch

    device = loaded.device
    first = batch[0].input_ids
    cache = None
    if prefix > 0:
        with torch.no_grad():
            out = loaded.body(
                input_ids=torch.tensor([first[:prefix]], device=device), use_cache=True
            )
        cache = output_cache(out)
        cache.batch_repeat_interleave(len(batch))
    length = max(len(e) for e in batch) - prefix
    ids = torch.zeros((len(batch), length), dtype=torch.long, device=device)
    mask = torch.zeros((len(batch), prefix + length), dtype=torch.long, device=device)
    mask[:, :prefix] = 1
    rows, cols, labels = [], [], []
    for b, example in enumerate(batch):
        suffix = example.input_ids[prefix:]
        ids[b, : len(suffix)] = torch.tensor(suffix)
        mask[b, prefix : prefix + len(suffix)] = 1
        for j in range(1, len(suffix)):
            if example.targets[prefix + j]:
                rows.append(b)
                cols.append(j - 1)  # position j-1 predicts token j
                labels.append(suffix[j])
    positions = torch.arange(prefix, prefix + length, device=device).unsqueeze(0)
    hidden = loaded.body(
        input_ids=ids,
        attention_mask=mask,
        position_ids=positions.expand(len(batch), -1),
        **cache_argument(cache),
        use_cache=cache is not None,
    ).last_hidden_state
    picked = hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)]
    logits = loaded.lm_head(picked).float()
    target = torch.tensor(labels, device=device)
    return torch.nn.functional.cross_entropy(logits, target), len(labels)


def validation_loss(
    loaded: LoadedModel, examples: list[TrainingExample], prefix: int, batch_tokens: int
) -> float | None:
    import torch

    if not examples:
        return None
    total, count = 0.0, 0
    loaded.model.eval()
    with torch.no_grad():
        for batch in batches_by_length(examples, prefix, batch_tokens, seed=0):
            loss, n = batch_loss(loaded, batch.examples, prefix)
            total += loss.item() * n
            count += n
    loaded.model.train()
    return total / max(count, 1)


def learning_rate(step: int, total: int, settings: TrainSettings) -> float:
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, total - settings.warmup_steps)
    floor = settings.min_lr_ratio
    return settings.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


class Trainer:
    def __init__(
        self,
        loaded: LoadedModel,
        train: list[TrainingExample],
        validation: list[TrainingExample],
        prefix: int,
        settings: TrainSettings,
        out_dir: Path,
        adapter_meta: AdapterMetadata,
    ):
        import torch

        self.loaded = loaded
        self.train_examples = train
        self.validation = validation
        self.prefix = prefix
        self.settings = settings
        self.out_dir = out_dir
        self.adapter_meta = adapter_meta
        self.params = [p for p in loaded.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=settings.lr, weight_decay=settings.weight_decay
        )
        self.step = 0
        self.history: list[dict[str, Any]] = []

    def schedule(self) -> list[StepBatch]:
        """Every step's batch, the same on every run with this seed (resume skips ahead)."""
        epochs = [
            batches_by_length(
                self.train_examples,
                self.prefix,
                self.settings.batch_tokens,
                self.settings.seed + epoch,
            )
            for epoch in range(math.ceil(self.settings.epochs))
        ]
        steps = [batch for epoch in epochs for batch in epoch]
        total = round(len(epochs[0]) * self.settings.epochs)
        if self.settings.max_steps:
            total = min(total, self.settings.max_steps)
        return steps[:total]

    def run(self, resume: bool = False) -> dict[str, Any]:
        import torch
        from tqdm import tqdm

        torch.manual_seed(self.settings.seed)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            self.load_checkpoint()
        steps = self.schedule()
        started = time.monotonic()
        budget = self.settings.max_minutes * 60 if self.settings.max_minutes else None
        tokens = 0
        if self.step == 0:
            self._log({"step": 0, "val_loss": self._validate()})
        bar = tqdm(total=len(steps), initial=self.step, desc="train", unit="step")
        self.loaded.model.train()
        stopped_early = False
        while self.step < len(steps):
            batch = steps[self.step]
            lr = learning_rate(self.step, len(steps), self.settings)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            loss, n = batch_loss(self.loaded, batch.examples, self.prefix)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.params, 1.0)
            self.optimizer.step()
            self.step += 1
            tokens += sum(len(e) - self.prefix for e in batch.examples)
            elapsed = time.monotonic() - started
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{tokens / elapsed:.0f}")
            record: dict[str, Any] = {
                "step": self.step,
                "loss": round(loss.item(), 4),
                "targets": n,
                "lr": lr,
                "seconds": round(elapsed, 1),
            }
            if self.step % self.settings.eval_every == 0:
                record["val_loss"] = self._validate()
            self._log(record)
            out_of_time = budget is not None and elapsed >= budget
            if self.step % self.settings.checkpoint_every == 0 or out_of_time:
                self.save()
            if out_of_time:
                stopped_early = self.step < len(steps)
                break
        bar.close()
        last = self.history[-1] if self.history else {}
        # The last step validated already when it fell on eval_every: not again (minutes).
        if last.get("step") == self.step and "val_loss" in last:
            val_loss = last["val_loss"]
        else:
            val_loss = self._validate()
        final = {"step": self.step, "val_loss": val_loss, "final": True}
        self._log(final)
        self.save()
        return {**final, "stopped_early": stopped_early, "steps_planned": len(steps)}

    def _validate(self) -> float | None:
        loss = validation_loss(
            self.loaded, self.validation, self.prefix, self.settings.batch_tokens
        )
        return None if loss is None else round(loss, 4)

    def _log(self, record: dict[str, Any]) -> None:
        self.history.append(record)
        with (self.out_dir / METRICS).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if "val_loss" in record and record["val_loss"] is not None:
            log.info("step %d: validation loss %.4f", record["step"], record["val_loss"])

    def save(self) -> None:
        import torch

        state = {
            "step": self.step,
            "lora": lora_state(self.loaded),
            "optimizer": self.optimizer.state_dict(),
            "settings": self.settings.model_dump(),
            "torch_rng": torch.get_rng_state(),
        }
        tmp = self.out_dir / (CHECKPOINT + ".tmp")
        torch.save(state, tmp)
        tmp.replace(self.out_dir / CHECKPOINT)
        write_gguf_adapter(self.out_dir / ADAPTER, lora_weights(self.loaded), self.adapter_meta)

    def load_weights(self, source: Path) -> None:
        """Start from the LoRA weights of another run's checkpoint (not its optimizer or step),
        or of a GGUF adapter (a shipped one, say: its weights as written, in float16)."""
        if source.suffix == ".gguf":
            self._read_adapter(source)
            log.info("starting from the LoRA weights of the adapter %s", source)
            return
        state = self._read_checkpoint(source, "--init-from", ("rank", "alpha"))
        log.info("starting from the LoRA weights of %s (its step %d)", source, state["step"])

    def _read_adapter(self, path: Path) -> None:
        meta = self.adapter_meta
        found = read_gguf_adapter(
            path, lora_modules(self.loaded), meta.n_layers, meta.n_head, meta.n_kv_head
        )
        if found.architecture != meta.architecture:
            raise UserInputError(
                f"--init-from {path} adapts a {found.architecture} model; "
                f"this run trains a {meta.architecture} one"
            )
        if found.info.alpha != self.settings.alpha:
            raise UserInputError(
                f"--init-from {path} was trained with --alpha {found.info.alpha:g}; "
                f"this run has --alpha {self.settings.alpha:g}"
            )
        if found.info.base_model not in (None, meta.base_model):
            log.warning(
                "--init-from %s was trained on %s; this run's base is %s",
                path,
                found.info.base_model,
                meta.base_model,
            )
        load_lora_weights(self.loaded, found.weights)

    def load_checkpoint(self) -> None:
        import torch

        path = self.out_dir / CHECKPOINT
        state = self._read_checkpoint(path, "--resume", ("rank", "alpha", "seed"))
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.step = state["step"]
        log.info("resumed from %s at step %d", path, self.step)

    def _read_checkpoint(self, path: Path, flag: str, same: tuple[str, ...]) -> dict[str, Any]:
        """Load ``path``'s LoRA weights into the model, once its ``same`` settings are this
        run's; the whole checkpoint is returned."""
        import torch

        if not path.is_file():
            raise FileNotFoundError(f"{flag}: no checkpoint at {path}")
        state = torch.load(path, weights_only=False)
        saved = TrainSettings.model_validate(state["settings"])
        theirs = {name: getattr(saved, name) for name in same}
        ours = {name: getattr(self.settings, name) for name in same}
        if theirs != ours:

            def flags(values: dict[str, Any]) -> str:
                return " ".join(f"--{name} {value}" for name, value in values.items())

            raise UserInputError(
                f"{flag} {path} was trained with {flags(theirs)}; this run has {flags(ours)}"
            )
        load_lora_state(self.loaded, state["lora"])
        return state
