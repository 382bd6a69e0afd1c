"""``aiayn serve``: an HTTP server over the inference functions (FastAPI + uvicorn).

``app`` holds the routes, ``batching`` the per-model queue that gathers concurrent requests
into one decode, ``models`` the loaded models, ``schemas`` the request and response bodies,
``server`` the process (uvicorn, signals). Needs the ``serve`` extra.
"""
