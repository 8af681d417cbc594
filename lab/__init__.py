"""The template's laboratory: measures a generated project, a user's own service included.

`./scripts/bench PROJECT_DIR` (python -m lab) counts the middleware's instructions per request
(the cost gate the template's CI blocks on) and measures requests/s of the middleware and of
the nginx hop with the stack's own config files. See docs/performance.md.
"""
