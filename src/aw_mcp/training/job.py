"""An ``aw-mcp train`` run: the job (what to train on, where to write), its record dirs
rendered into training sequences, and the run that turns them into an adapter."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.models import DomainSpec, WorldSpec
from aw_mcp.episode.prompt import PROFILES, ProfileName
from aw_mcp.errors import UserInputError
from aw_mcp.export.rendering import DomainResolver
from aw_mcp.records.folder import record_dir_worlds
from aw_mcp.records.reader import RecordedEpisode, load_record_dir
from aw_mcp.sections import Section, flag
from aw_mcp.training.examples import (
    DomainContext,
    ServingFormat,
    TrainingExample,
    build_examples,
    shared_prefix_length,
    split_validation,
)
from aw_mcp.training.trainer import ADAPTER, TrainSettings

log = logging.getLogger(__name__)


JOB = "what to train on"


class TrainJob(Section):
    """What to train on and where to put it: every field is an ``aw-mcp train`` argument
    (``record_dirs`` the positional one), like the hyper-parameters of ``TrainSettings``."""

    record_dirs: list[Path] = Field(
        description="folders of recorded episodes (JSONL CallRecords, e.g. serve --record-dir "
        "output)",
        json_schema_extra={"positional": True, "metavar": "RECORD_DIR"},
    )
    out: Path = Field(
        description="where adapter.gguf, checkpoint.pt and the training metrics are written",
        json_schema_extra=flag(JOB, "DIR"),
    )
    simulator: list[str] | None = Field(
        default=None,
        description="domain of the episodes, as for serve (default: the bundled domains they "
        "name); repeatable",
        json_schema_extra=flag(JOB, "NAME|FILE"),
    )
    world: Path | None = Field(
        default=None,
        description="the --world served with",
        json_schema_extra=flag(JOB, "FILE.yaml"),
    )
    profile: ProfileName = Field(
        default="small",
        description="prompt profile the episodes are rendered with; recorded in the adapter "
        "and used when it is served",
        json_schema_extra=flag(JOB),
    )
    model: str | None = Field(
        default=None,
        description="base model: a known model (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, "
        "smollm2-135m) or a GGUF file (default: qwen2.5-coder-0.5b, the default of serve)",
        json_schema_extra=flag(JOB, "NAME|GGUF"),
    )
    max_tokens: int = Field(
        default=2048,
        ge=64,
        description="longest training sequence (longer episodes are cut)",
        json_schema_extra=flag(JOB),
    )
    val_fraction: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        description="episodes of RECORD_DIR held back for validation loss",
        json_schema_extra=flag(JOB),
    )
    device: str = Field(
        default="auto",
        description="auto (CUDA when present), cpu, cuda",
        json_schema_extra=flag(JOB),
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="base model weights: auto = bfloat16 on CUDA, float32 on CPU; bfloat16 is "
        "~2.7x faster on CPUs with AVX512-BF16",
        json_schema_extra=flag(JOB),
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        description="CPU threads (default: all cores but one)",
        json_schema_extra=flag(JOB),
    )
    resume: bool = Field(
        default=False, description="continue from OUT/checkpoint.pt", json_schema_extra=flag(JOB)
    )
    init_from: Path | None = Field(
        default=None,
        description="start from another run's LoRA weights (fresh optimizer and schedule): its "
        "checkpoint, or a GGUF adapter, e.g. to continue a trained adapter on new episodes; "
        "'bundled': the bundled adapter serve would use for these episodes' domains (for a "
        "recorded server of your own, the mirrors' adapter). Without --profile and --alpha, a "
        "GGUF adapter's are kept. Ignored with --resume",
        json_schema_extra=flag(JOB, "CHECKPOINT.pt|ADAPTER.gguf|bundled"),
    )


BUNDLED = Path("bundled")  # --init-from's name for the bundled adapter of the episodes


def resolve_init_from(init_from: Path, base_model: str, domains: list[str]) -> Path:
    """The file ``--init-from`` names: itself, or for ``bundled`` (where no such file is) the
    bundled adapter serve picks for ``domains`` on ``base_model``."""
    from aw_mcp.models.adapters import default_adapters

    if init_from != BUNDLED or init_from.exists():
        return init_from
    found = default_adapters(base_model, domains)
    if not found:
        raise UserInputError(
            f"--init-from bundled: no bundled adapter is made for {base_model} and the "
            f"domains {', '.join(domains)}; give an adapter file, or leave --init-from out"
        )
    log.info("--init-from bundled: %s", found[0].path)
    return found[0].path


def adopt_adapter_settings(
    job: TrainJob, settings: TrainSettings, init_from: Path
) -> tuple[TrainJob, TrainSettings]:
    """The job and settings with the prompt profile and alpha of the GGUF adapter a run starts
    from, where --profile and --alpha were not given: its weights were trained on that layout
    and at that scale (the mirrors' adapter on ``default``, where train's own default is
    ``small``)."""
    from aw_mcp.models.adapters import read_adapter_info

    if init_from.suffix != ".gguf":
        return job, settings  # a checkpoint's rank and alpha are checked when it is read
    info = read_adapter_info(init_from)
    if "alpha" not in settings.model_fields_set and info.alpha and info.alpha != settings.alpha:
        log.info("--init-from %s: its --alpha %g", init_from, info.alpha)
        settings = settings.model_copy(update={"alpha": info.alpha})
    if "profile" not in job.model_fields_set and info.profile in PROFILES:
        if info.profile != job.profile:
            log.info("--init-from %s: its --profile %s", init_from, info.profile)
        job = job.model_copy(update={"profile": info.profile})
    return job, settings


def record_adapter_domains(
    simulators: list[str] | None, by_dir: dict[Path, list[RecordedEpisode]]
) -> list[str]:
    """The adapter domains of the loaded record dirs (before any episode is rendered)."""
    return sorted({d.adapter_domain for d in training_domains(simulators, by_dir)})


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


def job_base(job: TrainJob) -> Path:
    """The base GGUF the job trains on (resolved and verified)."""
    from aw_mcp.models.catalogue import DEFAULT_MODEL
    from aw_mcp.models.fetch import resolve_model

    return resolve_model(job.model or DEFAULT_MODEL)


def job_records(job: TrainJob) -> dict[Path, list[RecordedEpisode]]:
    """The episodes of each of the job's record dirs."""
    return {d: load_record_dir(d) for d in job.record_dirs}


def build_training_set(
    job: TrainJob,
    base: Path | None = None,
    by_dir: dict[Path, list[RecordedEpisode]] | None = None,
) -> TrainingSet:
    """Render the job's record dirs (tokenizing needs llama-cpp-python); ``base`` and
    ``by_dir``: the base and the loaded dirs where the caller has them already."""
    base = base or job_base(job)
    by_dir = by_dir if by_dir is not None else job_records(job)
    episodes = [e for found in by_dir.values() for e in found]
    if not episodes:
        raise UserInputError(f"no episodes in {', '.join(map(str, job.record_dirs))}")
    world = load_world(job.world) if job.world else None
    contexts = {
        domain.name: DomainContext.of(domain, world)
        for domain in training_domains(job.simulator, by_dir)
    }
    profile = PROFILES[job.profile]()
    fmt = ServingFormat.from_gguf(base)
    worlds: dict[str, WorldSpec] = {}
    if not world:  # a --world given serves every episode; else each its own record dir's
        for directory, found in by_dir.items():
            worlds.update(record_dir_worlds(directory, found))
    examples = build_examples(episodes, contexts, profile, fmt, job.max_tokens, worlds)
    if not examples:
        raise UserInputError("no episode could be turned into a training sequence")
    return TrainingSet(base, episodes, contexts, examples)


def run_training(job: TrainJob, settings: TrainSettings) -> dict[str, Any]:
    import torch

    from aw_mcp.engines.base import default_inference_threads
    from aw_mcp.training.gguf_adapter import AdapterMetadata, base_architecture
    from aw_mcp.training.lora import load_for_training
    from aw_mcp.training.trainer import Trainer

    torch.manual_seed(settings.seed)
    torch.set_num_threads(job.threads or default_inference_threads())
    base, by_dir = job_base(job), job_records(job)
    init_from = None
    if job.init_from and not job.resume:
        domains = record_adapter_domains(job.simulator, by_dir)
        init_from = resolve_init_from(job.init_from, base.name, domains)
        job, settings = adopt_adapter_settings(job, settings, init_from)
    training_set = build_training_set(job, base, by_dir)
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
    trainer = Trainer(loaded, train, validation, prefix, settings, job.out, meta)
    if job.init_from and job.resume:
        # Kept on the command line of a resumed run: its checkpoint already holds weights
        # that started from there, so loading them again would undo its training.
        log.warning(
            "--init-from %s is not used: --resume continues OUT's checkpoint", job.init_from
        )
    elif init_from:
        trainer.load_weights(init_from)
    summary = trainer.run(resume=job.resume)
    return {
        **summary,
        "adapter": str(job.out / ADAPTER),
        "train_episodes": len(train),
        "validation_episodes": len(validation),
        "history": trainer.history,
    }
