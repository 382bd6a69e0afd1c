"""``/docs``: Swagger UI over ``/openapi.json``, its scripts and styles served from the
``swagger-ui-bundle-v2`` package (the serve extra), so the page works without a network. Without
that package the page says how to install it and where the schema is."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

router = APIRouter(include_in_schema=False)

ASSETS = {  # the files the page loads, by the name it asks for
    "swagger-ui-bundle.js": "application/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def swagger_ui_dir():
    """The directory of Swagger UI's files, or None when the package is not installed."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    return swagger_ui_path


@router.get("/docs", response_class=HTMLResponse)
async def docs(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "").rstrip("/")
    openapi_url = root + request.app.openapi_url
    if swagger_ui_dir() is None:
        return HTMLResponse(
            "<!doctype html><title>aiayn API</title><h1>aiayn API</h1>"
            "<p>Swagger UI is not installed here: <code>pip install 'aiayn[serve]'</code> "
            "brings it (the swagger-ui-bundle-v2 package).</p>"
            f'<p>The OpenAPI schema is at <a href="{openapi_url}">{openapi_url}</a>.</p>'
        )
    return get_swagger_ui_html(
        openapi_url=openapi_url,
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{root}/docs/swagger-ui-bundle.js",
        swagger_css_url=f"{root}/docs/swagger-ui.css",
        swagger_favicon_url=f"{root}/docs/favicon-32x32.png",
    )


@router.get("/docs/{name}")
async def asset(name: str) -> FileResponse:
    folder = swagger_ui_dir()
    if name not in ASSETS or folder is None:
        raise HTTPException(404, f"no file {name!r} under /docs")
    headers = {"Cache-Control": "public, max-age=86400"}
    return FileResponse(str(folder / name), media_type=ASSETS[name], headers=headers)
