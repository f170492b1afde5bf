"""HTML pages of saved reports (``--html``, ``samebits report``), charts as inline SVG."""
