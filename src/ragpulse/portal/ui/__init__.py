"""The portal's web UI: server-rendered Jinja2 templates with htmx (vendored in ``static/``), English and Chinese
(:mod:`~ragpulse.portal.ui.i18n`), SVG charts (:mod:`~ragpulse.portal.ui.charts`)."""
