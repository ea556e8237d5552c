"""``python -m app.openapi write|check``: the committed openapi/openapi.json is what is served."""

import json
import sys
from typing import Any

from app.core.migrations import PROJECT_ROOT

SPEC_PATH = PROJECT_ROOT / "openapi" / "openapi.json"


def current_spec() -> dict[str, Any]:
    from app.core.config import AuthMode, Settings
    from app.main import create_app

    # The spec does not depend on the settings; these ones need no database or secrets.
    settings = Settings(database_url="sqlite://", auth=AuthMode.on)
    return create_app(settings).openapi()


def render(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "check"
    rendered = render(current_spec())
    if command == "write":
        SPEC_PATH.parent.mkdir(exist_ok=True)
        SPEC_PATH.write_text(rendered, encoding="utf-8")
        print(f"wrote {SPEC_PATH.relative_to(PROJECT_ROOT)}")
        return 0
    if command == "check":
        committed = SPEC_PATH.read_text(encoding="utf-8") if SPEC_PATH.exists() else ""
        if committed != rendered:
            print(f"{SPEC_PATH.relative_to(PROJECT_ROOT)} is out of date: run `make openapi`")
            return 1
        print("openapi/openapi.json is up to date")
        return 0
    print("usage: python -m app.openapi write|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
