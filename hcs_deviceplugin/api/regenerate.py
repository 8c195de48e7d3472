"""Regenerate the gRPC stubs in this package from ``proto/``.

Run ``python -m hcs_deviceplugin.api.regenerate`` from the repository root after changing a
``.proto`` file. The protos are compiled under the virtual root ``hcs_deviceplugin/api`` so that the
files all literally named ``api.proto`` get distinct descriptor-pool names and the generated modules
import each other by their real package path. Typed stubs (``.pyi``) come from mypy-protobuf so that
``mypy --strict`` checks every use of a message or stub.

Beside each ``api_pb2.py`` it writes ``api_wire.py``: plain-Python codecs for the same messages
(:mod:`hcs_deviceplugin.api.wiregen`), which the daemon uses so that it never loads the protobuf
runtime; the pb2 modules stay for the kubelet simulator, the bench and the tests (grpcio).

A test calls :func:`generate` into a temporary directory and compares the result with the committed
files, so a stale stub fails CI.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_FILES = (
    "deviceplugin/v1beta1/api.proto",
    "podresources/v1/api.proto",
    "pluginregistration/v1/api.proto",
    "dra/v1/api.proto",
    "dra/v1beta1/api.proto",
    "drahealth/v1alpha1/api.proto",
    "drahealth/v1/api.proto",
)
VIRTUAL_ROOT = "hcs_deviceplugin/api"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi", "_wire.py")


def repository_root() -> Path:
    """The checkout root: two levels above this package."""
    return Path(__file__).resolve().parents[2]


def _plugin(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        raise SystemExit(f"{name} not found: install the dev extras (mypy-protobuf)")
    return found


def generate(out_dir: Path, proto_dir: Path | None = None) -> list[Path]:
    """Compile every proto into ``out_dir`` (a tree rooted like the repository) and list the files."""
    from grpc_tools import protoc  # dev-only dependency: imported where it is needed

    from hcs_deviceplugin.api import wiregen

    proto_root = proto_dir or repository_root() / "proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{VIRTUAL_ROOT}={proto_root}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out=quiet:{out_dir}",
        f"--mypy_grpc_out=quiet:{out_dir}",
    ]
    args += [f"{VIRTUAL_ROOT}/{name}" for name in PROTO_FILES]
    with tempfile.TemporaryDirectory() as scratch:
        descriptors = Path(scratch) / "descriptors.pb"
        if protoc.main([*args, f"--descriptor_set_out={descriptors}"]) != 0:
            raise RuntimeError("protoc failed; see its output above")
        codecs = wiregen.generate_all(descriptors.read_bytes())
    for proto_name, source in codecs.items():
        (out_dir / proto_name).with_name(Path(proto_name).stem + "_wire.py").write_text(source)
    produced = sorted(
        p for p in (out_dir / VIRTUAL_ROOT).rglob("*") if p.is_file() and p.name.endswith(GENERATED_SUFFIXES)
    )
    return produced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=repository_root(), help="output root")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    for name in PROTO_FILES:
        version_dir = args.out / VIRTUAL_ROOT / Path(name).parent
        for package_dir in (version_dir.parent, version_dir):
            (package_dir / "__init__.py").touch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
