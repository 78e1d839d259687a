"""``GET /api/v1/docs``: a self-contained page describing the OpenAPI document (no script or style from the
internet, unlike Swagger UI's default CDN assets; its style is the portal's stylesheet, as the
Content-Security-Policy allows no inline style)."""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["docs_page"]


def _schema_text(schema: Any) -> str:
    return html.escape(json.dumps(schema, ensure_ascii=False, indent=1)[:1500])


def docs_page(spec: dict[str, Any]) -> str:
    """An HTML page with every path, method, summary, parameters and request body of ``spec``."""
    rows: list[str] = []
    for path, ops in spec.get("paths", {}).items():
        for method, op in ops.items():
            params = "".join(
                f"<li><code>{html.escape(p['name'])}</code> ({html.escape(p.get('in', ''))})"
                f"{' required' if p.get('required') else ''} {html.escape(p.get('description', ''))}</li>"
                for p in op.get("parameters", [])
            )
            body = ""
            content = op.get("requestBody", {}).get("content", {})
            if content:
                kinds = ", ".join(html.escape(k) for k in content)
                first = next(iter(content.values())).get("schema", {})
                body = f"<p>Body ({kinds}):</p><pre>{_schema_text(first)}</pre>"
            codes = ", ".join(html.escape(str(c)) for c in op.get("responses", {}))
            rows.append(
                f'<section><h2><span class="m">{method.upper()}</span> <code>{html.escape(path)}</code></h2>'
                f"<p>{html.escape(op.get('summary', ''))}</p>"
                f"{'<ul>' + params + '</ul>' if params else ''}{body}<p>Responses: {codes}</p></section>"
            )
    title = html.escape(spec.get("info", {}).get("title", "API"))
    return (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f'<title>{title} docs</title><link rel="stylesheet" href="/static/portal.css">'
        f'<body class="api-docs"><h1>{title}</h1><p>The OpenAPI 3.1 document: <a href="openapi.json">openapi.json</a>. '
        "Errors are application/problem+json. With RAGPULSE_API_TOKEN set, send "
        "<code>Authorization: Bearer …</code>.</p>" + "".join(rows) + "</html>"
    )
