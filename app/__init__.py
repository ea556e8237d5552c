"""context-store: the working memory of coding agents, stored and given back byte for byte."""

from importlib.metadata import version

# One version, pyproject.toml's: the command's --version and the OpenAPI document show it.
__version__ = version("context-store")
