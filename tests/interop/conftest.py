"""Fixtures of tests/interop: the Argos Translate packages of argos_fixtures, built once."""

from tests.interop.argos_fixtures import (  # noqa: F401
    argos_packages,
    bpe_package,
    marian_package,
    prenorm_package,
)
