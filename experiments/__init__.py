"""The template's experiment grid, run against a baked project: `scripts/experiments`.

Reuses the bake's own benchmark machinery (its `bench` package: servers, nginx variants, wrk,
runner, results, report, chart) and adds what only the template needs: the BaseHTTPMiddleware
twins (basehttp.py, apps.py), the grid (grid.py) and the seeds' findings (findings.py).
"""
