"""Fine-tune the embedded world model on recorded real episodes (``aw-mcp train``).

Install with ``pip install 'aw-mcp[train]'`` (torch, transformers, peft, gguf, accelerate).

record dirs --(examples.py: rendered as the server renders each call)--> token sequences
  --(lora.py: base GGUF in transformers + peft LoRA; trainer.py: the loop)--> LoRA weights
  --(gguf_adapter.py)--> ``adapter.gguf`` that llama.cpp loads on the base GGUF
  (``aw-mcp serve --lora FILE``; the bundled one is used by default).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.models import DomainSpec, WorldSpec
from aw_mcp.episode.prompt import PROFILES
from aw_mcp.training.examples import (
    DomainContext,
    ServingFormat,
    TrainingExample,
    build_examples,
    shared_prefix_length,
    split_validation,
)
from aw_mcp.training.trainer import ADAPTER, TrainSettings
from aw_mcp.trajectories.export import DomainResolver
from aw_mcp.trajectories.records import RecordedEpisode, load_record_dir
from aw_mcp.trajectories.world_file import record_dir_worlds

log = logging.getLogger(__name__)


@dataclass
class TrainJob:
    """What to train on and where to put it."""

    record_dirs: list[Path]
    out_dir: Path
    simulators: list[str] | None = None  # None: the bundled domains the records name
    world: Path | None = None
    profile: str = "small"
    base_model: str | None = None  # a catalogue name or a GGUF path; None: models.DEFAULT_MODEL
    max_tokens: int = 2048  # longest training sequence (longer episodes are cut)
    val_fraction: float = 0.05
    device: str = "auto"
    dtype: str = "auto"  # auto: bfloat16 on CUDA, float32 on CPU
    threads: int | None = None
    resume: bool = False
    # Start from another run's LoRA weights (its checkpoint.pt): a warm start with a fresh
    # optimizer and schedule, e.g. to continue a trained adapter on new episodes.
    init_from: Path | None = None


def training_domains(
    simulators: list[str] | None, by_dir: dict[Path, list[RecordedEpisode]]
) -> list[DomainSpec]:
    """The domains that render the episodes: ``--simulator`` names, else each record domain
    as serve would load it: bundled, or mirrored from its folder's ``tools/<domain>.json``."""
    if simulators:
        return [load_domain(name) for name in simulators]
    found: dict[str, DomainSpec] = {}
    for directory, episodes in by_dir.items():
        resolver = DomainResolver(record_dir=directory)
        for name in sorted({e.domain for e in episodes} - set(found)):
            found[name] = resolver.domain(name)
    return [found[name] for name in sorted(found)]


def trained_domains(
    episodes: list[RecordedEpisode],
    examples: list[TrainingExample],
    contexts: dict[str, DomainContext],
) -> list[str]:
    """The adapter domains of the episodes that became training sequences. A domain whose
    every episode was skipped (its first step longer than ``--max-tokens``) is not one the
    adapter knows, so serving must not pick the adapter for it."""
    kept = {e.episode for e in examples}
    trained = {e.domain for e in episodes if e.episode in kept}
    for name in sorted(set(contexts) - trained):
        log.warning("domain %s: no episode fits --max-tokens; not trained on", name)
    return sorted({contexts[name].domain.adapter_domain for name in trained})


@dataclass
class TrainingSet:
    """A job's episodes rendered as the server renders them, as training sequences."""

    base: Path  # the base GGUF the sequences are tokenized for
    episodes: list[RecordedEpisode]
    contexts: dict[str, DomainContext]
    examples: list[TrainingExample]

    @property
    def domains(self) -> list[str]:
        """The adapter domains an adapter trained on these sequences serves."""
        return trained_domains(self.episodes, self.examples, self.contexts)


def build_training_set(job: TrainJob) -> TrainingSet:
    """Load the job's record dirs and render them (tokenizing needs llama-cpp-python)."""
    from aw_mcp.models import DEFAULT_MODEL, resolve_model

    base = resolve_model(job.base_model or DEFAULT_MODEL)
    by_dir = {d: load_record_dir(d) for d in job.record_dirs}
    episodes = [e for found in by_dir.values() for e in found]
    if not episodes:
        raise ValueError(f"no episodes in {', '.join(map(str, job.record_dirs))}")
    world = load_world(job.world) if job.world else None
    contexts = {
        domain.name: DomainContext.of(domain, world)
        for domain in training_domains(job.simulators, by_dir)
    }
    profile = PROFILES[job.profile]()
    fmt = ServingFormat.from_gguf(base)
    worlds: dict[str, WorldSpec] = {}
    if not world:  # a --world given serves every episode; else each its own record dir's
        for directory, found in by_dir.items():
            worlds.update(record_dir_worlds(directory, found))
    examples = build_examples(episodes, contexts, profile, fmt, job.max_tokens, worlds)
    if not examples:
        raise ValueError("no episode could be turned into a training sequence")
    return TrainingSet(base, episodes, contexts, examples)


def run_training(job: TrainJob, settings: TrainSettings) -> dict[str, Any]:
    import torch

    from aw_mcp.engines.base import default_inference_threads
    from aw_mcp.training.gguf_adapter import AdapterMetadata, base_architecture
    from aw_mcp.training.lora import load_for_training
    from aw_mcp.training.trainer import Trainer

    torch.manual_seed(settings.seed)
    torch.set_num_threads(job.threads or default_inference_threads())
    training_set = build_training_set(job)
    base, examples = training_set.base, training_set.examples
    train, validation = split_validation(examples, job.val_fraction, settings.seed)
    prefix = shared_prefix_length(examples)
    log.info(
        "%d training episodes (%d target tokens), %d validation; shared prefix %d tokens",
        len(train),
        sum(e.target_count for e in train),
        len(validation),
        prefix,
    )
    loaded = load_for_training(base, settings.rank, settings.alpha, job.device, job.dtype)
    meta = AdapterMetadata(
        alpha=settings.alpha,
        profile=job.profile,
        base_model=base.name,
        domains=training_set.domains,
        n_layers=loaded.n_layers,
        n_head=loaded.n_head,
        n_kv_head=loaded.n_kv_head,
        architecture=base_architecture(base),
    )
    trainer = Trainer(loaded, train, validation, prefix, settings, job.out_dir, meta)
    if job.init_from and job.resume:
        # Kept on the command line of a resumed run: its checkpoint already holds weights
        # that started from there, so loading them again would undo its training.
        log.warning(
            "--init-from %s is not used: --resume continues OUT's checkpoint", job.init_from
        )
    elif job.init_from:
        trainer.load_weights(job.init_from)
    summary = trainer.run(resume=job.resume)
    return {
        **summary,
        "adapter": str(job.out_dir / ADAPTER),
        "train_episodes": len(train),
        "validation_episodes": len(validation),
        "history": trainer.history,
    }
