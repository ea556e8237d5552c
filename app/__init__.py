"""context-store: the working memory of coding agents, stored and given back byte for byte."""


def __getattr__(name: str) -> str:
    # One version, pyproject.toml's: the command's --version and the OpenAPI document show it.
    # Read when asked for: importlib.metadata would add 40 ms to every import of the package,
    # the client's included.
    if name == "__version__":
        from importlib.metadata import version

        return version("context-store")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
