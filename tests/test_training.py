"""aw-mcp train end to end on a tiny real-bash record set: the loss falls, the GGUF adapter
loads in llama.cpp and changes what the embedded model answers; serving picks its profile.

Real model, real LoRA, CPU. The domain is the small test terminal (its short prompt keeps the
few training steps well under a minute); the records are real bash output (tests/data).
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import numpy as np
import pytest

pytest.importorskip("peft")
pytest.importorskip("torch")

from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.models import ToolCall
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.episode.prompt import SmallModelProfile, build_messages
from aw_mcp.models.adapters import read_adapter_info
from aw_mcp.models.fetch import resolve_model
from aw_mcp.records.reader import load_record_dir
from aw_mcp.testing import small_model_path
from aw_mcp.training.examples import (
    DomainContext,
    ServingFormat,
    build_examples,
    shared_prefix_length,
)
from aw_mcp.training.gguf_adapter import (
    AdapterMetadata,
    base_architecture,
    rotary_permute,
    rotary_unpermute,
)
from aw_mcp.training.lora import load_for_training
from aw_mcp.training.trainer import ADAPTER, CHECKPOINT, Trainer, TrainSettings, validation_loss
from aw_mcp.wiring.assemble import build_catalogue, resolve_adapters, serving_profile
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT, TEST_THREADS, small_engine
from tests.engine_support import write_tiny_domain

pytestmark = pytest.mark.transformers

DATA = REPO_ROOT / "tests" / "data"


@pytest.fixture(scope="module")
def serving_format() -> ServingFormat:
    return ServingFormat.from_gguf(small_model_path())


def _examples(domain_file: Path, fmt: ServingFormat):
    context = DomainContext.of(load_domain(str(domain_file)), load_world(DATA / "train_world.yaml"))
    episodes = load_record_dir(DATA / "train_records")
    # The records name the terminal domain; the tiny one stands in for it (short prompt).
    examples = build_examples(episodes, {"terminal": context}, SmallModelProfile(), fmt, 1024)
    return episodes, context, examples


def test_an_episode_is_the_servers_prompts_with_observations_as_targets(tmp_path, serving_format):
    episodes, context, examples = _examples(write_tiny_domain(tmp_path), serving_format)
    assert len(examples) == len(episodes) == 4
    episode, example = episodes[0], examples[0]
    turns = episode.turns()
    # Before each target: exactly the tokens the server sends for that step.
    starts = [i for i in range(len(example)) if example.targets[i] and not example.targets[i - 1]]
    assert len(starts) == len(turns) == example.steps
    for k, start in enumerate(starts):
        messages = build_messages(
            SmallModelProfile(),
            context.domain,
            context.domain.tools,
            context.world,
            turns[:k],
            0,
            turns[k].action,
            turns[k].index,
            [],
        )
        served = serving_format.tokenize_text(serving_format.renderer.render(messages), True)
        assert example.input_ids[:start] == served
    # The targets are the observation and the end-of-turn token that stops generation.
    first_target = [t for t, m in zip(example.input_ids, example.targets, strict=True) if m]
    assert (
        serving_format.tokenize_text(turns[0].observation + "<|im_end|>", False)
        == (first_target[: len(serving_format.tokenize_text(turns[0].observation, False)) + 1])
    )
    assert 0 < shared_prefix_length(examples) < starts[0]


def test_a_few_steps_lower_the_loss_and_the_adapter_changes_llama_cpp_output(
    tmp_path, serving_format
):
    domain_file = write_tiny_domain(tmp_path)
    _, context, examples = _examples(domain_file, serving_format)
    settings = TrainSettings(
        rank=8,
        alpha=16,
        lr=3e-3,
        warmup_steps=0,
        batch_tokens=4096,
        max_steps=3,
        epochs=3,
        eval_every=3,
    )
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(TEST_THREADS)
    loaded = load_for_training(small_model_path(), settings.rank, settings.alpha, "cpu")
    meta = AdapterMetadata(
        alpha=settings.alpha,
        profile="small",
        base_model=small_model_path().name,
        domains=["terminal"],
        n_layers=loaded.n_layers,
        n_head=loaded.n_head,
        n_kv_head=loaded.n_kv_head,
    )
    prefix = shared_prefix_length(examples)
    out = tmp_path / "run"
    # Validation on the training episodes themselves: this test is about the loss falling.
    trainer = Trainer(loaded, examples, examples, prefix, settings, out, meta)
    validations: list[float | None] = []
    validate = trainer._validate
    trainer._validate = lambda: validations.append(validate()) or validations[-1]  # type: ignore[method-assign]
    summary = trainer.run()
    before = next(h["val_loss"] for h in _metrics(out) if h["step"] == 0)
    assert summary["val_loss"] < before * 0.7, (before, summary["val_loss"])
    # Step 0 and step 3 (eval_every); the final record takes step 3's, not a third pass.
    assert len(validations) == 2 and summary["val_loss"] == validations[-1]

    # --init-from: a new run starts from these weights (fresh optimizer), not from the base.
    warm = load_for_training(small_model_path(), settings.rank, settings.alpha, "cpu")
    again = Trainer(warm, examples, examples, prefix, settings, tmp_path / "warm", meta)
    again.load_weights(out / CHECKPOINT)
    warm_loss = validation_loss(warm, examples, prefix, settings.batch_tokens)
    assert warm_loss == pytest.approx(summary["val_loss"], abs=1e-3)
    # --init-from ADAPTER.gguf: the exported adapter (float16, q/k rows in llama.cpp's order:
    # SmolLM2 is a llama model) reads back as the same weights, so the same loss.
    from_gguf = load_for_training(small_model_path(), settings.rank, settings.alpha, "cpu")
    Trainer(from_gguf, examples, examples, prefix, settings, tmp_path / "g", meta).load_weights(
        out / ADAPTER
    )
    gguf_loss = validation_loss(from_gguf, examples, prefix, settings.batch_tokens)
    assert gguf_loss == pytest.approx(summary["val_loss"], abs=5e-3), (gguf_loss, before)
    other_alpha = settings.model_copy(update={"alpha": 8})
    with pytest.raises(ValueError, match="--alpha 16"):
        Trainer(
            from_gguf, examples, examples, prefix, other_alpha, tmp_path / "y", meta
        ).load_weights(out / ADAPTER)
    # --resume: the same run's weights, optimizer and step; another seed is refused.
    resumed = Trainer(warm, examples, examples, prefix, settings, out, meta)
    resumed.load_checkpoint()
    assert resumed.step == 3
    other_seed = settings.model_copy(update={"seed": 1})
    with pytest.raises(ValueError, match="--seed 0"):
        Trainer(warm, examples, examples, prefix, other_seed, out, meta).load_checkpoint()
    other_rank = settings.model_copy(update={"rank": 4})
    with pytest.raises(ValueError, match="--rank 8"):
        Trainer(warm, examples, examples, prefix, other_rank, tmp_path / "x", meta).load_weights(
            out / CHECKPOINT
        )

    adapter = out / ADAPTER
    info = read_adapter_info(adapter)
    assert (info.profile, info.domains, info.alpha) == ("small", ("terminal",), 16.0)

    # Serving: the adapter's profile is chosen, and the answers change.
    settings_ = ServeSettings(simulator=[str(domain_file)], lora=[adapter])
    adapters = resolve_adapters(settings_, build_catalogue(settings_))
    assert [a.path for a in adapters] == [adapter]
    assert serving_profile(settings_, adapters) == "small"

    plain, adapted = pwd_answers(context, adapter, max_tokens=24)
    assert adapted != plain
    assert adapted.startswith("/home/user/project"), adapted  # what the real records taught


def test_reading_an_adapter_undoes_the_rotary_row_order_it_was_written_in():
    rows = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2 * 3 * 4, 5)  # 3 heads of 8
    permuted = rotary_permute(rows, 3)
    assert not np.array_equal(permuted, rows)
    assert np.array_equal(rotary_unpermute(permuted, 3), rows)


def pwd_answers(context: DomainContext, adapter: Path, max_tokens: int, **engine_options):
    """llama.cpp's answer to a first ``pwd`` in ``context``'s world, without and with
    ``adapter``."""
    messages = build_messages(
        SmallModelProfile(),
        context.domain,
        context.domain.tools,
        context.world,
        [],
        0,
        ToolCall(tool="run_command", arguments={"command": "pwd"}),
        1,
        [],
    )
    request = GenerationRequest(messages=messages, max_tokens=max_tokens)

    async def answer(**options) -> str:
        engine = small_engine(**engine_options, **options)
        try:
            return (await engine.generate(request)).text
        finally:
            await engine.aclose()

    return anyio.run(answer), anyio.run(lambda: answer(lora=[adapter]))


def test_a_qwen2_base_exports_an_adapter_that_llama_cpp_loads_and_that_changes_its_output(
    tmp_path,
):
    """The default world model is a qwen2 GGUF: its adapter must carry the qwen2 architecture
    and its tensor names, with q/k rows as trained (llama.cpp's qwen2 layout is not permuted);
    llama.cpp refuses an adapter of another architecture."""
    base = resolve_model("qwen2.5-coder-0.5b")
    assert base_architecture(base) == "qwen2"
    fmt = ServingFormat.from_gguf(base)
    domain_file = write_tiny_domain(tmp_path)
    _, context, examples = _examples(domain_file, fmt)
    settings = TrainSettings(
        rank=4, alpha=32, lr=5e-3, warmup_steps=0, batch_tokens=4096, max_steps=2, epochs=2
    )
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(TEST_THREADS)
    loaded = load_for_training(base, settings.rank, settings.alpha, "cpu")
    meta = AdapterMetadata(
        alpha=settings.alpha,
        profile="small",
        base_model=base.name,
        domains=["terminal"],
        n_layers=loaded.n_layers,
        n_head=loaded.n_head,
        n_kv_head=loaded.n_kv_head,
        architecture="qwen2",
    )
    out = tmp_path / "qwen"
    Trainer(loaded, examples[:2], [], shared_prefix_length(examples), settings, out, meta).run()
    # llama.cpp refused the adapter before the fix ("model arch and LoRA arch mismatch").
    plain, adapted = pwd_answers(context, out / ADAPTER, max_tokens=16, model=str(base))
    assert adapted != plain


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_records_of_a_mirrored_server_train_under_the_mirror_adapter_domain():
    """A record dir of a real server that is no bundled domain renders with its captured
    tools/list (as serve --tools-from would), and adapters know it as a mirror
    (``mcp-mirror``), so one trained on mirrors serves servers it never saw, and the
    bundled ``mcp`` world (the everything server) is a domain of its own."""
    from aw_mcp.training.job import training_domains

    memory = REPO_ROOT / "tests/data/records/memory"
    terminal = REPO_ROOT / "tests/data/records/terminal-varied"
    by_dir = {d: load_record_dir(d) for d in (memory, terminal)}
    domains = {d.name: d for d in training_domains(None, by_dir)}
    assert sorted(domains) == ["memory", "terminal"]
    assert "create_entities" in {t.name for t in domains["memory"].tools}
    assert domains["memory"].adapter_domain == "mcp-mirror"
    assert domains["terminal"].adapter_domain == "terminal"
    everything = REPO_ROOT / "tests/data/records/everything"
    bundled_mcp = training_domains(None, {everything: load_record_dir(everything)})
    assert [d.adapter_domain for d in bundled_mcp] == ["mcp"]
    with pytest.raises(ValueError, match=r"tools/memory\.json"):
        training_domains(None, {terminal: by_dir[memory]})  # no capture beside them


def test_a_domain_whose_episodes_all_exceed_max_tokens_is_not_in_the_adapters_domains(
    serving_format,
):
    """Every web episode's first step is longer than a tiny --max-tokens: the adapter must not
    claim the web domain, or serving would pick it for a world it never learned."""
    from aw_mcp.training.job import trained_domains, training_domains

    dirs = [
        REPO_ROOT / "tests/data/records/web",
        REPO_ROOT / "tests/data/records/terminal-varied",
    ]
    by_dir = {d: load_record_dir(d)[:3] for d in dirs}
    episodes = [e for found in by_dir.values() for e in found]
    contexts = {d.name: DomainContext.of(d, None) for d in training_domains(None, by_dir)}
    examples = build_examples(episodes, contexts, SmallModelProfile(), serving_format, 1200)
    assert {e.episode for e in examples} == {e.episode for e in by_dir[dirs[1]]}
    assert trained_domains(episodes, examples, contexts) == ["terminal"]


def test_init_from_bundled_is_the_adapter_serve_picks_and_keeps_its_profile_and_alpha():
    """``--init-from bundled`` on a recorded server of one's own starts from the mirrors'
    adapter (what serve --tools-from would answer with), in that adapter's prompt profile and
    at its alpha unless --profile or --alpha is given; a base or domains no bundled adapter
    fits is a clear error."""
    from aw_mcp.errors import UserInputError
    from aw_mcp.training.job import (
        BUNDLED,
        TrainJob,
        adopt_adapter_settings,
        job_records,
        record_adapter_domains,
        resolve_init_from,
    )
    from aw_mcp.training.trainer import TrainSettings

    mirrors = REPO_ROOT / "adapters" / "qwen2.5-coder-0.5b-mirrors.gguf"
    info = read_adapter_info(mirrors)
    assert info.base_model and info.domains == ("mcp-mirror",)
    job = TrainJob(record_dirs=[REPO_ROOT / "tests/data/records/memory"], out=Path("unused"))
    domains = record_adapter_domains(None, job_records(job))
    assert domains == ["mcp-mirror"]
    found = resolve_init_from(BUNDLED, info.base_model, domains)
    assert found.name == mirrors.name
    assert resolve_init_from(BUNDLED, info.base_model, ["terminal"]).name == (
        "qwen2.5-coder-0.5b.gguf"
    )
    with pytest.raises(UserInputError, match="no bundled adapter"):
        resolve_init_from(BUNDLED, "some-other-base.gguf", ["mcp-mirror"])
    assert resolve_init_from(mirrors, "any.gguf", []) == mirrors  # a file is itself

    # train's own defaults differ from the mirrors' adapter's, else this could not fail
    assert (job.profile, TrainSettings().alpha) != (info.profile, info.alpha)
    adopted_job, adopted = adopt_adapter_settings(job, TrainSettings(), found)
    assert (adopted_job.profile, adopted.alpha) == (info.profile, info.alpha)
    given_job = TrainJob(**{**job.model_dump(), "profile": "small"})  # --profile small given
    kept_job, kept = adopt_adapter_settings(given_job, TrainSettings(alpha=64), found)
    assert (kept_job.profile, kept.alpha) == ("small", 64)
