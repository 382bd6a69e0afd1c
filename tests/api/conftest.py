"""The tiny model directories of every family (shared with the server's tests)."""

from tests.serve.conftest import model_dirs  # noqa: F401 - a fixture
