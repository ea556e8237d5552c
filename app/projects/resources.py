"""What a project holds, by the name its counts are listed under.

Every domain's rows point at their project (their models import projects'), so projects cannot
import them back: the app factory hands the list in (``hold``), in the order counts are listed.
"""

from collections.abc import Mapping

from sqlmodel import SQLModel

PROJECT_RESOURCES: dict[str, type[SQLModel]] = {}


def hold(resources: Mapping[str, type[SQLModel]]) -> None:
    """What every project holds, for every app in the process: each table with a ``project_id``
    that cascades from the project's."""
    PROJECT_RESOURCES.clear()
    PROJECT_RESOURCES.update(resources)
