"""Write sdd-unified features with sdd-unified's own orchestrator (not run by `make test`).

The orchestrator (`orchestrator/main.py` of anjan-poudel/sdd-unified, branch
`feature/paired-programming-codex`, the one that keeps `context.json`) is run, not copied: give
this script a checkout of that repository and it runs the orchestrator there, on feature
directories made in a temporary workspace from the repository's own templates, and copies the
files the orchestrator wrote into the golden workspace:

    git clone -b feature/paired-programming-codex <sdd-unified> /tmp/sdd-unified
    python tests/formats/generators/sdd_unified.py /tmp/sdd-unified

What the orchestrator does with them, and what the golden files therefore show:

- It writes `workflow.json` and `context.json` with `json.dump(document, f, indent=2)`: two
  spaces, `ensure_ascii` (non-ASCII as `\\uXXXX`), no newline at the end.
- `feature-002-password-reset` is made as seed 003 says (the template instantiated with
  `{{feature_name}}`, here "password-reset", in `features/feature-XXX-name/`): the
  orchestrator keeps that `feature_id`, which is not the directory's name. It is run in manual
  mode for three tasks, so its workflow is part done.
- `feature-001-login` has no `context.json`: the orchestrator creates one whose `feature_id` is
  the directory's name, and runs the whole workflow (autonomous mode).
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

GOLDEN_FEATURES = Path(__file__).parents[1] / "golden" / "workspace" / "features"

# What the feature-init command fills in (seed 003's "Initialization"); the requirement summary
# holds non-ASCII text, as a team writing in French and Chinese would.
PASSWORD_RESET = {
    "{{feature_name}}": "password-reset",
    "{{timestamp}}": "2026-03-02T08:15:00Z",
}
REQUIREMENT_SUMMARY = "Réinitialisation du mot de passe — 密码重置 by e-mail link"


def _instantiate(template: Path, values: dict[str, str]) -> str:
    text = template.read_text(encoding="utf-8")
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def _run(checkout: Path, feature: Path, mode: str, answers: str = "") -> None:
    subprocess.run(
        [sys.executable, str(checkout / "orchestrator" / "main.py"), str(feature), "--mode", mode],
        input=answers,
        text=True,
        check=True,
        cwd=feature,
        capture_output=True,
        # Non-strict: the orchestrator simulates the agents' `sdd-*` commands itself.
        env={"PATH": "/usr/bin:/bin", "SDD_STRICT_COMMANDS": "0"},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a checkout of sdd-unified")
    args = parser.parse_args()
    templates = args.checkout / "templates"

    with tempfile.TemporaryDirectory() as temporary:
        features = Path(temporary) / "features"

        password_reset = features / "feature-002-password-reset"
        password_reset.mkdir(parents=True)
        shutil.copyfile(templates / "workflow.json.template", password_reset / "workflow.json")
        context = _instantiate(templates / "context.json.template", PASSWORD_RESET)
        context = context.replace('"summary": ""', f'"summary": "{REQUIREMENT_SUMMARY}"', 1)
        (password_reset / "context.json").write_text(context, encoding="utf-8")
        # Three tasks by hand, then quit: a workflow part done.
        tasks = "init\ndefine-requirements\ndesign-l1\nquit\n"
        _run(args.checkout, password_reset, "manual", tasks)

        login = features / "feature-001-login"
        login.mkdir(parents=True)
        shutil.copyfile(templates / "workflow.json.template", login / "workflow.json")
        _run(args.checkout, login, "autonomous")

        for feature in (password_reset, login):
            target = GOLDEN_FEATURES / feature.name
            target.mkdir(parents=True, exist_ok=True)
            for name in ("context.json", "workflow.json"):
                shutil.copyfile(feature / name, target / name)
                print(target / name)


if __name__ == "__main__":
    main()
