"""The Dockerfile, parsed by BuildKit's own parser (the ``dockerfile`` package), split into stages."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import dockerfile  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass(frozen=True)
class Instruction:
    cmd: str  # upper case: FROM, RUN, COPY, ...
    flags: tuple[str, ...]
    value: tuple[str, ...]
    json: bool
    original: str


@dataclass
class Stage:
    base: str  # the image, with ${ARG} defaults substituted
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, cmd: str) -> list[Instruction]:
        return [i for i in self.instructions if i.cmd == cmd]


def _substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def parse(path: Path = DOCKERFILE) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages in order)."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for command in dockerfile.parse_file(str(path)):
        instruction = Instruction(
            cmd=command.cmd.upper(),
            flags=tuple(command.flags),
            value=tuple(command.value),
            json=bool(command.json),
            original=command.original,
        )
        if instruction.cmd == "FROM":
            words = list(instruction.value)
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=_substitute(words[0], global_args), name=name))
        elif not stages:
            assert instruction.cmd == "ARG", f"only ARG before FROM: {instruction.original}"
            key, _, default = instruction.value[0].partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append(instruction)
    return global_args, stages


def copy_sources(stage: Stage) -> list[str]:
    """The build-context paths a stage's COPY instructions take (not those ``--from`` another stage)."""
    sources: list[str] = []
    for copy in stage.of("COPY"):
        if any(flag.startswith("--from=") for flag in copy.flags):
            continue
        sources.extend(copy.value[:-1])
    return sources


def dockerignore_patterns(path: Path = DOCKERIGNORE) -> list[str]:
    lines = path.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
