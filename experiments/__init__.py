"""The template's experiment grid, run against a baked project: `scripts/experiments`.

Reuses the template's lab (lab/: servers, nginx variants, wrk, runner, results, report,
chart, the cost gate) and adds what only the template needs: the BaseHTTPMiddleware
twins (basehttp.py, apps.py), the grid (grid.py) and the seeds' findings (findings.py).
"""
