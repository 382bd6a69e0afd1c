"""The sections of docs/performance.md, one module each, assembled by bench/report.py.

Each section module has a ``TITLE``, an ``INTRO`` (the paragraph under the heading) and
``render(results)``, which takes the records' directory and returns the section's markdown
(empty: no records, and the section is left off the page). ``common`` holds what they share.
"""
