# swagger-ui-bundle-v2 ships no py.typed marker; its module annotates this one name as a Path.
from pathlib import Path

swagger_ui_path: Path
