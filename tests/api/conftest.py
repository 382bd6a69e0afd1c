"""The tiny model directories of every family (shared with the server's tests), and the
Argos Translate packages of tests.interop.argos_fixtures."""

from tests.interop.argos_fixtures import (  # noqa: F401 - fixtures
    argos_packages,
    bpe_package,
    marian_package,
    prenorm_package,
)
from tests.serve.conftest import model_dirs  # noqa: F401 - a fixture
