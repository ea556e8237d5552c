"""Where each file lives on disk, as the tools lay their files out (the contract's layout).

Pure: the server's import and export and the command line's push and pull share it.
"""

import re
from dataclasses import dataclass
from enum import StrEnum

from app.formats.agent_memory import FILENAMES, MemoryKind

DEFAULT_RUN = "default"
MEMORY_FILES = ("running-summary", "key-decisions", "failure-memory", "active-constraints")


class Kind(StrEnum):
    save = "save"
    snapshot = "working_context_snapshot"
    agent_memory = "agent_memory"
    run_state = "run_state"
    run_backup = "run_state_backup"
    feature_context = "feature_context"
    feature_workflow = "feature_workflow"
    memory_file = "memory_file"


@dataclass(frozen=True)
class Target:
    """What a path holds: its kind, the name it belongs to (save filename, agent, run,
    feature, memory file) and, for agent memory, which of its files."""

    kind: Kind
    name: str
    memory_kind: MemoryKind | None = None


_MEMORY_KINDS = {filename: kind for kind, filename in FILENAMES.items()}
_MEMORY_FILENAMES = "|".join(re.escape(filename) for filename in FILENAMES.values())
_NAME = r"([^/]+)"
_PATTERNS: list[tuple[re.Pattern[str], Kind]] = [
    (re.compile(r"mdan/(mdan-save-[0-9]+\.json(?:\.gz)?)"), Kind.save),
    (re.compile(rf"memory/agents/{_NAME}/working_context_snapshot\.json"), Kind.snapshot),
    (
        re.compile(rf"memory/agents/{_NAME}/({_MEMORY_FILENAMES})"),
        Kind.agent_memory,
    ),
    (re.compile(r"\.atari/state\.json()"), Kind.run_state),
    (re.compile(r"\.atari/state\.json\.backup()"), Kind.run_backup),
    (re.compile(rf"\.atari/runs/{_NAME}/state\.json"), Kind.run_state),
    (re.compile(rf"\.atari/runs/{_NAME}/state\.json\.backup"), Kind.run_backup),
    (re.compile(rf"features/{_NAME}/context\.json"), Kind.feature_context),
    (re.compile(rf"features/{_NAME}/workflow\.json"), Kind.feature_workflow),
    (re.compile(rf"\.autonomous/context/({'|'.join(MEMORY_FILES)})\.json"), Kind.memory_file),
]


def classify(path: str) -> Target | None:
    """The target of a normalised relative path, or None when the layout has no such file."""
    for pattern, kind in _PATTERNS:
        match = pattern.fullmatch(path)
        if match is None:
            continue
        name = match.group(1) or DEFAULT_RUN
        if kind is Kind.agent_memory:
            return Target(kind, name, _MEMORY_KINDS[match.group(2)])
        return Target(kind, name)
    return None


def save_path(filename: str) -> str:
    return f"mdan/{filename}"


def snapshot_path(agent: str) -> str:
    return f"memory/agents/{agent}/working_context_snapshot.json"


def agent_memory_path(agent: str, kind: MemoryKind) -> str:
    return f"memory/agents/{agent}/{FILENAMES[kind]}"


def _atari_dir(run: str) -> str:
    return ".atari" if run == DEFAULT_RUN else f".atari/runs/{run}"


def state_path(run: str) -> str:
    return f"{_atari_dir(run)}/state.json"


def backup_path(run: str) -> str:
    return f"{_atari_dir(run)}/state.json.backup"


def context_path(feature: str) -> str:
    return f"features/{feature}/context.json"


def workflow_path(feature: str) -> str:
    return f"features/{feature}/workflow.json"


def memory_file_path(name: str) -> str:
    return f".autonomous/context/{name}.json"
