"""The ``aw-mcp`` command line."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from aw_mcp import __version__
from aw_mcp.commands import register_all
from aw_mcp.config import ServeSettings
from aw_mcp.yaml_files import DataFileError

log = logging.getLogger("aw_mcp")


def _add_serve_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve simulated tools over MCP (stdio by default)",
        description="Serve simulated tools to MCP clients. Flags override AW_MCP_* variables.",
        argument_default=argparse.SUPPRESS,  # unset flags leave env/defaults in charge
    )
    p.add_argument(
        "--simulator",
        action="append",
        metavar="NAME|FILE",
        help="a bundled domain (terminal, ...) or a domain YAML file; repeatable "
        "(default: terminal)",
    )
    p.add_argument(
        "--tools-from",
        dest="tools_from",
        action="append",
        type=Path,
        metavar="FILE.json",
        help="serve the tools of a captured tools/list (see 'aw-mcp capture'), simulated; "
        "repeatable; without --simulator only these tools are served",
    )
    p.add_argument(
        "--world",
        type=Path,
        metavar="FILE.yaml",
        help="extra world facts (same shape as a domain's world: block)",
    )
    p.add_argument(
        "--faults",
        action="append",
        type=Path,
        metavar="NAME|FILE",
        help="a bundled fault scenario (disk-full, ...; see `aw-mcp faults list`) or a "
        "scenario YAML file; repeatable",
    )
    p.add_argument(
        "--profile",
        choices=["default", "small", "agentworld"],
        help="prompt format: default, small (short, for ~100M models; what the bundled "
        "adapter was trained with), or the format Qwen-AgentWorld was trained on "
        "(default: the LoRA adapter's, else default)",
    )
    p.add_argument("--transport", choices=["stdio", "http"])
    p.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP port (default 8765)")
    p.add_argument(
        "--engine",
        choices=["llama-cpp", "transformers", "openai"],
        help="llama-cpp (GGUF, default), transformers (HF model on CUDA or CPU; "
        "pip install 'aw-mcp[transformers]') or openai (an OpenAI-compatible server: vLLM, "
        "SGLang, llama.cpp)",
    )
    p.add_argument(
        "--model",
        type=Path,
        metavar="PATH",
        help="GGUF model file (default: the embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument("--n-ctx", dest="n_ctx", type=int, help="context window in tokens")
    p.add_argument("--threads", type=int, help="CPU threads for inference (default: all)")
    p.add_argument(
        "--n-gpu-layers",
        dest="n_gpu_layers",
        type=int,
        help="layers to offload to the GPU (-1: all; needs a GPU build)",
    )
    p.add_argument(
        "--kv-snapshot-mb",
        dest="kv_snapshot_mb",
        type=int,
        help="memory for idle episodes' KV snapshots (default 1024)",
    )
    p.add_argument(
        "--instances",
        type=int,
        help="local engines: copies of the model serving episodes side by side (default 1)",
    )
    p.add_argument(
        "--lora",
        action="append",
        type=Path,
        metavar="FILE.gguf",
        help="a GGUF LoRA adapter to apply (llama-cpp engine; see 'aw-mcp train'); "
        "repeatable; replaces the bundled adapter the embedded model uses by default",
    )
    p.add_argument(
        "--no-lora",
        dest="no_lora",
        action="store_true",
        help="no LoRA adapter, not even the bundled default one",
    )
    tf = p.add_argument_group("transformers engine")
    tf.add_argument(
        "--hf-model",
        dest="hf_model",
        metavar="ID|DIR",
        help="Hugging Face model id or local folder (default: --model, or the embedded GGUF)",
    )
    tf.add_argument(
        "--gguf-file",
        dest="gguf_file",
        metavar="NAME",
        help="load this GGUF file from --hf-model with transformers' GGUF loader",
    )
    tf.add_argument("--device", help="auto (CUDA when present), cpu, cuda, cuda:1, ...")
    tf.add_argument("--dtype", choices=["auto", "float32", "float16", "bfloat16"])
    tf.add_argument(
        "--device-map", dest="device_map", help='"auto" spreads the model over all GPUs'
    )
    tf.add_argument(
        "--trust-remote-code",
        dest="trust_remote_code",
        action="store_true",
        help="allow model code from the model's repository",
    )
    oa = p.add_argument_group("openai engine")
    oa.add_argument(
        "--base-url", dest="base_url", help="server URL (default http://127.0.0.1:8000/v1)"
    )
    oa.add_argument(
        "--model-name",
        dest="model_name",
        help="served model name (default: the first the server lists)",
    )
    oa.add_argument(
        "--api-key-env",
        dest="api_key_env",
        metavar="VAR",
        help="environment variable with the API key (default AW_MCP_OPENAI_API_KEY, "
        "then OPENAI_API_KEY)",
    )
    oa.add_argument("--connect-timeout", dest="connect_timeout", type=float, metavar="S")
    oa.add_argument(
        "--read-timeout",
        dest="read_timeout",
        type=float,
        metavar="S",
        help="longest silence while an answer streams (default 300)",
    )
    oa.add_argument(
        "--request-timeout",
        dest="request_timeout",
        type=float,
        metavar="S",
        help="limit on a whole call, retries included (default: none)",
    )
    oa.add_argument("--max-retries", dest="max_retries", type=int)
    oa.add_argument("--concurrency", type=int, help="requests in flight to the server (default 64)")
    oa.add_argument(
        "--reasoning-budget",
        dest="reasoning_budget",
        type=int,
        metavar="TOKENS",
        help="tokens a reasoning model may think with, on top of each tool's observation "
        "budget (Qwen-AgentWorld: several thousand)",
    )
    oa.add_argument(
        "--json-mode",
        dest="json_mode",
        choices=["json_schema", "json_object", "off"],
        help="how outputSchema constraints are sent (default json_schema)",
    )
    p.add_argument(
        "--record-dir",
        dest="record_dir",
        type=Path,
        metavar="DIR",
        help="append every call to DIR/<episode>.jsonl",
    )
    p.add_argument(
        "--grounding",
        type=Path,
        metavar="DIR",
        help="record dir of real episodes: show the model the most similar real "
        "transitions (BM25) as examples for each call",
    )
    p.add_argument(
        "--grounding-k",
        dest="grounding_k",
        type=int,
        metavar="N",
        help="real transitions shown per call (default 3)",
    )
    p.add_argument(
        "--no-replay-read-only",
        dest="replay_read_only",
        action="store_false",
        help="always ask the model, even for a repeated read-only call",
    )
    p.add_argument("--log-level", dest="log_level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    overrides = {k: v for k, v in vars(args).items() if k not in ("handler", "command")}
    settings = ServeSettings(**overrides)
    _configure_logging(settings.log_level)
    from aw_mcp.runtime import build_simulator
    from aw_mcp.server.app import build_server
    from aw_mcp.server.transports import serve_http, serve_stdio

    simulator = build_simulator(settings)  # bad domain/world/fault files fail here, clearly
    server = build_server(simulator)
    log.info(
        "aw-mcp %s: %d tools from %s on %s",
        __version__,
        len(simulator.catalogue),
        ", ".join(d.name for d in simulator.catalogue.domains),
        simulator.engine.name,
    )

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            # Load the model in the background: tools/list answers at once, calls wait.
            tg.start_soon(simulator.engine.start)
            if settings.transport == "http":
                await serve_http(server, settings.host, settings.port)
            else:
                await serve_stdio(server)
            tg.cancel_scope.cancel()

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main)
    return 0


def _add_capture_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "capture",
        help="save the tools/list of a real MCP server (to serve with --tools-from)",
        description="Connect to a real MCP server as a client and save its tools/list as "
        "JSON. Examples: aw-mcp capture --out time.json -- uvx mcp-server-time; "
        "aw-mcp capture --out x.json --url http://127.0.0.1:8000/mcp",
    )
    p.add_argument("--out", type=Path, required=True, metavar="FILE.json")
    p.add_argument("--url", help="a Streamable HTTP server instead of a command")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the server command; repeatable",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    p.add_argument(
        "server_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND ARGS",
        help="the server to launch over stdio",
    )
    p.set_defaults(handler=_capture)


def _capture(args: argparse.Namespace) -> int:
    from aw_mcp.capture import CaptureError, capture_tools, stdio_target, write_capture

    command = args.server_command[1:] if args.server_command[:1] == ["--"] else args.server_command
    if bool(args.url) == bool(command):
        print("aw-mcp capture: give either --url URL or -- COMMAND ARGS", file=sys.stderr)
        return 2
    if bad := [item for item in args.env if "=" not in item]:
        print(f"aw-mcp capture: --env needs KEY=VALUE, got {bad[0]!r}", file=sys.stderr)
        return 2
    env = dict(item.split("=", 1) for item in args.env)
    try:
        target = args.url or stdio_target(command, env)
        capture = anyio.run(capture_tools, target, args.timeout)
    except CaptureError as exc:
        print(f"aw-mcp capture: {exc}", file=sys.stderr)
        return 1
    write_capture(capture, args.out)
    print(f"saved {len(capture['tools'])} tools to {args.out}", file=sys.stderr)
    return 0


def _list_simulators(args: argparse.Namespace) -> int:
    from aw_mcp.domain.loader import bundled_domain_names, load_domain

    for name in bundled_domain_names():
        domain = load_domain(name)
        print(f"{name:12} {len(domain.tools):3} tools  {domain.description}")
    return 0


def _add_faults_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("faults", help="check, list and describe fault scenario files")
    actions = p.add_subparsers(dest="faults_command", required=True)
    check = actions.add_parser(
        "check", help="validate scenario files; name file, line and field of each error"
    )
    check.add_argument("files", nargs="+", metavar="NAME|FILE")
    check.set_defaults(handler=_check_faults)
    actions.add_parser("list", help="list the bundled scenarios").set_defaults(handler=_list_faults)
    actions.add_parser(
        "schema", help="print the JSON Schema of scenario files (for editors)"
    ).set_defaults(handler=_print_faults_schema)


def _check_faults(args: argparse.Namespace) -> int:
    from aw_mcp.faults.scenario import Scenario, resolve_scenario_path
    from aw_mcp.yaml_files import load_yaml_file

    failed = 0
    for name in args.files:
        try:
            path = resolve_scenario_path(name)
            scenario = load_yaml_file(path, Scenario)
        except DataFileError as exc:
            failed += 1
            print(exc, file=sys.stderr)
            continue
        rules = len(scenario.rules)
        print(f"ok: {path}: {scenario.name} ({rules} rule{'s' * (rules > 1)})")
    return 1 if failed else 0


def _list_faults(args: argparse.Namespace) -> int:
    from aw_mcp.data_files import bundled_dir
    from aw_mcp.faults.scenario import Scenario
    from aw_mcp.yaml_files import load_yaml_file

    for path in sorted(bundled_dir("faults").glob("*.yaml")):
        scenario = load_yaml_file(path, Scenario)
        summary = (scenario.description.strip().splitlines() or [""])[0]
        print(f"{path.stem:20} {len(scenario.rules):2} rules  {summary}")
    return 0


def _print_faults_schema(args: argparse.Namespace) -> int:
    import json

    from aw_mcp.faults.scenario import scenario_json_schema

    print(json.dumps(scenario_json_schema(), indent=2))
    return 0


def _configure_logging(level: str) -> None:
    # stderr only: on stdio, stdout is the MCP wire.
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aw-mcp", description="MCP server of simulated worlds answered by a world model."
    )
    parser.add_argument("--version", action="version", version=f"aw-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve_parser(sub)
    _add_capture_parser(sub)
    p = sub.add_parser("simulators", help="list the bundled simulated domains")
    p.set_defaults(handler=_list_simulators)
    _add_faults_parser(sub)
    register_all(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except DataFileError as exc:
        print(f"aw-mcp: invalid file\n{exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"aw-mcp: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
